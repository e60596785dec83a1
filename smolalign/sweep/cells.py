"""A sweep's cells on disk and how each one runs: a cell is a normal run directory, finished when its model is saved
and its `eval:` evaluation written. A finished cell is skipped, a trained one only evaluated, a cut-off one resumed
(`--resume`), and a new one started, each through the normal run path: `smolalign STAGE RECIPE --set ... -o CELL`
in a process of its own (so one cell's memory and state never reach the next), or in this process when it is one
task of a Slurm array."""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from smolalign.errors import RunFailure, SmolalignError
from smolalign.evaluation.run import EVAL_FILE, check_stage_eval, evaluate_stage
from smolalign.launch import check_not_data_parallel, is_first_rank
from smolalign.resolve import Run
from smolalign.runs.card import write_cards
from smolalign.runs.manifest import read_manifest
from smolalign.runs.rundir import MODEL_DIR, RECIPE_FILE, is_trained, recipe_changes
from smolalign.stages.registry import run_stage
from smolalign.sweep.grid import Cell

SAMPLES_FILE = Path(EVAL_FILE).stem + ".samples.jsonl"
CELL_OVERRIDES = ("eval.before=false",)
"""Set in every cell: the cells are compared with each other (the first one is the baseline), so evaluating each
cell's input model again would only repeat work."""


@dataclass(frozen=True)
class CellRun:
    cell: Cell
    stage: str
    run_dir: Path
    resolved: Run
    """The cell's recipe (its overrides applied) resolved for this machine."""

    @property
    def overrides(self) -> list[str]:
        return [*self.cell.overrides, *CELL_OVERRIDES]


def cell_state(run_dir: Path) -> str:
    """done (model saved, evaluation written), evaluate (model saved), resume (cut off) or new."""
    trained = is_trained(run_dir)
    if trained and (run_dir / EVAL_FILE).is_file() and (run_dir / SAMPLES_FILE).is_file():
        return "done"
    if trained:
        return "evaluate"
    return "resume" if run_dir.is_dir() and any(run_dir.iterdir()) else "new"


def refuse_stale_cells(runs: list[CellRun]) -> None:
    """A cell trained, or started, with another value of a key the cell's recipe writes now (the base recipe or a
    `--set` edited since) is refused before any cell runs: skipped or resumed, it would be compared as if trained
    with the new one. Only keys the recipe writes, or a `--set` of the cell's first command wrote, are compared: a
    default smolalign changed between versions is not an edit, a `--set` dropped since is. The accumulation that `launch.global_batch_size`
    derives for the processes of the run is left out: the global batch it keeps is compared."""
    for run in runs:
        if cell_state(run.run_dir) == "new":
            continue
        resolved = run.resolved.resolved_recipe()
        written = _paths(run.resolved.recipe.raw) | _set_before(run.run_dir)
        derived = {"train.gradient_accumulation_steps"} if (resolved.get("launch") or {}).get("global_batch_size") \
            else set()
        changed = [key for key in recipe_changes(run.run_dir, resolved) if key not in derived
                   and any(key == path or key.startswith(f"{path}.") or path.startswith(f"{key}.") for path in written)]
        if changed:
            raise SmolalignError(
                f"sweep cell {run.cell.name}: {', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''} changed "
                f"since the cell started (its {run.run_dir / RECIPE_FILE}): the sweep would compare it as if it had "
                "run the recipe as it is now; undo the change, move the cell's folder away to train it again, or "
                "pass --overwrite to train every cell again")


def _set_before(run_dir: Path) -> set[str]:
    """The keys the `--set`s of the command that started the cell wrote (its manifest's `command`)."""
    command = [str(arg) for arg in read_manifest(run_dir).get("command") or []]
    items = [item for flag, item in zip(command, command[1:], strict=False) if flag in ("--set", "-s")]
    items += [arg.removeprefix("--set=") for arg in command if arg.startswith("--set=")]
    return {item.partition("=")[0].strip() for item in items}


def _paths(mapping: dict, prefix: str = "") -> set[str]:
    """The dotted paths of a nested mapping's leaves, the values the recipe writes (train.learning_rate, method)."""
    paths = set()
    for key, value in mapping.items():
        paths |= _paths(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {f"{prefix}{key}"}
    return paths


PYTHON_PREFIX = (sys.executable, "-P", "-m", "smolalign")
"""What runs `smolalign` in a cell's process (-P: the working directory off the module path, see launch.SAFE_PATH)."""


def cli_arguments(command: list[str]) -> list[str]:
    """A cell's command without the interpreter part: what `smolalign` is given."""
    return command[len(PYTHON_PREFIX):]


def stage_command(run: CellRun, recipe: Path, *, overwrite: bool, launch: str | None, num_processes: int | None
                  ) -> list[str]:
    """The `smolalign STAGE` command line that trains a cell (and evaluates it when it ends)."""
    command = [*PYTHON_PREFIX, run.stage, str(recipe)]
    for override in run.overrides:
        command += ["--set", override]
    command += ["--output-dir", str(run.run_dir)]
    if overwrite:
        command.append("--overwrite")
    elif cell_state(run.run_dir) == "resume":
        command.append("--resume")
    if launch is not None:
        command += ["--launch", launch]
    if num_processes is not None:
        command += ["--num-processes", str(num_processes)]
    return command


def run_cell(run: CellRun, recipe: Path, *, overwrite: bool, launch: str | None, num_processes: int | None) -> None:
    """Bring one cell to done in a process of its own (its evaluation in this one, if only that is missing)."""
    state = "new" if overwrite else cell_state(run.run_dir)
    print(f"sweep: cell {run.cell.index + 1} {run.cell.name}: {_doing[state]}", flush=True)
    if state == "done":
        return
    if state == "evaluate":
        evaluate_cell(run)
        return
    command = stage_command(run, recipe, overwrite=overwrite, launch=launch, num_processes=num_processes)
    code = subprocess.run(command).returncode
    if code:
        raise RunFailure(f"sweep cell {run.cell.name}: `smolalign {run.stage}` exited with {code} (see above); run "
                         "the sweep again to resume it")
    if cell_state(run.run_dir) != "done":
        raise RunFailure(f"sweep cell {run.cell.name}: the run ended without a saved model and {EVAL_FILE} in "
                         f"{run.run_dir}")


_doing = {"done": "finished, skipped", "evaluate": "trained, evaluating", "resume": "cut off, resuming",
          "new": "training"}


def run_cell_here(run: CellRun, *, overwrite: bool) -> None:
    """One cell in this process, which a launcher started (a Slurm array task): every process trains it."""
    recipe = run.resolved.recipe
    command = stage_command(run, Path(recipe.source), overwrite=overwrite, launch=None, num_processes=None)
    check_not_data_parallel(recipe, cli_arguments(command))
    state = "new" if overwrite else cell_state(run.run_dir)
    print(f"sweep: cell {run.cell.index + 1} {run.cell.name}: {_doing[state]}", flush=True)
    if state == "evaluate" and is_first_rank():
        evaluate_cell(run)
    elif state in ("new", "resume"):
        run_stage(run.resolved, output_dir=run.run_dir, resume=state == "resume", overwrite=overwrite)


def evaluate_cell(run: CellRun) -> None:
    """The recipe's `eval:` section on the cell's saved model, as the stage runs it when it ends, and the results
    into the cell's model card."""
    recipe = run.resolved.recipe
    evaluate_stage(check_stage_eval(run.resolved), run.run_dir, run.run_dir / MODEL_DIR)
    write_cards(run.run_dir, recipe.hub.repo_id if recipe.hub is not None else None)
