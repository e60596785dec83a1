"""The TRL config and LoRA config a stage hands its trainer: the run's settings with the precision this hardware
decides, the run directory, the values smolalign sets itself, and DeepSpeed's config when a launcher handed one."""

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware, autocast_flags, detect_hardware, precision_description
from smolalign.launch import DEEPSPEED_CONFIG, is_launched
from smolalign.models.config import model_width
from smolalign.resolve import Run
from smolalign.stages.lifecycle import run_dir_of


def check_config(run: Run, builder: Callable, *args) -> None:
    """Build the stage's TRL config once before anything loads (`builder(run, hardware, run_dir, *args,
    check=True)`, the stage's own config function, which hands `check` to `trl_config`), so TRL's and transformers'
    own `__post_init__` checks run in the dry run and in `launch slurm`. Built for this machine's precision
    (transformers refuses bf16 where it cannot check it), as one process, without the launcher's DeepSpeed config;
    creates nothing. Not in a launched process: the run builds its config before any weight loads anyway."""
    if is_launched():
        return
    hardware = detect_hardware()  # the machine that builds the config, which a Slurm job's run is not resolved for
    builder(run, hardware, run_dir_of(run, None), *args, check=True)


def checked_config_class(config_class: type, hardware: Hardware) -> type:
    """`config_class` as the check builds it: one process on the hardware's device. transformers' `__post_init__`
    asks for `device` (and GRPO's for `world_size`), and the real answer sets up accelerate's process state, a
    process group when a launcher's variables are set; that state would outlive the check and be the one the run's
    own set-up then finds. Here both are plain answers, so the check creates no state at all."""
    import torch

    device = torch.device("cuda" if hardware.on_gpu else "cpu")
    return type(config_class.__name__, (config_class,), {
        "__doc__": config_class.__doc__, "device": property(lambda self: device), "world_size": property(lambda self: 1)})



def _config_error(exc: Exception, train: dict) -> SmolalignError:
    """TRL's ValueError as one line naming the recipe key it is about (the longest `train:` key it mentions)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    named = sorted((k for k in train if k in str(exc)), key=len, reverse=True)
    return SmolalignError(f"train.{named[0]}: {message}" if named else f"train: {message}")


def trl_config(run: Run, hardware: Hardware, run_dir: Path, train: dict | None = None, *,
               check: bool = False, **fixed):
    """The method's TRL config (from the method table) built from the run's settings (`train`, when given, in their
    place), with the precision flags the hardware and `model.dtype` decide (hardware.autocast_flags: on a CPU
    whatever the recipe says), the run directory, and `fixed` values set by smolalign. Keys smolalign's own pipeline applies are
    not passed. `check`: built only to run TRL's own checks (`check_config`): no DeepSpeed, no accelerate state, no
    note."""
    consumed = run.method_spec.consumed
    train = {k: v for k, v in (run.settings.train if train is None else train).items() if k not in consumed}
    width = model_width(run.source())
    flags = autocast_flags(run.recipe.model.dtype, hardware, width, train)
    if not hardware.on_gpu:
        asked = {k for k in ("bf16", "fp16") if train.get(k)}
        if asked - {k for k, on in flags.items() if on} and not check:
            print(f"note: on this CPU train.{'/'.join(sorted(asked))} is decided by the machine: "
                  f"{precision_description(run.recipe.model.dtype, hardware, width)}", file=sys.stderr)
    train.update(flags)
    train.update(output_dir=str(run_dir), **fixed)
    train.setdefault("report_to", "none")
    if check:
        train.pop("deepspeed", None)  # DeepSpeed's config object would start its communication layer
    deepspeed = None if check else deepspeed_from_launcher()
    if deepspeed is not None:
        train["deepspeed"] = deepspeed
        if not hardware.on_gpu:
            train["bf16"] = False  # DeepSpeed's bf16 mode would turn the weights themselves into bf16, not autocast
    cls = run.method_spec.config_class()
    try:
        config = (checked_config_class(cls, hardware) if check else cls)(**train)
    except (ValueError, TypeError) as exc:
        raise _config_error(exc, run.settings.train) from None
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
    path = os.environ.get(DEEPSPEED_CONFIG)
    return json.loads(Path(path).read_text()) if path else None


def peft_config(run: Run):
    if run.recipe.peft is None:
        return None
    from peft import LoraConfig

    return LoraConfig(**{**run.recipe.peft, "task_type": run.method_spec.peft_task_type})
