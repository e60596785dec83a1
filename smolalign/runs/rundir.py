"""The run directory: chosen from the CLI, the recipe or the recipe's name; never silently overwritten."""

import re
import shutil
import sys
from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.checkpoints.files import read_json_object
from smolalign.errors import SmolalignError
from smolalign.recipe.load import shipped_recipes
from smolalign.recipe.yamlio import dump_yaml, load_yaml
from smolalign.runs.checkpoint_files import damage

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
RECIPE_FILE = "recipe.yaml"
MANIFEST_FILE = "manifest.json"
MODEL_DIR = "model"
RESUME_MUST_MATCH = {
    "peft": "its checkpoints hold weights shaped for the old recipe (adapters, or full weights), which cannot be loaded",
    "model.quantization": "its checkpoints hold weights shaped for the old recipe, which cannot be loaded",
    "train.optim": "its checkpoints hold the old optimizer's state, which the new one cannot load",
    "method": "the steps after the checkpoint would train another loss, on rows counted for the old method, and "
              "the run's record would name one method for both",
}
"""The recipe keys a resume may not change, each with why: a checkpoint's weights and optimizer state are shaped by
the first three, and a run is one method. A moved model.source resumes."""


def default_run_dir(recipe_source: str, stage: str) -> Path:
    """runs/<shipped name> for shipped recipes (runs/quickstart/sft), runs/<file stem> otherwise."""
    for name, path in shipped_recipes().items():
        if str(path) == recipe_source:
            return Path("runs") / name
    return Path("runs") / Path(recipe_source).stem


def checkpoint_step(checkpoint: Path | None) -> int | None:
    """The step a `checkpoint-N` folder holds (None for no checkpoint, or a folder of another name)."""
    match = CHECKPOINT.match(checkpoint.name) if checkpoint is not None else None
    return int(match.group(1)) if match else None


def last_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint (runs.checkpoint_files.damage), with a note for each newer one skipped; a
    SmolalignError naming the damage when checkpoints exist but none is complete."""
    found = [(int(m.group(1)), p) for p in run_dir.glob("checkpoint-*") if (m := CHECKPOINT.match(p.name)) and p.is_dir()]
    skipped = []
    for _, path in sorted(found, reverse=True):
        problem = damage(path)
        if problem is None:
            for name in skipped:
                print(f"note: --resume: skipping damaged {name}; resuming from {path.name}", file=sys.stderr)
            return path
        skipped.append(f"{path.name} ({problem})")
    if skipped:
        raise SmolalignError(f"--resume: no complete checkpoint in {run_dir}: {'; '.join(skipped[:3])}; delete the "
                             "damaged folders to start over with --resume, or pass --overwrite")
    return None


def at_the_last_step(checkpoint: Path, max_steps: int, same_recipe: bool = False) -> bool:
    """Whether `checkpoint` already holds the run's last step: the one train.max_steps asks for, or, without it, the
    last one the trainer counted for its epochs, when the recipe is the one the run started with (`same_recipe`).
    transformers' Trainer, resumed from it, would train one step more before it checks."""
    state = read_json_object(checkpoint / "trainer_state.json")
    step, planned = state.get("global_step"), state.get("max_steps")
    if not isinstance(step, int):
        return False
    if max_steps > 0:
        return step >= max_steps
    return same_recipe and isinstance(planned, int) and 0 < planned <= step


def is_trained(run_dir: Path) -> bool:
    """The run saved its model and recorded its result (the manifest's result is written after the model)."""
    return (run_dir / MODEL_DIR).is_dir() and "result" in read_manifest(run_dir)


def evaluation_cut_off(run_dir: Path, eval_file: str, max_steps: int, resolved: dict) -> bool:
    """The run trained to its end (its model saved, its newest checkpoint, if any, at its last step by the recipe
    now: a raised train.max_steps trains on) and stopped before its `eval:` section wrote `eval_file`."""
    if not is_trained(run_dir) or (run_dir / eval_file).is_file():
        return False
    checkpoint = last_checkpoint(run_dir)
    return checkpoint is None or at_the_last_step(checkpoint, max_steps,
                                                  same_recipe(run_dir, recipe_changes(run_dir, resolved)))


def refuse_resuming_a_finished_run(checkpoint: Path, max_steps: int, same_recipe: bool, resolved: dict) -> None:
    """A run whose newest checkpoint holds its last step (by train.max_steps, or by the epochs of an unchanged recipe:
    `same_recipe`) and whose model is saved is finished: refused on the main process before anything is written
    (resumed, the Trainer would train past the end and save over the model). Cut off in its final save, it is resumed
    to save the model only (stages.lifecycle.train_and_save)."""
    if at_the_last_step(checkpoint, max_steps, same_recipe) and is_trained(checkpoint.parent):
        key = "train.max_steps" if max_steps > 0 else "train.num_train_epochs"
        limit = (f"{key} {max_steps}" if max_steps > 0 else
                 f"the last step of its {key}, {resolved.get('train', {}).get('num_train_epochs')}")
        raise SmolalignError(f"--resume: {checkpoint.name} already reached {limit}, so the run is finished (its "
                             f"model is {checkpoint.parent / MODEL_DIR}); raise {key} to train on, or pass "
                             "--overwrite to train again")


def recipe_changes(run_dir: Path, resolved: dict) -> list[str]:
    """The keys of `resolved` whose values differ from the recipe the run in `run_dir` started with (its
    recipe.yaml), sorted; none when it has no recipe.yaml or a damaged one (kept aside and reported when the new one
    is written)."""
    path = run_dir / RECIPE_FILE
    try:
        before = load_yaml(path.read_text(errors="replace")) if path.is_file() else None
    except SmolalignError:
        return []
    return sorted(_changed_keys(before, resolved)) if isinstance(before, dict) else []


def refuse_an_incompatible_resume(run_dir: Path, changes: list[str]) -> None:
    """A resume whose recipe changed one of RESUME_MUST_MATCH since the run started (`changes`: `recipe_changes`) is
    refused before anything loads: the checkpoint would fail to load into the new model or optimizer (LoRA adapters
    on a full fine-tune's weights, SGD on AdamW's state), after the weights had loaded."""
    changed = {kept: reason for kept, reason in RESUME_MUST_MATCH.items()
               if any(key == kept or key.startswith(f"{kept}.") for key in changes)}
    if changed:
        raise SmolalignError(f"--resume: {', '.join(changed)} changed since {run_dir} started (its {RECIPE_FILE}): "
                             f"{'; '.join(dict.fromkeys(changed.values()))}; undo the change, or train in another "
                             "directory (-o) or with --overwrite")


def refuse_a_weights_only_checkpoint(checkpoint: Path) -> None:
    """A checkpoint saved with train.save_only_model holds no optimizer, schedule or RNG state: transformers would
    resume from it with a new optimizer and the schedule from its start, without a word."""
    if not any(checkpoint.glob("rng_state*.pth")):
        start = (f"merge it into its base (`smolalign convert {checkpoint} DIR`) and start a new run from DIR"
                 if (checkpoint / "adapter_config.json").is_file() else
                 f"start a new run from its weights (model.source: {checkpoint})")
        raise SmolalignError(f"--resume: {checkpoint} holds the model's weights only (train.save_only_model: true "
                             f"saves no optimizer, schedule or RNG state), so training cannot continue as it was; "
                             f"{start}, or pass --overwrite")


def same_recipe(run_dir: Path, changes: list[str]) -> bool:
    """Whether the run in `run_dir` started with the recipe it has now (`changes`: `recipe_changes`). By epochs, a
    run's last step is the trainer's count for the data and batch it had: only the same recipe is sure to have none
    left (another is resumed, and stops before a step if none is left)."""
    return (run_dir / RECIPE_FILE).is_file() and not changes


def checkpoint_to_resume(run_dir: Path, *, resume: bool, overwrite: bool, resolved: dict,
                         max_steps: int, global_batch: int | None = None) -> Path | None:
    """`check_run_dir`, then, when resuming from a checkpoint, the refusals of a finished run, of a recipe the
    checkpoint cannot be loaded into or that trains another method (both from one reading of the run's recipe.yaml),
    of a checkpoint holding weights only, and of another global batch; writes nothing (a dry run with --resume asks it
    too)."""
    checkpoint = check_run_dir(run_dir, resume=resume, overwrite=overwrite)
    if checkpoint is not None:
        changes = recipe_changes(run_dir, resolved)
        unchanged = same_recipe(run_dir, changes)
        refuse_resuming_a_finished_run(checkpoint, max_steps, unchanged, resolved)
        refuse_an_incompatible_resume(run_dir, changes)
        if not at_the_last_step(checkpoint, max_steps, unchanged):  # else only its model is saved
            refuse_a_weights_only_checkpoint(checkpoint)
            refuse_another_global_batch(run_dir, global_batch)
    return checkpoint


def refuse_another_global_batch(run_dir: Path, global_batch: int | None) -> None:
    """A resume whose global batch differs from the one the run started with (another process count, the same
    per-device batch and accumulation): the steps after the checkpoint would count other batches, and the trainer
    would skip the wrong rows of the epoch and run another schedule, without a word."""
    before = read_manifest(run_dir).get("global_batch")
    if global_batch is not None and isinstance(before, int) and before != global_batch:
        raise SmolalignError(f"--resume: {run_dir} started with a global batch of {before} rows and this run's is "
                             f"{global_batch} (another number of processes?): the steps after the checkpoint would "
                             "count other batches; resume with the processes it started with, or set "
                             f"launch.global_batch_size: {before} to keep its batch")


def refuse_resume_with_overwrite(resume: bool, overwrite: bool) -> None:
    """--resume continues a run and --overwrite starts it over: one or the other, never both (every verb that takes
    them calls this first, dry run or not)."""
    if resume and overwrite:
        raise SmolalignError("--resume and --overwrite contradict each other (continue this run / start it over): "
                             "pass one of them")


def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """Whether the run may use `run_dir`, deciding without writing anything; returns the checkpoint to resume from,
    if resuming. The directory and its state files are written by `start_run_dir` once every check has passed."""
    refuse_resume_with_overwrite(resume, overwrite)
    if run_dir.exists() and not run_dir.is_dir():
        raise SmolalignError(f"run directory {run_dir} is a file")
    non_empty = run_dir.is_dir() and any(run_dir.iterdir())
    if resume:
        if (run_dir / MANIFEST_FILE).is_file():
            read_manifest(run_dir)
        checkpoint = last_checkpoint(run_dir) if run_dir.is_dir() else None
        if checkpoint is not None:
            return checkpoint
        # A job requeued before its first checkpoint runs the same `--resume` command again: it starts over. A
        # finished run without checkpoints is not restarted behind the user's back.
        if (run_dir / MODEL_DIR).exists():
            raise SmolalignError(f"--resume: {run_dir} holds a finished model and no checkpoint-* folder to resume "
                                 "from; pass --overwrite to train again")
        print(f"note: --resume: no checkpoint in {run_dir} yet, starting from the beginning", file=sys.stderr)
        return None
    if non_empty and not overwrite:
        raise SmolalignError(
            f"run directory {run_dir} is not empty: pass --resume to continue it or --overwrite to start over")
    return None


def start_run_dir(run_dir: Path, *, overwrite: bool) -> None:
    """Empty (with --overwrite) and create the run directory: called once every check has passed."""
    if overwrite and run_dir.is_dir() and any(run_dir.iterdir()):
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)


def read_manifest(run_dir: Path) -> dict:
    """manifest.json, or {} when there is none; a damaged one is named (exit 2), never overwritten."""
    path = run_dir / MANIFEST_FILE
    if not path.is_file():
        return {}
    try:
        return read_json_object(path)
    except SmolalignError as exc:
        raise SmolalignError(f"{exc}; or delete {path} and smolalign writes a new one (the run's record of versions "
                             "and data is then lost)") from None


def write_recipe(run_dir: Path, resolved: dict) -> None:
    """The resolved recipe; on resume, differences from the one the run started with are reported first."""
    path = run_dir / RECIPE_FILE
    text = dump_yaml(resolved)
    if path.is_file() and path.read_text(errors="replace") != text:
        try:
            before = load_yaml(path.read_text(errors="replace")) or {}
        except SmolalignError:  # a damaged previous recipe is kept aside as it is
            before = {}
        changed = sorted(_changed_keys(before, resolved)) or ["unreadable before"]
        print(f"warning: resuming with a changed recipe ({', '.join(changed)}); the previous one is kept as "
              f"{RECIPE_FILE}.previous")
        path.rename(run_dir / f"{RECIPE_FILE}.previous")
    write_atomically(path, text)


def _changed_keys(before, after, prefix: str = "") -> set[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = set(before) | set(after)
        return set().union(*(_changed_keys(before.get(k), after.get(k), f"{prefix}{k}.") for k in keys)) if keys else set()
    return {prefix.rstrip(".")} if before != after else set()
