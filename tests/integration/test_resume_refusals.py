"""Resumes that would train on silently as another run: a checkpoint saved with train.save_only_model holds no
optimizer, schedule or RNG state (transformers resumed from it with a new optimizer and the learning rate back at the
start of its schedule: a DPO run's step-9 loss 0.35 against 0.04), and a recipe whose method changed since the run
started (a DPO run went on as KTO on rows counted for DPO, its card naming KTO for the whole run). Both are refused
before anything loads, dry run or not, and the checkpoint is left as it was."""

import hashlib

import pytest
from resume_checks import cut_back
from tiny_models import pair_rows, write_jsonl


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def dpo_run(cli, write_recipe, tiny_dir, tmp_path, **train):
    """A 4-step DPO run saving at step 2, cut back to that checkpoint (as if killed after saving it)."""
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(16))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 4,
                                     "save_steps": 2, "logging_steps": 1, "gradient_checkpointing": False, **train}})
    code, _, err = cli("po", recipe, "-o", tmp_path / "full")
    assert code == 0, err
    cut_back(tmp_path / "full", tmp_path / "cut")
    return recipe, tmp_path / "cut"


def refused(cli, recipe, run, *args) -> list[str]:
    before = digest(run / "checkpoint-2")
    errors = []
    for dry in ([], ["--dry-run"]):
        code, _, err = cli("po", recipe, "-o", run, "--resume", *args, *dry)
        assert code == 2, err
        errors.append(err)
    assert digest(run / "checkpoint-2") == before and not (run / "model").exists()
    return errors


def test_a_weights_only_checkpoint_is_not_resumed(cli, write_recipe, tiny_dir, tmp_path):
    recipe, run = dpo_run(cli, write_recipe, tiny_dir, tmp_path, save_only_model=True)
    assert not list((run / "checkpoint-2").glob("optimizer.pt"))  # what transformers saved: the weights only
    for err in refused(cli, recipe, run):
        assert f"--resume: {run / 'checkpoint-2'} holds the model's weights only (train.save_only_model" in err, err


@pytest.mark.parametrize("method", ["apo_zero", "kto"])
def test_a_resume_under_another_method_is_refused(cli, write_recipe, tiny_dir, tmp_path, method):
    recipe, run = dpo_run(cli, write_recipe, tiny_dir, tmp_path)
    for err in refused(cli, recipe, run, "--set", f"method={method}"):
        assert f"--resume: method changed since {run} started (its recipe.yaml): the steps after the checkpoint " \
               "would train another loss" in err, err
    code, _, err = cli("po", recipe, "-o", run, "--resume")  # the run's own method resumes
    assert code == 0, err
