"""What the launcher handed a process, read once for the plan's sharding row and the memory estimate."""

from types import SimpleNamespace

from smolalign.estimate.settings import launch_fields
from smolalign.hardware import Hardware
from smolalign.plan import _sharding

GPUS = Hardware("cuda", 8, "H100", True, 8, 8)
RECIPE = SimpleNamespace(launch=None)


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
