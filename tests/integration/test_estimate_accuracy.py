"""Predicted against measured peak memory of real SFT steps on the CPU (TRL's SFTTrainer, random weights): measured
as the process's real high-water mark (a fresh subprocess's ru_maxrss less its resident set just before the model
is built; benchmarks/estimate.py). Two of the three shapes are held out: no part of the estimate (its per-layer
count of saved activations, the loss head's CPU_TILE_TEMPORARIES, a count from the kernel's code) was written or
checked against them before; they differ in width, depth, vocabulary, head counts and tying."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 0.10
"""The error stated in docs/scaling/memory.md (Will it fit, and how long): measured 0.3-4.3% on these six cases."""


@pytest.mark.parametrize("options", [
    ["--model", "small", "--batch", "2", "--length", "512"],
    ["--model", "held-out-a", "--batch", "1", "--length", "1024", "--checkpointing"],
    ["--model", "held-out-b", "--batch", "2", "--length", "768", "--accumulation", "2"],
], ids=["small", "held-out-a+checkpointing", "held-out-b+accumulation"])
def test_peak_memory_within_the_stated_error(options):
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "estimate.py"), "--steps", "2",
                             "--memory-only", *options], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["measured_peak"] == measured["measured_rss_above_start"]  # the real high-water mark
    assert measured["measured_peak"] > 300 * 1024**2  # the step really ran: weights, states, activations
    assert abs(measured["predicted_peak"] / measured["measured_peak"] - 1) <= TOLERANCE, measured
