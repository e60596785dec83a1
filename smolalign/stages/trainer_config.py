"""The TRL config and LoRA config a stage hands its trainer: the run's settings with the precision this hardware
decides, the run directory, the values smolalign sets itself, and DeepSpeed's config when a launcher handed one."""

import sys
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware, precision_flags
from smolalign.recipe.schema import Recipe


def trl_config(recipe: Recipe, hardware: Hardware, dtype: str, run_dir: Path, train: dict | None = None, **fixed):
    """The method's TRL config (from the method table) built from the run's settings (`train`, when given, in their
    place), with the hardware's precision (bf16 off on CPU whatever the recipe says), the run directory, and `fixed`
    values set by smolalign. Keys smolalign's own pipeline applies are not passed."""
    from smolalign.recipe.methods import config_class, method_spec

    consumed = method_spec(recipe.stage, recipe.method).consumed
    train = {k: v for k, v in (recipe.settings.train if train is None else train).items() if k not in consumed}
    flags = precision_flags(dtype, hardware)
    if hardware.on_gpu:
        train = {**flags, **train}
    else:
        if train.get("bf16") or train.get("fp16"):
            print("note: no GPU here, so bf16/fp16 are off and the run is float32 on CPU", file=sys.stderr)
        train.update(flags)
    train.update(output_dir=str(run_dir), **fixed)
    train.setdefault("report_to", "none")
    deepspeed = deepspeed_from_launcher()
    if deepspeed is not None:
        train["deepspeed"] = deepspeed
    try:
        config = config_class(recipe.stage, recipe.method)(**train)
    except (ValueError, TypeError) as exc:
        raise SmolalignError(f"train: {exc}") from None
    if deepspeed is not None and not hardware.on_gpu:
        # With use_cpu the trainer joins the processes through a plain gloo group and never starts DeepSpeed's
        # communication layer; ZeRO-3's load-time sharding would then see a world of 1. Start it here, after the
        # config (which switches on zero.Init) and before any model is built.
        import deepspeed as ds

        ds.init_distributed(dist_backend="gloo")
    return config


def deepspeed_from_launcher() -> dict | None:
    """The DeepSpeed config `--launch zero2|zero3...` handed to these processes on a CPU machine (on GPUs accelerate
    passes it itself)."""
    import json
    import os

    from smolalign.launch import DEEPSPEED_CONFIG

    path = os.environ.get(DEEPSPEED_CONFIG)
    return json.loads(Path(path).read_text()) if path else None


def peft_config(recipe: Recipe):
    if recipe.peft is None:
        return None
    from peft import LoraConfig

    # A reward model trains its new score head in full (SEQ_CLS saves it beside the adapters).
    task = "SEQ_CLS" if recipe.method is not None and recipe.method.trainer == "reward" else "CAUSAL_LM"
    return LoraConfig(**{"task_type": task, **recipe.peft})
