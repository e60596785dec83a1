"""The run directory on --resume: a requeued job with no checkpoint yet starts over, a checkpoint cut off while
saving is skipped, and a finished run without checkpoints is not retrained behind the user's back."""

import pytest

from smolalign.errors import SmolalignError
from smolalign.runs.rundir import prepare_run_dir


def test_resume_without_a_checkpoint_starts_fresh_and_skips_a_cut_off_save(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert prepare_run_dir(run_dir, resume=True, overwrite=False) is None and run_dir.is_dir()
    (run_dir / "recipe.yaml").write_text("stage: sft\n")  # a run requeued before its first checkpoint
    assert prepare_run_dir(run_dir, resume=True, overwrite=False) is None
    assert "starting from the beginning" in capsys.readouterr().err
    for step in (10, 20):
        (run_dir / f"checkpoint-{step}").mkdir()
    (run_dir / "checkpoint-10" / "trainer_state.json").write_text("{}")
    (run_dir / "checkpoint-20" / "model.safetensors").write_text("")  # preempted while saving
    assert prepare_run_dir(run_dir, resume=True, overwrite=False) == run_dir / "checkpoint-10"
    assert "skipping" in capsys.readouterr().err
    finished = tmp_path / "finished"
    (finished / "model").mkdir(parents=True)
    with pytest.raises(SmolalignError, match="holds a finished model"):
        prepare_run_dir(finished, resume=True, overwrite=False)


def test_summary_skips_steps_whose_value_was_not_logged(tmp_path):
    """A step where no reward could be scored logs None: the summary reads the steps that have a value."""
    import json

    from smolalign.runs.metrics import summary

    rows = [{"step": 1, "reward": None}, {"step": 2, "reward": 0.25, "kl": None}, {"step": 3, "reward": 0.75, "kl": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert summary(tmp_path, "reward", ("kl",)) == "reward 0.25 (step 2) -> 0.75 (step 3); kl nan -> 0.5"
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": None}) + "\n")
    assert summary(tmp_path, "reward").startswith("reward: nothing logged")
