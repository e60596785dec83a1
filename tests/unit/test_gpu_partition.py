"""The GPUs of a run that starts its vLLM server beside training (the stand-in for a node's GPUs: the count torch
reads through NVML, and CUDA_VISIBLE_DEVICES): the partition is worked out by the process that starts the training
processes and handed to them in their environment (a single training process is a child started on it), and to the
server in its own; the process that works it out keeps its environment as it was. A process another launcher started
trains on its local rank's GPU, and is refused where that is one of the server's."""

import os
import sys
from types import SimpleNamespace

import pytest
from recipe_runs import command_run
from tiny_models import write_jsonl

from smolalign.errors import SmolalignError
from smolalign.gpu_partition import (
    SERVER_GPUS,
    GpuPartition,
    partition_of_this_process,
    server_devices,
)
from smolalign.recipe.generation_schema import GenerationSection
from smolalign.recipe.typecheck import build
from smolalign.stages.compile_cache import keep_compiled_kernels


@pytest.fixture
def node(monkeypatch):
    """A node with `gpus` GPUs, seen by this process before any launcher started it; returns the starts."""
    import smolalign.hardware
    import smolalign.launch

    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "SMOLALIGN_LAUNCHED", "CUDA_VISIBLE_DEVICES", SERVER_GPUS,
                 "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP", "SMOLALIGN_DEEPSPEED_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    started = []

    def run(command, env):
        started.append(SimpleNamespace(command=command, env=env))
        return 0

    monkeypatch.setattr(smolalign.launch, "run_child", run)
    # The stand-in GPUs are for the launcher only: the modules a command runs bind detect_hardware by name when first
    # imported, so they are imported before it is replaced (and TRL, which sets VLLM_LOGGING_LEVEL on import, before
    # the environment is compared).
    import trl  # noqa: F401

    import smolalign.resolve  # noqa: F401
    import smolalign.stages.registry  # noqa: F401

    # A train command points the compilers' caches under SMOLALIGN_CACHE in its own process as it starts
    # (stages.compile_cache), unless they are set: set them first, as an earlier command in this process would have.
    for name, value in keep_compiled_kernels(dict(os.environ)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(smolalign.hardware, "detect_hardware",
                        lambda: smolalign.hardware.Hardware("cuda", 8, "H100", True, 1, 16))

    def with_gpus(gpus: int):
        monkeypatch.setattr(smolalign.hardware, "visible_gpu_count", lambda: gpus)
        return started
    return with_gpus


@pytest.fixture
def rl_recipe(write_recipe, tiny_dir, tmp_path):
    rows = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "1 plus 1", "solution": "2"}])
    return str(write_recipe({"stage": "rl", "model": {"source": str(tiny_dir)}, "method": "grpo",
                             "data": {"sources": [{"path": str(rows)}]}, "rewards": [{"name": "math_accuracy"}],
                             "generation": {"backend": "vllm_server"}}))


def test_one_training_process_is_a_child_started_on_the_partition(cli, node, rl_recipe):
    started = node(2)  # one GPU for the server, one for training
    environment = dict(os.environ)
    code, out, err = cli("rl", rl_recipe, "--dry-run")
    assert code == 0, err
    [child] = started
    assert child.command == [sys.executable, "-m", "smolalign", "rl", rl_recipe, "--dry-run"]
    assert child.env["CUDA_VISIBLE_DEVICES"] == "0" and child.env[SERVER_GPUS] == "1"
    assert dict(os.environ) == environment  # this process's own is as it was


def test_launched_processes_get_the_partition(cli, node, rl_recipe, monkeypatch):
    started = node(8)
    environment = dict(os.environ)
    code, out, err = cli("rl", rl_recipe, "--set", "generation.server.gpus=[0]")
    assert code == 0, err
    [launch] = started
    assert launch.command[launch.command.index("--config_file") - 1] == "accelerate.commands.launch"
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "1,2,3,4,5,6,7" and launch.env[SERVER_GPUS] == "0"
    assert dict(os.environ) == environment



def test_a_process_started_on_the_partition_starts_nothing_more_and_counts_the_servers_gpus(node, rl_recipe,
                                                                                        monkeypatch):
    """It trains here, on what it sees, and the preflight checks the recipe against the whole machine (a server
    on GPUs this process does not see, one more than its own)."""
    from smolalign.launch import partition_for, planned_launch
    from smolalign.target import this_machine

    node(1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv(SERVER_GPUS, "1")
    argv = ["rl", rl_recipe, "--dry-run"]
    assert planned_launch(command_run(argv), None, None) == (None, 1) and partition_for(command_run(argv), 1) is None
    assert this_machine().gpus == 2
    monkeypatch.delenv(SERVER_GPUS)
    assert this_machine().gpus == 1


def generation(**server) -> GenerationSection:
    return build(GenerationSection, {"backend": "vllm_server", "server": server}, "generation")


def test_the_started_process_and_its_server_use_the_partition_it_was_handed():
    recipe = SimpleNamespace(stage="rl", generation=generation())
    environment = dict(os.environ)
    handed = {"CUDA_VISIBLE_DEVICES": "4,5", SERVER_GPUS: "6"}
    gpus = partition_of_this_process(recipe, 2, handed)
    assert gpus == GpuPartition(("6",), ("4", "5"))
    assert server_devices(recipe.generation.server, gpus) == {"CUDA_VISIBLE_DEVICES": "6"}
    with pytest.raises(SmolalignError, match="training sees 3 GPUs, not the 2"):
        partition_of_this_process(recipe, 3, handed)
    assert dict(os.environ) == environment


def test_under_another_launcher_each_rank_trains_on_its_local_ranks_gpu():
    """torchrun's ranks see every GPU and train on the one of their local rank: the default server GPUs (the last)
    are free of training; a server on GPU 0 is refused, naming the environment to start the ranks with."""
    ranks = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3"}
    default = SimpleNamespace(stage="rl", generation=generation())
    assert partition_of_this_process(default, 4, ranks) == GpuPartition(("3",), ("0", "1", "2"))
    first = SimpleNamespace(stage="rl", generation=generation(gpus=[0]))
    with pytest.raises(SmolalignError, match=f"GPU\\(s\\) 0, the server's.*CUDA_VISIBLE_DEVICES=1,2,3 {SERVER_GPUS}=0"):
        partition_of_this_process(first, 4, ranks)
    alone = {"CUDA_VISIBLE_DEVICES": "0,1"}  # one process that sees the server's GPU too
    with pytest.raises(SmolalignError, match="training would use GPU\\(s\\) 1"):
        partition_of_this_process(default, 2, alone)
