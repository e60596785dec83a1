"""The plan's memory and time through the CLI: bad launch.gpu / launch.gpu_memory / model configs exit 2 before
anything loads, and a plan that does not fit the target comes with changes that make the estimate fit."""

import json

import pytest
from tiny_models import chat_rows, write_jsonl


@pytest.fixture
def recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))

    def make(model: str | None = None, **launch) -> str:
        return str(write_recipe({"model": {"source": model or str(tiny_dir)}, "template": {"name": "smollm3"},
                                 "data": {"sources": [{"path": str(data)}]},
                                 "train": {"max_length": 256, "max_steps": 2, "per_device_train_batch_size": 2},
                                 **({"launch": launch} if launch else {})}))

    return make


def one_line(code, err, *fragments):
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_unknown_gpu_type(cli, recipe, tmp_path):
    code, _, err = cli("sft", recipe(), "--dry-run", "--set", "launch.gpu=H1000", "-o", tmp_path / "run")
    one_line(code, err, "launch.gpu", "H1000")
    assert not (tmp_path / "run").exists()


def test_budget_that_is_not_a_size(cli, recipe):
    code, _, err = cli("sft", recipe(gpu_memory="a lot"), "--dry-run")
    one_line(code, err, "launch.gpu_memory", "a lot")


def test_model_config_that_cannot_be_read(cli, recipe, tiny_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in tiny_dir.iterdir():
        (broken / item.name).symlink_to(item)
    (broken / "config.json").unlink()
    (broken / "config.json").write_text('{"model_type": "llama", "hidden_size": ')
    code, _, err = cli("sft", recipe(model=str(broken)), "--dry-run")
    one_line(code, err, "model.source", str(broken))


def test_dry_run_with_a_target_loads_nothing_and_writes_nothing(cli, recipe, tmp_path):
    code, out, err = cli("sft", recipe(gpu="A100-40GB", gpu_memory="30GB"), "--dry-run", "-o", tmp_path / "run")
    assert code == 0, err
    assert not (tmp_path / "run").exists()


def test_a_plan_that_does_not_fit_gets_changes_that_fit(tiny_dir):
    """The knobs are checked on the estimate itself: applying them brings the peak under the budget."""
    from dataclasses import replace

    from recipe_runs import run_of

    from smolalign.estimate.dims import read_dims
    from smolalign.estimate.memory import CUDA_CONTEXT, Setup
    from smolalign.estimate.plan_rows import _estimate, knobs_to_fit
    from smolalign.models.sources import resolve_source

    raw = {"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": "x.jsonl"}]},
           "train": {"max_length": 2048, "per_device_train_batch_size": 8, "gradient_checkpointing": False}}
    recipe = run_of(raw, "sft", "test")
    dims = read_dims(resolve_source(str(tiny_dir)))
    settings = {"optim": "adamw_torch", **recipe.recipe.train}
    setup = Setup(processes=4, sharding="ddp", dtype="bfloat16", gpu=True)
    before = _estimate(recipe, settings, setup, dims, None).peak
    budget = CUDA_CONTEXT + int((before - CUDA_CONTEXT) * 0.35)
    knobs = knobs_to_fit(recipe, settings, setup, dims, budget)
    assert knobs and knobs[0] == "train.gradient_checkpointing=true"
    applied_settings, applied_setup = dict(settings), setup
    for knob in knobs:
        if knob.startswith("train."):
            key, value = knob.split(" ")[0][len("train."):].split("=")
            applied_settings[key] = value == "true" if value in ("true", "false") else int(value)
        elif knob.startswith("--launch zero3"):
            applied_setup = replace(applied_setup, sharding="zero3")
    assert _estimate(recipe, applied_settings, applied_setup, dims, None).peak <= budget < before


def test_slurm_plan_sizes_the_job_not_the_login_node(cli, recipe, tmp_path):
    """The script is written for the cluster's GPUs; the plan's target is launch.gpu (nothing on this node)."""
    script = tmp_path / "job.sbatch"
    code, out, err = cli("launch", "slurm", recipe(gpu="H100"), "--nodes", "2", "--preset", "zero3",
                         "--script", script)
    assert code == 0, err
    assert script.is_file()


def test_calibration_times_real_steps_on_this_machine(recipe, tiny_dir):
    from smolalign.estimate.calibrate import calibrate
    from smolalign.estimate.dims import read_dims
    from smolalign.estimate.memory import Setup
    from smolalign.models.config import read_config
    from smolalign.models.sources import resolve_source

    source = resolve_source(str(tiny_dir))
    dims = read_dims(source)
    work = {"tokens_per_micro_batch": 2 * 64, "sequence_length": 64, "sequences_per_step": 4}
    seconds, how = calibrate(read_config(source), dims, {"per_device_train_batch_size": 2}, work,
                             Setup(gpu=False, dtype="float32"))
    assert 0 < seconds < 60
    assert json.dumps(how)


def planned_peak(path: str) -> int:
    """The estimate's peak for the recipe on its target, from the estimate's own functions."""
    from recipe_runs import loaded_run

    from smolalign.estimate.dims import read_dims
    from smolalign.estimate.plan_rows import _estimate
    from smolalign.estimate.settings import setup_for, target_device
    from smolalign.hardware import detect_hardware

    hardware = detect_hardware()
    loaded = loaded_run(path, [], "sft", hardware=hardware)
    gpu, budget = target_device(loaded.recipe, hardware)
    return _estimate(loaded, loaded.settings, setup_for(loaded.recipe, hardware, gpu), read_dims(loaded.source()),
                     budget).peak


@pytest.mark.parametrize(("share", "allow", "refused"), [(0.97, False, True), (0.97, True, False),
                                                           (0.93, False, False)], ids=["above", "above-allowed", "below"])
def test_a_peak_above_95_percent_of_the_device_is_refused(cli, recipe, tmp_path, share, allow, refused):
    """A stand-in device (an H100 with launch.gpu_memory as its memory) that the plan's peak fills to 97% or 93%:
    above 95% the dry run exits 2 with one line naming both sizes and the override, and writes nothing;
    launch.allow_memory_overrun runs it anyway. Fails with the refusal switched off."""
    from smolalign.quantities import describe_bytes

    path = recipe(gpu="H100")
    peak = planned_peak(path)
    budget = peak / share
    run = tmp_path / "run"
    overrides = ["--set", f"launch.gpu_memory={budget / 1e9!r}"]
    if allow:
        overrides += ["--set", "launch.allow_memory_overrun=true"]
    code, _, err = cli("sft", path, "--dry-run", "-o", run, *overrides)
    if refused:
        one_line(code, err, "memory per device", describe_bytes(peak), describe_bytes(int(budget)),
                 "launch.allow_memory_overrun=true")
    else:
        assert code == 0, err
    assert not run.exists()


@pytest.mark.parametrize(("share", "allow", "warned"), [(0.97, False, True), (0.97, True, False),
                                                          (0.93, False, False)], ids=["above", "above-allowed", "below"])
def test_a_peak_above_95_percent_of_this_machines_memory_is_warned_about_on_a_cpu(cli, recipe, tmp_path, monkeypatch,
                                                                                 share, allow, warned):
    """Training on this CPU, the budget is this machine's memory (a stand-in size here, that the plan's peak fills to
    97% or 93%): a plan of 98 GB on a 23 GB machine used to pass its dry run in silence and be killed for memory."""
    import torch

    from smolalign.quantities import describe_bytes

    if torch.cuda.is_available():
        pytest.skip("the budget here is a GPU's")
    path = recipe()
    peak = planned_peak(path)
    ram = int(peak / share)
    monkeypatch.setattr("smolalign.estimate.plan_rows.this_machine_memory", lambda: ram)
    overrides = ["--set", "launch.allow_memory_overrun=true"] if allow else []
    code, out, err = cli("sft", path, "--dry-run", "-o", tmp_path / "run", *overrides)
    assert code == 0 and f"at the peak of {describe_bytes(ram)} (this machine's RAM)" in out, err
    memory_warnings = [line for line in err.splitlines() if line.startswith("warning: memory:")]
    if warned:
        assert memory_warnings == [line for line in memory_warnings if describe_bytes(peak) in line
                                   and describe_bytes(ram) in line and "--launch" not in line] != []
    else:
        assert memory_warnings == []


def test_this_machines_memory_is_what_the_kernel_reports():
    import os

    from smolalign.estimate.settings import this_machine_memory

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    found = this_machine_memory()
    assert found is not None and 0 < found <= physical
