"""What the launcher handed a process, read once for the plan's sharding row and the memory estimate."""

from types import SimpleNamespace

from smolalign.estimate.settings import launch_fields
from smolalign.hardware import Hardware
from smolalign.plan import _sharding

GPUS = Hardware("cuda", 8, "H100", True, 8, 8)
RECIPE = SimpleNamespace(launch=None, generation=None)


def test_accelerate_deepspeed_environment(monkeypatch):
    monkeypatch.setenv("SMOLALIGN_LAUNCHED", "1")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    monkeypatch.delenv("SMOLALIGN_DEEPSPEED_CONFIG", raising=False)
    assert _sharding() == "DeepSpeed ZeRO-3, optimizer offloaded to CPU"
    fields = launch_fields(RECIPE, GPUS)
    assert (fields["sharding"], fields["offload_optimizer"], fields["offload_params"]) == ("zero3", True, False)
    monkeypatch.delenv("ACCELERATE_DEEPSPEED_ZERO_STAGE")  # unsaid: the plan says so, the estimate takes ZeRO-2
    assert _sharding().startswith("DeepSpeed ZeRO-?")
    assert launch_fields(RECIPE, GPUS)["sharding"] == "zero2"


def test_fsdp_and_nothing(monkeypatch):
    monkeypatch.setenv("SMOLALIGN_LAUNCHED", "1")
    monkeypatch.delenv("SMOLALIGN_DEEPSPEED_CONFIG", raising=False)
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    assert _sharding() == "FSDP (version 2)" and launch_fields(RECIPE, GPUS)["sharding"] == "fsdp"
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    assert _sharding() is None and launch_fields(RECIPE, GPUS)["sharding"] == "ddp"


def accelerate_launch_environment(preset: str, processes: int) -> dict[str, str]:
    """The variables `accelerate launch --config_file PRESET --num_processes N -m smolalign ...` hands its ranks:
    accelerate's own command parsing and environment preparation, stopped before it starts torchrun (which adds
    WORLD_SIZE, RANK and LOCAL_RANK to each rank)."""
    import os
    from unittest import mock

    import accelerate.commands.launch as accelerate_launch
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    from smolalign.launch import preset_path

    seen = {}
    parsed = accelerate_launch.launch_command_parser().parse_args(
        ["--config_file", str(preset_path(preset)), "--num_processes", str(processes), "-m", "smolalign", "sft", "r"])
    with mock.patch.object(accelerate_launch, "deepspeed_launcher", lambda a: seen.update(ds=a)), \
            mock.patch.object(accelerate_launch, "multi_gpu_launcher", lambda a: seen.update(ddp=a)), \
            mock.patch.object(accelerate_launch, "simple_launcher", lambda a: seen.update(simple=a)):
        accelerate_launch.launch_command(parsed)
    env = prepare_deepspeed_cmd_env(seen["ds"])[1] if "ds" in seen else prepare_multi_gpu_env(seen["ddp"])
    return {k: v for k, v in env.items() if os.environ.get(k) != v} | {"WORLD_SIZE": str(processes)}


def test_the_plan_is_the_same_under_accelerate_launch_and_smolaligns_own(monkeypatch):
    """`accelerate launch --config_file zero3.yaml -m smolalign sft ...` (the line the recipes document) is planned
    as ZeRO-3 over its 8 processes, as the recipe's own `launch: {preset: zero3, num_processes: 8}` is; torchrun
    alone is DDP over its processes."""
    from smolalign.recipe.schema import LaunchSection

    for name in ("SMOLALIGN_LAUNCHED", "SMOLALIGN_DEEPSPEED_CONFIG", "WORLD_SIZE", "ACCELERATE_USE_DEEPSPEED",
                 "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(name, raising=False)
    laptop = Hardware("cuda", 8, "H100", True, 1, 8)
    own = launch_fields(SimpleNamespace(launch=LaunchSection(preset="zero3", num_processes=8), generation=None),
                        laptop)
    for key, value in accelerate_launch_environment("zero3", 8).items():
        monkeypatch.setenv(key, value)
    launched = launch_fields(RECIPE, GPUS)
    assert (launched["sharding"], launched["processes"]) == (own["sharding"], own["processes"]) == ("zero3", 8)
    assert (launched["offload_optimizer"], launched["offload_params"]) == (own["offload_optimizer"],
                                                                           own["offload_params"])
    for name in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCELERATE_DEEPSPEED_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert launch_fields(RECIPE, GPUS) == {"sharding": "ddp", "processes": 8}  # torchrun: WORLD_SIZE only


def test_a_preset_without_a_process_count_is_planned_over_the_processes_its_launch_starts(monkeypatch):
    """`launch: {preset: zero3}` alone starts one process per GPU left for training (target.launch_plan): the plan
    shards over them (ZeRO-3 over 8 on an 8-GPU node, 7 when a started vLLM server takes one, 1 on a CPU), as it does
    when the recipe states the count."""
    from smolalign.recipe.schema import LaunchSection

    for name in ("SMOLALIGN_LAUNCHED", "SMOLALIGN_DEEPSPEED_CONFIG", "WORLD_SIZE", "ACCELERATE_USE_DEEPSPEED",
                 "ACCELERATE_USE_FSDP", "LOCAL_WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    node = Hardware("cuda", 8, "H100", True, 1, 8)
    zero3 = LaunchSection(preset="zero3")
    assert launch_fields(SimpleNamespace(launch=zero3, generation=None), node)["processes"] == 8
    assert launch_fields(SimpleNamespace(launch=LaunchSection(preset="zero3", num_processes=8), generation=None),
                         node)["processes"] == 8
    server = SimpleNamespace(backend="vllm_server", server=SimpleNamespace(base_url=None, gpus=None,
                                                                          tensor_parallel=1))
    assert launch_fields(SimpleNamespace(launch=zero3, generation=server), node)["processes"] == 7
    assert launch_fields(SimpleNamespace(launch=zero3, generation=None),
                         Hardware("cpu", 0, "cpu", False, 1, 2))["processes"] == 1
