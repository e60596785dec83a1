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
