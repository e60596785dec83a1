"""A sweep from start to end: the grid checked cell by cell before anything runs (every cell's recipe validated as
its stage validates it, the `eval:` section required), then each cell brought to done in turn, then the comparison.
`--dry-run` prints the grid and each cell's plan; a Slurm array job (one task per cell) is written by
smolalign.sweep.slurm from the same cells."""

import dataclasses
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from smolalign.errors import USER_ERRORS, SmolalignError
from smolalign.evaluation.run import check_stage_eval
from smolalign.preflight import preflight
from smolalign.recipe.load import read_recipe, recipe_path
from smolalign.recipe.validate import recipe_stage
from smolalign.resolve import load_run
from smolalign.runs.rundir import default_run_dir
from smolalign.slurm.job import check_stage
from smolalign.sweep.cells import (
    CELL_OVERRIDES,
    CellRun,
    cell_state,
    cli_arguments,
    refuse_stale_cells,
    run_cell,
    run_cell_here,
    stage_command,
)
from smolalign.sweep.compare import compare
from smolalign.sweep.grid import Cell, expand, parse_grid

ARRAY_TASK = "SLURM_ARRAY_TASK_ID"


@dataclass(frozen=True)
class SweepRequest:
    recipe: str
    grid: list[str]
    seeds: int | None = None
    output_dir: Path | None = None
    dry_run: bool = False
    overwrite: bool = False
    launch: str | None = None
    num_processes: int | None = None
    slurm: list[str] = field(default_factory=list)
    """`--slurm KEY=VALUE` settings of the array job (nodes=1, partition=gpu, submit=true, ...)."""
    overrides: list[str] = field(default_factory=list)
    """`--set KEY=VALUE` overrides applied to every cell (not part of the cells' names)."""
    array_task: bool = False
    """Run only the cell $SLURM_ARRAY_TASK_ID, in this process (what each task of the array job runs)."""
    argv: list[str] = field(default_factory=list)
    """The `smolalign sweep` arguments that made the request: with --slurm, what the array job's script records, and
    (without --slurm) the command that writes the comparison once the job is done."""


@dataclass(frozen=True)
class Sweep:
    recipe: Path
    directory: Path
    axes: list[tuple[str, list[str]]]
    seeds: int | None
    runs: list[CellRun]


def plan_sweep(request: SweepRequest, hardware=None) -> Sweep:
    """Every cell validated (exit 2 naming the cell and the key on any problem), and the cells already on disk checked
    against their recipes now (without --overwrite), before anything is written."""
    path = recipe_path(request.recipe)
    axes = parse_grid(request.grid)
    cells = expand(axes, request.seeds)
    refuse_overridden_axes(request.overrides, cells[0].overrides)
    if not isinstance(read_recipe(path).get("eval"), dict):
        raise SmolalignError(f"{path.name} has no eval: section: a sweep compares its cells with the recipe's "
                             "evaluation; add eval: (data and rewards, e.g. rewards: [{name: math_accuracy}])")
    if request.output_dir is None:
        try:
            stage = recipe_stage(str(path), [*request.overrides, *cells[0].overrides])
        except USER_ERRORS as exc:
            raise SmolalignError(f"sweep cell {cells[0].name}: {exc}") from None
    directory = (request.output_dir or default_run_dir(str(path), stage)).expanduser().resolve()
    runs = [_validate(path, cell, directory, hardware, request.overrides) for cell in cells]
    sweep = Sweep(path, directory, axes, request.seeds, runs)
    if not request.overwrite:
        refuse_stale_cells([_array_cell(sweep)] if request.array_task else runs)
    return sweep


def refuse_overridden_axes(overrides: list[str], cell_overrides: tuple[str, ...]) -> None:
    """A `--set` of a key the grid sets too (--seeds sets train.seed) is refused: each cell's value would replace it
    without a word."""
    swept = {item.partition("=")[0].strip() for item in cell_overrides}
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key in swept:
            raise SmolalignError(f"--set {item}: the sweep's grid sets {key} in every cell, so this value would never "
                                 "be used; drop the --set, or list the value in the grid")


def _validate(path: Path, cell: Cell, directory: Path, hardware, common: list[str]) -> CellRun:
    if common:
        cell = dataclasses.replace(cell, overrides=(*common, *cell.overrides))
    overrides = [*cell.overrides, *CELL_OVERRIDES]
    try:
        stage = recipe_stage(str(path), overrides)
        run = load_run(str(path), overrides, stage, hardware)
        preflight(run)
    except USER_ERRORS as exc:
        raise SmolalignError(f"sweep cell {cell.name}: {exc}") from None
    return CellRun(cell, stage, directory / cell.name, run)


def run_sweep(request: SweepRequest) -> dict | None:
    """Plan, then dry-run, run one array task, or run every cell and compare them (`--slurm`: sweep.slurm)."""
    sweep = plan_sweep(request)
    if request.array_task:
        run_cell_here(_array_cell(sweep), overwrite=request.overwrite)
        return None
    plans = check_cells(sweep)
    print(describe(sweep))
    if request.dry_run:
        dry_run(sweep, request, plans)
        return None

    check_stage_eval(sweep.runs[0].resolved)  # the eval data and its columns, before the first cell trains
    for run in sweep.runs:
        run_cell(run, sweep.recipe, overwrite=request.overwrite, launch=request.launch,
                 num_processes=request.num_processes)

    return compare(sweep.runs, sweep.directory, sweep.axes, sweep.seeds)


def describe(sweep: Sweep) -> str:
    shape = " × ".join(f"{key} ({len(values)})" for key, values in sweep.axes)
    seeds = f" × {sweep.seeds} seeds" if sweep.seeds else ""
    lines = [f"sweep: {len(sweep.runs)} cells ({shape}{seeds}) of "
             f"{sweep.recipe} in {sweep.directory}; baseline {sweep.runs[0].cell.name}"]
    for run in sweep.runs:
        lines.append(f"  {run.cell.index + 1}. {run.cell.name}  [{run.stage}, {cell_state(run.run_dir)}]")
    return "\n".join(lines)


def check_cells(sweep: Sweep) -> list:
    """Each cell's plan, from its stage's own checks before loading (model source, template, data, batch
    arithmetic), so a cell that cannot run stops the sweep before the first one starts."""
    plans = []
    for run in sweep.runs:
        try:
            plans.append(check_stage(run.resolved, skip_data=False))
        except USER_ERRORS as exc:
            raise SmolalignError(f"sweep cell {run.cell.name}: {exc}") from None
    return plans


def dry_run(sweep: Sweep, request: SweepRequest, plans: list) -> None:
    """Each cell's command and plan, loading no weights."""
    for run, plan in zip(sweep.runs, plans, strict=True):
        command = stage_command(run, sweep.recipe, overwrite=request.overwrite, launch=request.launch,
                                num_processes=request.num_processes)
        print(f"\ncell {run.cell.index + 1}: {run.cell.name}\n  {shlex.join(['smolalign', *cli_arguments(command)])}")
        print(plan.render())


def _array_cell(sweep: Sweep) -> CellRun:
    text = os.environ.get(ARRAY_TASK, "")
    if not text.isdigit() or int(text) >= len(sweep.runs):
        raise SmolalignError(f"--array-task: ${ARRAY_TASK} is {text or 'unset'}; expected a cell index below "
                             f"{len(sweep.runs)} (the sweep's Slurm job sets it)")
    return sweep.runs[int(text)]
