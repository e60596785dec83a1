"""`reference: precomputed`: TRL keeps the reference's log-probs in a file beside the prepared rows, named by the
rows' fingerprint and the weights. Rows smolalign prepared once serve runs with another train.truncation_mode or
ld_alpha, whose reference log-probs differ: at step 1, where the policy is the reference, such a run logged a DPO
loss of 0.018 and margins of 4.2 (log-probs computed under the old setting) instead of ln 2 and 0."""

import math

import pytest
from tiny_models import pair_rows, write_jsonl

from smolalign.runs.metrics import read_metrics


def first_step(run_dir) -> dict:
    return next(m for m in read_metrics(run_dir) if "loss" in m)


def test_a_changed_truncation_reads_reference_log_probs_of_its_own(cli, write_recipe, tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "cache"))  # the rows prepared once, for all three runs
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(8))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
                           "reference": "precomputed", "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 22, "per_device_train_batch_size": 2, "max_steps": 1,
                                     "logging_steps": 1, "gradient_checkpointing": False}})
    for name, mode in (("first", "keep_start"), ("again", "keep_start"), ("other", "keep_end")):
        code, _, err = cli("po", recipe, "-o", tmp_path / name, "--set", f"train.truncation_mode={mode}")
        assert code == 0, err
        step = first_step(tmp_path / name)
        assert step["loss"] == pytest.approx(math.log(2), abs=1e-4), (name, step)
        assert step["rewards/margins"] == pytest.approx(0.0, abs=1e-4), (name, step)
