"""Predicted against measured peak memory of real SFT steps on the CPU (TRL's SFTTrainer, random weights): the
measured peak is the highest level of live tensor bytes in torch's CPU allocator (benchmarks/estimate.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("options", [
    ["--batch", "2", "--length", "512"],
    ["--batch", "1", "--length", "1024", "--accumulation", "2", "--checkpointing"],
], ids=["plain", "accumulation+checkpointing"])
def test_peak_memory_within_20_percent(options):
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "estimate.py"), "--model", "small",
                             "--steps", "2", "--memory-only", *options], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["measured_peak"] > 300 * 1024**2  # the step really ran: weights, states, activations
    assert 0.8 <= measured["predicted_peak"] / measured["measured_peak"] <= 1.2, measured
