"""A DeepSpeed preset runs with one DeepSpeed config on GPUs (what accelerate's launcher and DeepSpeedPlugin make of
the config `--launch` hands them) and on the CPU (the JSON handed to the trainer), its bucket sizes left to the
trainer ("auto"), which transformers fills from the model's hidden size; and the plan's memory counts those buckets."""

from types import SimpleNamespace

import pytest

from smolalign import launch

HIDDEN = 96
PRESETS = {"zero2": 2, "zero3": 3, "zero3_offload": 3}


def expected_buckets(stage: int, hidden: int) -> dict:
    """transformers' HfTrainerDeepSpeedConfig.trainer_config_finalize: reduce = hidden², and under ZeRO-3 prefetch =
    0.9·hidden², persistence threshold = 10·hidden."""
    buckets = {"reduce_bucket_size": hidden * hidden}
    if stage == 3:
        buckets.update(stage3_prefetch_bucket_size=int(0.9 * hidden * hidden),
                       stage3_param_persistence_threshold=10 * hidden)
    return buckets


def finalized(config: dict) -> dict:
    """The config after the trainer fills its "auto" values for a model of HIDDEN (transformers' own code)."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    ds = HfTrainerDeepSpeedConfig(config)
    ds.trainer_config_finalize(SimpleNamespace(get_warmup_steps=lambda steps: 0),
                               SimpleNamespace(config=SimpleNamespace(hidden_size=HIDDEN)), 10)
    return ds.config


def launched(preset: str, on_gpu: bool, monkeypatch) -> dict:
    """`relaunch` of `preset` on 2 processes with nothing started: the DeepSpeed config a launched process gets. On
    GPUs: accelerate's own argument handling of the config file relaunch wrote, then accelerate's DeepSpeedPlugin
    built in that environment; on the CPU: the JSON relaunch hands the trainer."""
    from unittest import mock

    import accelerate.commands.launch as accelerate_launch
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    from smolalign.hardware import Hardware

    hardware = Hardware("cuda", 2, "H100", True, 1, 8) if on_gpu else Hardware("cpu", 0, "x86", False, 1, 2)
    monkeypatch.setattr("smolalign.hardware.detect_hardware", lambda: hardware)
    seen: dict = {}

    def run(command, env):
        if on_gpu:
            environment: dict = {}

            def deepspeed(args):
                _, made = prepare_deepspeed_cmd_env(args)
                environment.update(made)

            with mock.patch.object(accelerate_launch, "deepspeed_launcher", deepspeed):
                accelerate_launch.launch_command(accelerate_launch.launch_command_parser().parse_args(command[3:]))
            with monkeypatch.context() as patch:
                for name, value in environment.items():
                    if name.startswith("ACCELERATE_"):
                        patch.setenv(name, value)
                seen["config"] = DeepSpeedPlugin().deepspeed_config
                seen["sharding"] = launch.launched_sharding()
        else:
            import json
            from pathlib import Path

            seen["config"] = json.loads(Path(env[launch.DEEPSPEED_CONFIG]).read_text())
        return 0

    monkeypatch.setattr(launch, "run_child", run)
    no_server = SimpleNamespace(recipe=SimpleNamespace(generation=None))  # what relaunch reads of the run
    assert launch.relaunch(no_server, preset, 2, ["sft", "recipe.yaml"]) == 0
    return seen


@pytest.mark.parametrize("preset", PRESETS)
def test_gpus_and_the_cpu_get_the_same_buckets_sized_from_the_model(preset, monkeypatch):
    """Fails when the GPU launch hands accelerate the preset's own DeepSpeed settings (DeepSpeed's default buckets:
    500M elements to reduce) or when the buckets are not left to the trainer."""
    stage = PRESETS[preset]
    on_gpu = launched(preset, True, monkeypatch)
    on_cpu = launched(preset, False, monkeypatch)
    gpu, cpu = finalized(on_gpu["config"])["zero_optimization"], finalized(on_cpu["config"])["zero_optimization"]
    names = ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")
    assert {k: gpu[k] for k in names if k in gpu} == expected_buckets(stage, HIDDEN)
    assert {k: cpu[k] for k in names if k in cpu} == expected_buckets(stage, HIDDEN)
    def offload(zero, kind):
        return (zero.get(f"offload_{kind}") or {}).get("device") or "none"

    assert gpu["stage"] == cpu["stage"] == stage
    assert (gpu["overlap_comm"], cpu["overlap_comm"]) == (True, False)  # CUDA streams on GPUs; gloo has none
    assert [offload(gpu, k) for k in ("optimizer", "param")] == [offload(cpu, k) for k in ("optimizer", "param")]
    assert on_gpu["sharding"]["zero"]["stage"] == stage  # the plan inside the launched process reads the same file


@pytest.mark.parametrize(("preset", "stated", "sharding"), [
    ("zero3", None, "zero3"), ("zero2", None, "zero2"), (None, {}, "zero2"), (None, {}, "zero3")],
    ids=["zero3-preset", "zero2-preset", "zero2-deepspeed-defaults", "zero3-deepspeed-defaults"])
def test_the_plan_counts_the_zero_buckets(preset, stated, sharding, tiny_dir):
    """With a preset (the "auto" buckets, from the model's config.json) and with a launcher that states no buckets
    (DeepSpeed's defaults: 5e8 elements to reduce, 5e7 to prefetch, parameters under 1e5 elements kept whole), in
    bfloat16 on an H100. Fails when the estimate leaves the buckets out."""
    import json
    from dataclasses import replace

    from recipe_runs import run_of

    from smolalign.estimate.dims import read_dims
    from smolalign.estimate.plan_rows import _estimate
    from smolalign.estimate.settings import setup_for
    from smolalign.gpus import gpu_named
    from smolalign.hardware import Hardware

    config = json.loads((tiny_dir / "config.json").read_text())
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    launch_section = {"gpu": "H100", "num_processes": 2, **({"preset": preset} if preset else {})}
    run = run_of({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": "x.jsonl"}]},
                  "launch": launch_section}, "sft", "test")
    hardware = Hardware("cpu", 0, "x86", False, 1, 2)
    setup = setup_for(run.recipe, hardware, gpu_named("H100"))
    if preset is None:  # accelerate's own DeepSpeed settings, as a launched process reads them from its environment
        setup = replace(setup, sharding=sharding, processes=2, zero_buckets=stated)
    assert setup.sharding == sharding and setup.dtype == "bfloat16"
    if stated is None:
        reduce, prefetch, threshold = hidden * hidden, int(0.9 * hidden * hidden), 10 * hidden
    else:
        reduce, prefetch, threshold = 500_000_000, 50_000_000, 100_000
    expected = reduce + (prefetch + (2 * layers + 1) * hidden if sharding == "zero3" and hidden <= threshold else 0)
    dims = read_dims(run.source())
    estimate = _estimate(run, run.settings, setup, dims, None)
    assert estimate.parts["ZeRO buckets"] == 2 * expected
    without = _estimate(run, run.settings, replace(setup, zero_buckets={"reduce_bucket_size": 0,
                                                                              "stage3_prefetch_bucket_size": 0,
                                                                              "stage3_param_persistence_threshold": 0}),
                        dims, None)
    assert without.parts["ZeRO buckets"] == 0 and estimate.peak - without.peak == 2 * expected
