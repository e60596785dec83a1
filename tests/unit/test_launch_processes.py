"""How many processes a train verb runs, on a node of N GPUs (the stand-in: the count of CUDA devices this process
sees, which torch reads through NVML, is N): one per GPU by default, leaving out those of a vLLM
server the run starts; --num-processes, else the recipe's launch.num_processes, when given; more processes than GPUs,
or one process that sees several GPUs (torch's DataParallel, which TRL's trainers refuse), refused with exit 2
before anything loads. The launch is stopped where accelerate would start: the config file accelerate receives is
read back with accelerate's own config loader."""

from types import SimpleNamespace

import pytest
from recipe_runs import command_run
from tiny_models import chat_rows, write_jsonl

from smolalign.errors import SmolalignError
from smolalign.launch import planned_launch


@pytest.fixture
def sft_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    return str(write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                             "train": {"max_length": 128, "max_steps": 1}}))


@pytest.fixture
def node(monkeypatch):
    """A node with `gpus` GPUs, seen by this process before any launcher started it."""
    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "SMOLALIGN_LAUNCHED", "ACCELERATE_USE_DEEPSPEED",
                 "ACCELERATE_USE_FSDP", "SMOLALIGN_DEEPSPEED_CONFIG"):
        monkeypatch.delenv(name, raising=False)

    import smolalign.hardware

    def with_gpus(gpus: int):
        monkeypatch.setattr(smolalign.hardware, "visible_gpu_count", lambda: gpus)
    return with_gpus


def test_one_process_per_gpu_by_default(node, sft_recipe):
    node(8)
    assert planned_launch(command_run(["sft", sft_recipe]), None, None) == ("ddp", 8)
    assert planned_launch(command_run(["sft", sft_recipe]), "zero3", None) == ("zero3", 8)  # not 1: --num-processes unset
    assert planned_launch(command_run(["sft", sft_recipe]), "zero3", 2) == ("zero3", 2)
    assert planned_launch(command_run(["sft", sft_recipe, "--set", "launch.num_processes=4"]), "zero3", None) == ("zero3", 4)
    assert planned_launch(command_run(["sft", sft_recipe, "--set", "launch.preset=zero2"]), None, None) == ("zero2", 8)
    node(1)
    assert planned_launch(command_run(["sft", sft_recipe]), None, None) == (None, 1)
    node(0)  # a CPU: one process unless asked
    assert planned_launch(command_run(["sft", sft_recipe]), None, None) == (None, 1)
    assert planned_launch(command_run(["sft", sft_recipe]), "ddp", None) == ("ddp", 1)


def test_a_started_vllm_server_keeps_its_gpus(node, write_recipe, tiny_dir, tmp_path):
    rows = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "1 plus 1", "solution": "2"}])
    recipe = str(write_recipe({"stage": "rl", "model": {"source": str(tiny_dir)}, "method": "grpo",
                               "data": {"sources": [{"path": str(rows)}]}, "rewards": [{"name": "math_accuracy"}],
                               "generation": {"backend": "vllm_server"}}))
    node(8)
    assert planned_launch(command_run(["rl", recipe]), None, None) == ("ddp", 7)
    assert planned_launch(command_run(["rl", recipe, "--set", "generation.server.gpus=[6,7]"]), None, None) == ("ddp", 6)
    assert planned_launch(command_run(["rl", recipe, "--set", "generation.server.tensor_parallel=4"]), None, None) == ("ddp", 4)
    assert planned_launch(command_run(["rl", recipe, "--set", "generation.server.base_url=http://h:8000"]), None, None) == ("ddp", 8)
    node(2)  # one GPU for the server, one for training: a single process
    assert planned_launch(command_run(["rl", recipe]), None, None) == (None, 1)


@pytest.fixture
def launches(monkeypatch):
    """What relaunch would start: the command and the accelerate config it hands over, read as accelerate reads it."""
    import smolalign.hardware
    import smolalign.launch

    started = []
    gpu = smolalign.hardware.Hardware("cuda", 8, "H100", True, 1, 16)
    # The stand-in GPUs are for the launcher only: the modules a command runs bind detect_hardware by name when first
    # imported, so they are imported before it is replaced (and TRL, which sets VLLM_LOGGING_LEVEL on import, before
    # the environment is compared).
    import trl  # noqa: F401

    import smolalign.resolve  # noqa: F401
    import smolalign.stages.registry  # noqa: F401

    monkeypatch.setattr(smolalign.hardware, "detect_hardware", lambda: gpu)

    def run(command, env):
        from accelerate.commands.config.config_args import load_config_from_file

        config = load_config_from_file(command[command.index("--config_file") + 1])
        started.append(SimpleNamespace(command=command, env=env, config=config))
        return 0

    monkeypatch.setattr(smolalign.launch, "run_child", run)
    return started


def test_the_cli_launches_one_process_per_gpu(cli, node, launches, sft_recipe, tmp_path):
    node(8)
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run")
    assert code == 0, err
    [launch] = launches
    assert (launch.config.num_processes, launch.config.distributed_type) == (8, "MULTI_GPU")
    module = len(launch.command) - launch.command[::-1].index("-m")  # what accelerate runs: after its last -m
    assert launch.command[module:] == ["smolalign", "sft", sft_recipe, "-o", str(tmp_path / "run")]
    assert launch.env["SMOLALIGN_LAUNCHED"] == "1"
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run", "--launch", "zero3")
    assert code == 0, err
    assert (launches[1].config.num_processes, launches[1].config.distributed_type) == (8, "DEEPSPEED")


def test_more_processes_than_gpus_is_refused_before_anything_starts(cli, node, launches, sft_recipe, tmp_path):
    node(8)
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run", "--launch", "ddp", "--num-processes", "9")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: --num-processes 9: this machine has 8 GPU(s)")
    assert launches == [] and not (tmp_path / "run").exists()


def test_one_process_that_sees_several_gpus_is_refused_with_the_command(cli, node, launches, sft_recipe, tmp_path,
                                                                       monkeypatch):
    """The rank of a one-process launch (here: smolalign's own, as `accelerate launch --num_processes 1` leaves it)
    on a 4-GPU node: refused before any weight loads, with the command that runs one process per GPU."""
    node(4)
    monkeypatch.setenv("SMOLALIGN_LAUNCHED", "1")
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run", "--dry-run")
    assert code == 2
    assert f"run `smolalign sft {sft_recipe} -o {tmp_path / 'run'} --dry-run --launch ddp --num-processes 4`" in err
    assert launches == [] and not (tmp_path / "run").exists()
    node(1)  # one GPU: nothing to refuse
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run", "--dry-run")
    assert "DataParallel" not in err


def test_processes_asked_for_without_a_launcher_are_refused_not_run_as_one(cli, node, launches, sft_recipe, tmp_path):
    """On a CPU (or one GPU) nothing starts more processes without --launch or launch.preset: --num-processes 4, or the
    recipe's launch.num_processes 2, is refused with exit 2 naming what to add, before anything starts; one process
    asked for is what runs anyway."""
    node(0)
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run", "--num-processes", "4", "--dry-run")
    assert code == 2 and err.strip().splitlines()[-1] == (
        "error: --num-processes 4 needs a launcher to start them: add --launch ddp (or zero2, zero3, fsdp2), or set "
        "launch.preset")
    code, out, err = cli("sft", sft_recipe, "-o", tmp_path / "run", "--set", "launch.num_processes=2", "--dry-run")
    assert code == 2 and err.strip().splitlines()[-1].startswith(
        "error: launch.num_processes 2 needs a launcher to start them: set launch.preset")
    assert launches == [] and not (tmp_path / "run").exists()
    assert planned_launch(command_run(["sft", sft_recipe]), None, 1) == (None, 1)
    node(1)
    assert planned_launch(command_run(["sft", sft_recipe]), None, 1) == (None, 1)
    with pytest.raises(SmolalignError, match="--num-processes 2 needs a launcher"):
        planned_launch(command_run(["sft", sft_recipe]), None, 2)
    assert planned_launch(command_run(["sft", sft_recipe]), "ddp", 2) == ("ddp", 2)  # with a launcher: used


def test_a_recipe_that_does_not_resolve_is_refused_once_before_any_process_starts(cli, node, launches, sft_recipe,
                                                                                  tmp_path):
    """The command resolves its recipe before it decides to launch: a bad `train:` key is one exit 2 here, and no
    launcher starts processes that would each refuse it."""
    node(8)
    code, out, err = cli("sft", sft_recipe, "--set", "train.learning_rat=0.1", "--launch", "ddp")
    assert code == 2 and "train.learning_rat" in err
    assert launches == []
