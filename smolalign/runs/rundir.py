"""The run directory: chosen from the CLI, the recipe or the recipe's name; never silently overwritten."""

import re
import shutil
import sys
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.yamlio import dump_yaml

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
RECIPE_FILE = "recipe.yaml"
MANIFEST_FILE = "manifest.json"
MODEL_DIR = "model"
TRAINER_STATE = "trainer_state.json"


def default_run_dir(recipe_source: str, stage: str) -> Path:
    """runs/<shipped name> for shipped recipes (runs/quickstart/sft), runs/<file stem> otherwise."""
    from smolalign.recipe.load import shipped_recipes

    for name, path in shipped_recipes().items():
        if str(path) == recipe_source:
            return Path("runs") / name
    return Path("runs") / Path(recipe_source).stem


def last_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint. The trainer writes trainer_state.json last, so a folder without it was cut
    off while saving (a preempted or requeued job) and would fail to load."""
    found = [(int(m.group(1)), p) for p in run_dir.glob("checkpoint-*") if (m := CHECKPOINT.match(p.name)) and p.is_dir()]
    for _, path in sorted(found, reverse=True):
        if (path / TRAINER_STATE).is_file():
            return path
        print(f"note: skipping {path}: it has no {TRAINER_STATE} (its save was interrupted)", file=sys.stderr)
    return None


def prepare_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """Create or reuse the run directory; returns the checkpoint to resume from, if resuming."""
    if resume and overwrite:
        raise SmolalignError("--resume and --overwrite contradict each other; pick one")
    if run_dir.exists() and not run_dir.is_dir():
        raise SmolalignError(f"run directory {run_dir} is a file")
    non_empty = run_dir.is_dir() and any(run_dir.iterdir())
    if resume:
        checkpoint = last_checkpoint(run_dir) if run_dir.is_dir() else None
        if checkpoint is not None:
            return checkpoint
        # A job requeued before its first checkpoint runs the same `--resume` command again: it starts over. A
        # finished run without checkpoints is not restarted behind the user's back.
        if (run_dir / MODEL_DIR).exists():
            raise SmolalignError(f"--resume: {run_dir} holds a finished model and no checkpoint-* folder to resume "
                                 "from; pass --overwrite to train again")
        print(f"note: --resume: no checkpoint in {run_dir} yet, starting from the beginning", file=sys.stderr)
        run_dir.mkdir(parents=True, exist_ok=True)
        return None
    if non_empty:
        if not overwrite:
            raise SmolalignError(
                f"run directory {run_dir} is not empty: pass --resume to continue it or --overwrite to start over")
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return None


def write_recipe(run_dir: Path, resolved: dict) -> None:
    """The resolved recipe; on resume, differences from the one the run started with are reported first."""
    path = run_dir / RECIPE_FILE
    text = dump_yaml(resolved)
    if path.is_file() and path.read_text() != text:
        from smolalign.recipe.yamlio import load_yaml

        before = load_yaml(path.read_text()) or {}
        changed = sorted(_changed_keys(before, resolved))
        print(f"warning: resuming with a changed recipe ({', '.join(changed)}); the previous one is kept as "
              f"{RECIPE_FILE}.previous")
        path.rename(run_dir / f"{RECIPE_FILE}.previous")
    path.write_text(text)


def _changed_keys(before, after, prefix: str = "") -> set[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = set(before) | set(after)
        return set().union(*(_changed_keys(before.get(k), after.get(k), f"{prefix}{k}.") for k in keys)) if keys else set()
    return {prefix.rstrip(".")} if before != after else set()
