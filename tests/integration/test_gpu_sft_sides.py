"""benchmarks/gpu_sft.py's sides train with the optimizer their rows name: a comparison "with TRL's optimizer" that
ran smolalign's stochastic-rounding AdamW (which torch's AdamW named in train.optim still gets on bf16 weights) would
spend scarce GPU time on a mislabelled row. Each child reports the optimizer its trainer created; here a real
`smolalign sft` child trains bf16 weights on the CPU (SMOLALIGN_CPU_BF16=1: a bf16 CPU's precisions) for one step."""

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def gpu_sft():
    saved = list(sys.path)
    sys.path.append(str(BENCHMARKS))
    try:
        yield importlib.import_module("gpu_sft")
    finally:
        sys.path[:] = saved


@pytest.mark.parametrize(("plain_adamw", "ran"), [(False, "StochasticRoundingAdamW"), (True, "AdamW")])
def test_a_smolalign_side_trains_with_the_optimizer_it_names(gpu_sft, tiny_dir, tmp_path, plain_adamw, ran):
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in gpu_sft.conversations(8, 30)))
    settings = {**gpu_sft.shared_settings(256, 1), "gradient_checkpointing": False}
    side = gpu_sft.Side("sdpa", dtype="bfloat16", plain_adamw=plain_adamw)
    result = gpu_sft.smolalign_run(tiny_dir, data, tmp_path, settings, side,
                                   env={"SMOLALIGN_CPU_BF16": "1", "OMP_NUM_THREADS": "1"}, timeout=300)
    assert result["optimizer"] == ran
    assert result["points"][-1]["step"] == 1
