"""The TRL config and LoRA config a stage hands its trainer: the run's settings with the precision this hardware
decides, the run directory, the values smolalign sets itself, and DeepSpeed's config when a launcher handed one."""

import contextvars
import os
import sys
from collections.abc import Callable
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware, precision_flags
from smolalign.recipe.method_table import method_spec
from smolalign.recipe.schema import Recipe

_CHECKING: contextvars.ContextVar[bool] = contextvars.ContextVar("config_check", default=False)


def check_config(recipe: Recipe, builder: Callable, *args, **kwargs) -> None:
    """Build the stage's TRL config once before anything loads (`builder(recipe, hardware, dtype, run_dir, ...)`, the
    stage's own config function), so TRL's and transformers' own `__post_init__` checks run in the dry run and in
    `launch slurm`. Built for this machine's precision (transformers refuses bf16 where it cannot check it), without
    the launcher's DeepSpeed config; creates nothing. Not in a launched process: there the config would set up the
    process group before accelerate does, and the run builds its config before any weight loads anyway.

    transformers sets up accelerate's process state while building the config; the check does so as one process
    (the process variables hidden), and leaves no state behind that the run's own set-up would then inherit."""
    from accelerate import PartialState

    from smolalign.hardware import detect_hardware, resolve_dtype
    from smolalign.launch import PROCESS_VARIABLES, is_launched, kept_process_variables
    from smolalign.stages.lifecycle import run_dir_of

    if is_launched():
        return
    hardware = detect_hardware()
    fresh = not PartialState._shared_state
    token = _CHECKING.set(True)
    try:
        with kept_process_variables():
            for name in PROCESS_VARIABLES:
                os.environ.pop(name, None)  # built as one process
            builder(recipe, hardware, resolve_dtype(recipe.model.dtype, hardware), run_dir_of(recipe, None), *args,
                    **kwargs)
    finally:
        _CHECKING.reset(token)
        if fresh:
            PartialState._reset_state()



def _config_error(exc: Exception, train: dict) -> SmolalignError:
    """TRL's ValueError as one line naming the recipe key it is about (the longest `train:` key it mentions)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    named = sorted((k for k in train if k in str(exc)), key=len, reverse=True)
    return SmolalignError(f"train.{named[0]}: {message}" if named else f"train: {message}")


def trl_config(recipe: Recipe, hardware: Hardware, dtype: str, run_dir: Path, train: dict | None = None, **fixed):
    """The method's TRL config (from the method table) built from the run's settings (`train`, when given, in their
    place), with the hardware's precision (bf16 off on CPU whatever the recipe says), the run directory, and `fixed`
    values set by smolalign. Keys smolalign's own pipeline applies are not passed."""
    consumed = method_spec(recipe.stage, recipe.method).consumed
    train = {k: v for k, v in (recipe.settings.train if train is None else train).items() if k not in consumed}
    flags = precision_flags(dtype, hardware)
    if hardware.on_gpu:
        train = {**flags, **train}
    else:
        if (train.get("bf16") or train.get("fp16")) and not _CHECKING.get():
            print("note: no GPU here, so bf16/fp16 are off and the run is float32 on CPU", file=sys.stderr)
        train.update(flags)
    train.update(output_dir=str(run_dir), **fixed)
    train.setdefault("report_to", "none")
    if _CHECKING.get():
        train.pop("deepspeed", None)  # DeepSpeed's config object would start its communication layer
    deepspeed = None if _CHECKING.get() else deepspeed_from_launcher()
    if deepspeed is not None:
        train["deepspeed"] = deepspeed
    try:
        config = method_spec(recipe.stage, recipe.method).config_class()(**train)
    except (ValueError, TypeError) as exc:
        raise _config_error(exc, recipe.settings.train) from None
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
    task = "SEQ_CLS" if method_spec(recipe.stage, recipe.method).scorer else "CAUSAL_LM"
    return LoraConfig(**{"task_type": task, **recipe.peft})
