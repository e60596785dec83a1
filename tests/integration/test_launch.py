"""`--launch PRESET --num-processes N`: the same command re-run on several processes (torchrun with gloo on the
CPU), and presets named wrongly or needing GPUs refused."""

import json
import subprocess
import sys

import pytest
import torch
from launched_config import launched_sft_config
from recipe_runs import command_run
from resume_checks import assert_resumed, cut_back
from tiny_models import chat_rows, write_jsonl


@pytest.fixture
def sft_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(32))
    return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                             "data": {"sources": [{"path": str(data)}]},
                             "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2,
                                       "max_steps": 4, "learning_rate": 5e-3, "logging_steps": 1, "save_steps": 2,
                                       "gradient_checkpointing": False}}))


def smolalign(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smolalign", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path")
def test_two_processes_on_cpu(sft_recipe, tmp_path):
    run_dir = tmp_path / "run"
    done = smolalign("sft", sft_recipe, "-o", run_dir, "--launch", "ddp", "--num-processes", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["result"]["global_step"] == 4
    # Both ranks trained: the Trainer saves one RNG state per process.
    assert sorted(p.name for p in (run_dir / "checkpoint-4").glob("rng_state*")) == ["rng_state_0.pth",
                                                                                    "rng_state_1.pth"]
    # The global batch was 2 rows × 2 processes: 4 steps went through 16 rows' worth of an epoch.
    packed_rows = manifest["data"]["stats"]["train"]["packed_rows"]
    epoch = json.loads((run_dir / "checkpoint-4" / "trainer_state.json").read_text())["epoch"]
    assert epoch == pytest.approx(4 * 4 / packed_rows)
    assert (run_dir / "model" / "config.json").is_file()

    # The mean training loss counts both ranks in the steps after the last logging step too (transformers adds
    # them from rank 0 alone): logging every 3 steps of 4, it is the mean of the 4 steps logged every step.
    sparse = tmp_path / "sparse"
    done = smolalign("sft", sft_recipe, "-o", sparse, "--launch", "ddp", "--num-processes", "2",
                     "--set", "train.logging_steps=3", "--set", "train.save_strategy='no'")
    assert done.returncode == 0, done.stderr[-3000:]
    loss = json.loads((sparse / "manifest.json").read_text())["result"]["train_loss"]
    assert loss == pytest.approx(manifest["result"]["train_loss"], abs=1e-5)

    # Cut back to the first checkpoint and resume on two processes: it resumes (the checkpoint untouched, only steps
    # 3-4 logged, with the uninterrupted run's losses) to the uninterrupted run's weights.
    resumed = tmp_path / "resumed"
    cut = cut_back(run_dir, resumed)
    # On one process the global batch would halve: the steps after the checkpoint would count other batches.
    done = smolalign("sft", sft_recipe, "-o", resumed, "--resume")
    assert done.returncode == 2 and "started with a global batch of 4 rows and this run's is 2" in done.stderr
    done = smolalign("sft", sft_recipe, "-o", resumed, "--resume", "--launch", "ddp", "--num-processes", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert_resumed(run_dir, resumed, cut, atol=1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path")
def test_a_rewards_file_in_the_working_directory_does_not_hide_smolaligns(sft_recipe, tmp_path):
    """A team's rewards.py where the command runs: `python -m smolalign`, which the launcher starts on each rank, puts
    the working directory first on the module path, so the file hid smolalign's `rewards` package on every rank (the
    `smolalign` command, one process, does not)."""
    from pathlib import Path

    work = tmp_path / "project"
    work.mkdir()
    (work / "rewards.py").write_text("def right(completions, **kw):\n    return [1.0] * len(completions)\n")
    command = Path(sys.executable).with_name("smolalign")
    done = subprocess.run([str(command), "sft", sft_recipe, "-o", tmp_path / "run", "--launch", "ddp",
                           "--num-processes", "2", "--set", "train.max_steps=1", "--set", "train.save_strategy='no'"],
                          capture_output=True, text=True, timeout=300, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "model" / "config.json").is_file()


@pytest.mark.parametrize(("preset", "message"), [
    ("zer3", "no such accelerate config or preset (did you mean zero3?)"),
    pytest.param("fsdp2", "FSDP needs GPUs here", marks=pytest.mark.skipif(torch.cuda.is_available(),
                                                                            reason="CPU only")),
])
def test_presets_are_checked(cli, sft_recipe, preset, message):
    code, out, err = cli("sft", sft_recipe, "--launch", preset, "--num-processes", "2")
    assert code == 2 and message in err


@pytest.mark.parametrize(("world", "per_device", "expected"), [("1", 2, 16), ("4", 2, 4), ("8", 4, 1)])
def test_global_batch_is_kept_over_any_process_count(cli, sft_recipe, monkeypatch, tmp_path, world, per_device,
                                                     expected):
    """The SFTConfig the trainer is built with (as each launched process builds it, WORLD_SIZE set by the
    launcher) accumulates so that per device × processes × accumulation is the recipe's global batch."""
    config, hardware = launched_sft_config(sft_recipe, ["launch.global_batch_size=32",
                                                        f"train.per_device_train_batch_size={per_device}"],
                                           int(world), tmp_path)
    assert hardware.world_size == int(world) and config.gradient_accumulation_steps == expected
    assert config.per_device_train_batch_size * hardware.world_size * config.gradient_accumulation_steps == 32
    monkeypatch.setenv("WORLD_SIZE", world)
    code, out, err = cli("sft", sft_recipe, "--dry-run", "--set", "launch.global_batch_size=32",
                         "--set", f"train.per_device_train_batch_size={per_device}")
    assert code == 0, err
    assert "global batch           32" in out  # the plan says what the trainer will do


def test_a_global_batch_that_does_not_divide_is_exit_2(cli, sft_recipe, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    code, out, err = cli("sft", sft_recipe, "--dry-run", "--set", "launch.global_batch_size=32")
    assert code == 2 and "not a multiple of per-device batch 2 × 3 process(es)" in err


def test_the_recipe_launch_section_launches(sft_recipe, monkeypatch):
    import smolalign.hardware
    from smolalign.launch import planned_launch

    monkeypatch.setattr(smolalign.hardware, "visible_gpu_count", lambda: 0)  # a CPU machine
    argv = ["sft", sft_recipe, "-o", "out", "--set", "launch.preset=ddp", "--set", "launch.num_processes=4"]
    assert planned_launch(command_run(argv), None, None) == ("ddp", 4)
    assert planned_launch(command_run(argv), None, 2) == ("ddp", 2)  # --num-processes wins over the recipe
    assert planned_launch(command_run(["sft", sft_recipe]), None, None) == (None, 1)
