"""`--resume` resumes, for every kind of stage (SFT, DPO, GRPO, distillation) on one process: a 4-step run cut back
to checkpoint-2 and resumed leaves the checkpoint untouched, logs only steps 3-4 with the uninterrupted run's losses
and ends on its weights; negating the saved Adam first moments changes where it ends (the optimizer state is read,
not only the weights); for SFT a rewound learning-rate schedule and for GRPO a changed sampling RNG state change it
too. A restart from scratch passes none of the first and matches the uninterrupted run on the others, so each check
here fails when resume is switched off (the teeth tier's `resume_off` mutation)."""

import shutil

import pytest
import torch
from resume_checks import (
    VERBS,
    assert_resumed,
    build_teacher,
    cut_back,
    largest_difference,
    perturb_optimizer_state,
    stage_recipe,
    weights,
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("resume")


@pytest.fixture(scope="module")
def teacher(tiny_tokenizer, folder):
    return build_teacher(folder, tiny_tokenizer)


@pytest.fixture(scope="module")
def uninterrupted(folder, tiny_dir, tiny_tokenizer, teacher):
    """stage name -> its recipe and its uninterrupted 4-step run, each run once for the module whatever order its
    tests come in (pytest sets a parametrized fixture up again each time the parameter changes)."""
    import yaml

    from smolalign.cli import main

    runs = {}

    def of(name: str) -> dict:
        if name not in runs:
            path = folder / f"{name}.yaml"
            path.write_text(yaml.safe_dump(stage_recipe(name, folder, tiny_dir, teacher)))

            def run(*args) -> None:
                try:
                    main([VERBS[name], str(path), *map(str, args)])
                except SystemExit as exc:
                    assert not exc.code, f"{name} {args}: exit {exc.code}"

            full = folder / f"{name}-full"
            run("-o", full)
            runs[name] = {"name": name, "run": run, "full": full}
        return runs[name]

    return of


@pytest.fixture(params=list(VERBS))
def stage(request, uninterrupted):
    """The stage's recipe and its uninterrupted 4-step run."""
    return uninterrupted(request.param)


def test_resume_continues_from_the_checkpoint(stage, tmp_path):
    resumed = tmp_path / "resumed"
    cut = cut_back(stage["full"], resumed)
    stage["run"]("-o", resumed, "--resume")
    assert_resumed(stage["full"], resumed, cut)
    assert largest_difference(weights(resumed / "model"), weights(stage["full"] / "checkpoint-2")) > 1e-4  # it trained


@pytest.mark.parametrize("stage", ["sft"], indirect=True)
def test_a_resumed_run_reports_the_whole_runs_mean_loss(stage, tmp_path):
    """transformers divides the resumed steps' loss by every step of the run; the manifest (and the card's "mean
    training loss") must hold the uninterrupted run's mean, from the per-step losses logged before the checkpoint."""
    import json

    resumed = tmp_path / "resumed"
    cut_back(stage["full"], resumed)
    stage["run"]("-o", resumed, "--resume")
    full, after = (json.loads((run / "manifest.json").read_text())["result"]["train_loss"]
                   for run in (stage["full"], resumed))
    assert after == pytest.approx(full, rel=1e-5)


def test_resume_reads_the_optimizer_state(stage, tmp_path):
    resumed = tmp_path / "perturbed"
    cut_back(stage["full"], resumed)
    assert perturb_optimizer_state(resumed / "checkpoint-2") > 0
    stage["run"]("-o", resumed, "--resume")
    assert largest_difference(weights(resumed / "model"), weights(stage["full"] / "model")) > 1e-4


@pytest.mark.parametrize("stage", ["sft", "grpo"], indirect=True)
def test_resume_reads_the_schedule_and_the_rng(stage, tmp_path):
    """SFT's linear decay rewound to step 0 (a larger learning rate for steps 3-4), or GRPO's sampling RNG state
    replaced: either must change the end, so the resume restored them (the other stages share the Trainer's resume
    of both)."""
    resumed = tmp_path / "perturbed"
    cut_back(stage["full"], resumed)
    checkpoint = resumed / "checkpoint-2"
    if stage["name"] == "sft":
        scheduler = torch.load(checkpoint / "scheduler.pt", weights_only=False)
        assert scheduler["last_epoch"] == 2
        scheduler["last_epoch"] = scheduler["_step_count"] = 0
        torch.save(scheduler, checkpoint / "scheduler.pt")
    else:
        rng = torch.load(checkpoint / "rng_state.pth", weights_only=False)
        generator = torch.Generator().manual_seed(12345)
        rng["cpu"] = generator.get_state()
        torch.save(rng, checkpoint / "rng_state.pth")
    stage["run"]("-o", resumed, "--resume")
    assert largest_difference(weights(resumed / "model"), weights(stage["full"] / "model")) > 1e-4


def test_a_cut_back_copy_is_what_a_killed_run_leaves(stage, tmp_path):
    """Control for the checks above: the copy resumes from checkpoint-2 alone (no later state survives the cut)."""
    copy = tmp_path / "copy"
    cut = cut_back(stage["full"], copy)
    assert sorted(p.name for p in copy.glob("checkpoint-*")) == ["checkpoint-2"] and not (copy / "model").exists()
    assert cut.step == 2 and cut.kept >= 1
    shutil.rmtree(copy)
