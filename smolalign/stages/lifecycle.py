"""A training run from start to end, the same for every stage: `run` does the steps in order, and a stage's `Stage`
holds only the steps that differ (its checks, and the loading of what its trainer needs). The plan is announced (and
the dry run's resolved recipe); the run directory is checked first and written by the main process once every check
has passed; then training with resume, the final save, the summary and the `eval:` section's evaluation, and the
process group closed."""

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from smolalign.atomic import readable_as_created
from smolalign.data.check_warnings import warn_held_out_unused
from smolalign.evaluation.run import EVAL_FILE, check_stage_eval, evaluate_stage
from smolalign.gpu_partition import GpuPartition, partition_of_this_process
from smolalign.hardware import Hardware, resolve_dtype
from smolalign.launch import is_first_rank
from smolalign.models.load import save_for_inference
from smolalign.plan import Plan
from smolalign.recipe.yamlio import dump_yaml
from smolalign.resolve import Run
from smolalign.runs.card import lineage, write_cards
from smolalign.runs.curves import write_run_curves
from smolalign.runs.hub import push_model
from smolalign.runs.inputs import stamped_inputs
from smolalign.runs.manifest import write_manifest
from smolalign.runs.metrics import loss_of_every_rank, summary, whole_run_loss
from smolalign.runs.rundir import (
    MODEL_DIR,
    checkpoint_to_resume,
    default_run_dir,
    evaluation_cut_off,
    last_checkpoint,
    read_manifest,
    start_run_dir,
    write_recipe,
)
from smolalign.runs.save_on_signal import SavedOnSignal, listening, save_on_signal_callback
from smolalign.stages.generating import add_sync_row, check_generating
from smolalign.stages.library_patches import library_patches
from smolalign.stages.low_precision_updates import keep_low_precision_updates
from smolalign.stages.teardown import leave_process_group, release_training_state


@dataclass(frozen=True)
class OpenRun:
    """A run past its checks whose directory is open: what a stage loads and trains with."""

    dtype: str
    """The policy's dtype on this hardware."""
    run_dir: Path
    checkpoint: Path | None
    """The checkpoint --resume continues from (None: training starts at step 0)."""
    state: object
    """accelerate's PartialState: which process this is (`is_main_process`, `main_process_first()`)."""
    overwrite: bool
    gpus: GpuPartition | None = None
    """For a stage that generates: the GPUs a vLLM server smolalign starts is given, apart from training's."""
    trainer: type | None = None
    """The trainer class of the run's method (`recipe.method_table`), which the stage's `load` builds."""


@dataclass(frozen=True)
class Checked:
    """What a stage's `check` found before anything loaded, which its `load` takes: the plan, and, in the stage's own
    subclass, what the run reuses (the data read, the rewards built, the tokenizers compared)."""

    plan: Plan


@dataclass(frozen=True)
class Stage:
    """A stage's part in a run: its checks before anything loads (`check`), and the loading of its tokenizer, data,
    models (reference, teacher) and trainer (`load`). Training (resume, save on the time-limit signal) and saving (the
    model, metrics, summary, curves, evaluation, card, hub push) are `run`'s, the same for every stage; the stage says
    only what its summary reports."""

    check: Callable[[Run], Checked]
    """`check(run)`: everything checkable before a weight loads, refused with exit 2 (also `launch slurm`'s check,
    with the cluster's hardware); returns the plan and what the run reuses, as the stage's `Checked`."""
    load: Callable[[Run, OpenRun, Checked], AbstractContextManager]
    """`load(run, opened, checked)`: a context that loads the tokenizer, data, TRL config and models, writes the run
    directory's recipe and manifest once they have loaded (`start_run`), builds the trainer on them and yields
    (trainer, tokenizer); what serves the run's generation lives as long as the context."""
    summary: tuple = ()
    """`runs.metrics.summary`'s arguments after the run directory: the logged value the summary reports (the loss
    when empty), then the tuple of those it may add."""
    generates: bool = False
    """The policy generates while it trains (`stages.generating`): the GPUs of a vLLM server smolalign starts are
    kept apart from training's, and the server's port and vLLM's engine are checked with the stage's own checks."""
    check_batch: Callable[[Run], None] | None = None
    """`check_batch(run)`: the batch rules alone, where the stage checks them apart from the data (for
    `launch slurm --skip-data-check`)."""


def run_lifecycle(stage: Stage, run: Run, *, output_dir: Path | None = None, dry_run: bool = False,
                  resume: bool = False, overwrite: bool = False) -> Path | None:
    """Check, announce (a dry run ends there), open the run directory, load (the stage builds its method's trainer
    class, which the lifecycle imports here), train (resuming if asked), save; returns the saved model's directory
    (None for a dry run)."""
    gpus = partition_of_this_process(run.recipe, run.hardware.device_count) if stage.generates else None
    checked = stage.check(run)
    warn_held_out_unused(run)
    if stage.generates:
        check_generating(run)
        add_sync_row(checked.plan, run)
    evaluation = announce(run, checked.plan, dry_run)
    run_dir = run_dir_of(run, output_dir)
    only_evaluate = resume and evaluation is not None and evaluation_cut_off(
        run_dir, EVAL_FILE, run.settings["max_steps"], run.resolved_recipe())
    if only_evaluate and is_first_rank():
        print(f"resume: {run_dir} trained to its end and was cut off in its eval: section: "
              f"{'the run would evaluate it' if dry_run else 'evaluating it'}, with no step trained", file=sys.stderr)
    if dry_run:
        if resume and not only_evaluate:  # what the run would resume from, checked as the run checks it
            checkpoint = resume_point(run, run_dir, resume=True, overwrite=overwrite)
            print(f"resume: from {checkpoint}" if checkpoint else "resume: no checkpoint yet, from the beginning")
        return None
    if only_evaluate:
        return finish(None, run_dir, run_dir / MODEL_DIR, evaluation, *stage.summary, hub=run.recipe.hub)
    opened = open_run(run, output_dir, resume=resume, overwrite=overwrite, gpus=gpus,
                      trainer=run.method_spec.trainer())
    with library_patches(run, generates=stage.generates), stage.load(run, opened, checked) as (trainer, tokenizer):
        model_dir = train_and_save(trainer, tokenizer, opened.run_dir, opened.checkpoint)
    return finish(trainer, opened.run_dir, model_dir, evaluation, *stage.summary, hub=run.recipe.hub)


def announce(run: Run, plan, dry_run: bool):
    """Print the plan and check the recipe's `eval:` section (both before anything loads); a dry run also prints
    the resolved recipe. Returns the checked evaluation inputs (None without an `eval:` section)."""
    print(plan.render())
    evaluation = check_stage_eval(run)
    if dry_run:
        print("resolved recipe:\n" + dump_yaml(run.resolved_recipe()))
    return evaluation


def finish(trainer, run_dir: Path, model_dir: Path, evaluation, *metrics, hub=None) -> Path:
    """On the main process (by RANK when `trainer` is None: a run cut off in its evaluation, resumed to finish it):
    the run's summary (first and last value of its metrics), its curves.png, the `eval:` section's before/after
    evaluation, the model card (run directory and model/, the evaluation in it), then the push
    of the model and its card to the hub (the recipe's `hub:` section)."""
    if trainer.is_world_process_zero() if trainer is not None else is_first_rank():
        print(f"{summary(run_dir, *metrics)}\nsaved {model_dir}")
        if (curves := write_run_curves(run_dir)) is not None:
            print(f"wrote {curves}")
        if evaluation is not None and trainer is not None:
            release_training_state(trainer)  # the evaluation (vLLM: most of the GPU) needs the memory
        evaluate_stage(evaluation, run_dir, model_dir)
        write_cards(run_dir, hub.repo_id if hub is not None else None)
        if hub is not None:
            print(f"pushed {model_dir} to {hub.repo_id}: {push_model(run_dir, model_dir, hub)}")
    leave_process_group()
    return model_dir


def policy_dtype(run: Run, hardware: Hardware | None = None) -> str:
    """The dtype the policy loads in (hardware.resolve_dtype; under LoRA, its frozen base's) on `hardware` (default:
    the run's)."""
    return resolve_dtype(run.recipe.model.dtype, hardware or run.hardware, adapters=run.recipe.peft is not None)


def open_run(run: Run, output_dir: Path | None, *, resume: bool, overwrite: bool,
             gpus: GpuPartition | None = None, trainer: type | None = None) -> OpenRun:
    """The run directory, the checkpoint to resume from and accelerate's state, with nothing written yet: the stage
    prepares data inside `state.main_process_first()` and loads the models, then calls `start_run`, so a run refused
    by any of those checks leaves the run directory as it was."""
    from accelerate import PartialState

    run_dir = run_dir_of(run, output_dir)
    # cpu=True: without a GPU, only this makes accelerate join the processes torchrun started (gloo); otherwise
    # every process would think it is the main one. The process group is created here, before TRL's config exists,
    # so train.ddp_timeout is handed to it here: the other ranks wait at a barrier while rank 0 prepares the data,
    # and torch's 10-minute default would time them out on a large mixture.
    state = PartialState(cpu=not run.hardware.on_gpu, timeout=timedelta(seconds=run.settings["ddp_timeout"]))
    with state.main_process_first():
        if state.is_main_process:
            checkpoint = resume_point(run, run_dir, resume=resume, overwrite=overwrite)
        else:
            checkpoint = last_checkpoint(run_dir) if resume else None
    return OpenRun(policy_dtype(run), run_dir, checkpoint, state, overwrite, gpus,
                   trainer)


def start_run(run: Run, opened: OpenRun, **sections) -> None:
    """On the main process, once every check has passed and the models have loaded: the run directory (emptied first
    with --overwrite), the resolved recipe and the manifest with `sections` (template, data, method: what the stage
    prepared)."""
    if opened.state.is_main_process:
        recipe = run.recipe
        start_run_dir(opened.run_dir, overwrite=opened.overwrite)
        write_recipe(opened.run_dir, run.resolved_recipe())

        model = {"source": recipe.model.source, "revision": recipe.model.revision,
                 **lineage(recipe.model.source, recipe.model.revision)}
        write_manifest(opened.run_dir, recipe=recipe.source, stage=recipe.stage, hardware=run.hardware.describe(),
                       model=model, inputs=stamped_inputs(run, opened.run_dir, opened.checkpoint is not None),
                       global_batch=run.settings.global_batch, **sections)


def resume_point(run: Run, run_dir: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """`runs.rundir.checkpoint_to_resume` for this run's recipe: what a run, and a dry run with --resume, resume
    from, after the same refusals."""
    return checkpoint_to_resume(run_dir, resume=resume, overwrite=overwrite, resolved=run.resolved_recipe(),
                                max_steps=run.settings["max_steps"], global_batch=run.settings.global_batch)


def run_dir_of(run: Run, output_dir: Path | None) -> Path:
    """--output-dir, else train.output_dir, else runs/<recipe name>/."""
    return Path(output_dir or run.settings.get("output_dir") or default_run_dir(run.recipe.source, run.recipe.stage))


def train_and_save(trainer, tokenizer, run_dir: Path, checkpoint: Path | None) -> Path:
    """Train (resuming if asked), save the model for inference and record the result. On SIGUSR1 the run saves a
    checkpoint at the next step end and raises SavedOnSignal instead (smolalign.runs.save_on_signal)."""
    if checkpoint is not None:
        _plain_cpu_device(trainer.args)
    keep_low_precision_updates(trainer)
    on_signal = save_on_signal_callback(trainer.args, checkpoint)
    trainer.add_callback(on_signal)
    trainer.add_callback(readable_checkpoints_callback())
    if checkpoint is not None:  # a checkpoint at the run's last step: loaded, then no step runs
        trainer.add_callback(no_step_callback())
    with listening(), loss_of_every_rank(trainer):  # listening already when run through run_stage, from its start
        try:
            result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        except NoStepLeft as stop:
            print(f"note: --resume: {checkpoint.name} {stop}; saving its weights as the model, no step trained",
                  file=sys.stderr)
            result = None
    if on_signal.stopped_at is not None:
        # A rank that exits first gets the others killed (torchrun, srun --kill-on-bad-exit): not before every rank,
        # the main process's trainer_state.json included, has written its part of the checkpoint.
        trainer.accelerator.wait_for_everyone()
        leave_process_group()
        raise SavedOnSignal(f"stopped on the time-limit signal after saving checkpoint-{on_signal.stopped_at} in "
                            f"{run_dir}; run again with --resume to continue")
    model_dir = run_dir / MODEL_DIR
    state_dict = None
    if is_zero3(trainer):
        # Under ZeRO-3 each rank holds a slice of every large tensor: every rank takes part in gathering them, and
        # the main process writes the whole.
        state_dict = trainer.accelerator.get_state_dict(trainer.model_wrapped)
    if trainer.is_world_process_zero():
        save_for_inference(trainer.model, tokenizer, model_dir, state_dict=state_dict)
        # no step trained: the loss the run recorded when it trained, if it got that far
        loss = whole_run_loss(result.training_loss, trainer.state, checkpoint) if result is not None else (
            read_manifest(run_dir).get("result") or {}).get("train_loss")
        write_manifest(run_dir, result={"global_step": trainer.state.global_step, "train_loss": loss,
                                        "model": str(model_dir), "resumed_from": str(checkpoint) if checkpoint else None})
    return model_dir


def readable_checkpoints_callback():
    """Each checkpoint's files get the permissions the umask gives a new file, as the final model's do (the trainer
    saves weights through safetensors, which writes them private to their owner)."""
    from transformers import TrainerCallback

    class ReadableCheckpoints(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                readable_as_created(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    return ReadableCheckpoints()


class NoStepLeft(Exception):
    """Raised as a resumed run that has no step left would start one."""


def no_step_callback():
    """Stops a resumed `train()` that has no step left (its checkpoint at or past the run's last step, by
    train.max_steps or by epochs) before its first step, once the trainer has loaded the checkpoint's weights and
    state: transformers' Trainer checks the end only after a step (and at an epoch's end it finalizes the run again,
    logging a training loss of 0)."""
    from transformers import TrainerCallback

    class NoStepLeft_(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if state.max_steps > 0 and state.global_step >= state.max_steps:
                raise NoStepLeft(f"is at step {state.global_step} of the run's {state.max_steps}")

    return NoStepLeft_()


def _plain_cpu_device(args) -> None:
    """On the CPU, the trainer names the device of process N `cpu:N` and, resuming, loads the optimizer state onto
    that device, which torch refuses; every process's memory is just "cpu"."""
    import torch

    if args.device.type == "cpu" and args.device.index is not None:
        args.__dict__["_setup_devices"] = torch.device("cpu")  # the cached value behind `args.device`


def is_zero3(trainer) -> bool:
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return plugin is not None and plugin.zero_stage == 3
