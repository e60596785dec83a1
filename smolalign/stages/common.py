"""What every training stage does the same way: TRL config from `train:` with precision decided by the hardware,
the run directory and manifest set up by the main process first, training with resume, and the final save."""

import sys
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware, precision_flags
from smolalign.recipe.schema import Recipe
from smolalign.recipe.validate import recipe_to_dict
from smolalign.runs.rundir import MODEL_DIR, default_run_dir, last_checkpoint, prepare_run_dir, write_recipe


def trl_config(config_class: type, train: dict, hardware: Hardware, dtype: str, run_dir: Path, **fixed):
    """`config_class(**train)` with the hardware's precision (bf16 off on CPU whatever the recipe says), the run
    directory, and `fixed` values set by smolalign."""
    train = dict(train)
    flags = precision_flags(dtype, hardware)
    if hardware.on_gpu:
        train = {**flags, **train}
    else:
        if train.get("bf16") or train.get("fp16"):
            print("note: no GPU here, so bf16/fp16 are off and the run is float32 on CPU", file=sys.stderr)
        train.update(flags)
    train.update(output_dir=str(run_dir), **fixed)
    train.setdefault("report_to", "none")
    try:
        return config_class(**train)
    except (ValueError, TypeError) as exc:
        raise SmolalignError(f"train: {exc}") from None


def open_run(recipe: Recipe, hardware: Hardware, output_dir: Path | None, *, resume: bool, overwrite: bool):
    """(run directory, checkpoint to resume from, accelerate state). Call inside nothing; the caller prepares data
    inside `state.main_process_first()` after this."""
    from accelerate import PartialState

    from smolalign.runs.manifest import write_manifest

    run_dir = Path(output_dir or recipe.train.get("output_dir") or default_run_dir(recipe.source, recipe.stage))
    # cpu=True: without a GPU, only this makes accelerate join the processes torchrun started (gloo); otherwise
    # every process would think it is the main one.
    state = PartialState(cpu=not hardware.on_gpu)
    with state.main_process_first():
        if state.is_main_process:
            checkpoint = prepare_run_dir(run_dir, resume=resume, overwrite=overwrite)
            write_recipe(run_dir, recipe_to_dict(recipe))
            write_manifest(run_dir, recipe=recipe.source, stage=recipe.stage, hardware=hardware.describe(),
                           model={"source": recipe.model.source, "revision": recipe.model.revision})
        else:
            checkpoint = last_checkpoint(run_dir) if resume else None
    return run_dir, checkpoint, state


def train_and_save(trainer, tokenizer, run_dir: Path, checkpoint: Path | None) -> Path:
    """Train (resuming if asked), save the model for inference and record the result."""
    from smolalign.models.load import save_for_inference
    from smolalign.runs.manifest import write_manifest

    result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    model_dir = run_dir / MODEL_DIR
    if trainer.is_world_process_zero():
        save_for_inference(trainer.model, tokenizer, model_dir)
        write_manifest(run_dir, result={"global_step": result.global_step, "train_loss": result.training_loss,
                                        "model": str(model_dir), "resumed_from": str(checkpoint) if checkpoint else None})
    return model_dir


def peft_config(recipe: Recipe):
    if recipe.peft is None:
        return None
    from peft import LoraConfig

    return LoraConfig(**{"task_type": "CAUSAL_LM", **recipe.peft})
