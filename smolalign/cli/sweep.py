"""`smolalign sweep RECIPE --grid KEY=V1,V2 [--grid ...] [--seeds N]`: one run per cell of the grid, each evaluated
with the recipe's `eval:` section, compared against the first cell (sweep.md, sweep.png, sweep.json)."""

from pathlib import Path
from typing import Annotated

import typer

from smolalign.cli.options import RecipeArg, SetOption, command_line

Grid = Annotated[list[str] | None, typer.Option("--grid", "-g", help="KEY=V1,V2[,...]: values of one recipe key "
                                                                      "(as --set takes them); repeatable, the cells "
                                                                      "are every combination.")]
Seeds = Annotated[int | None, typer.Option("--seeds", help="Run every cell with train.seed 0..N-1.")]
OutputDir = Annotated[str | None, typer.Option("--output-dir", "-o", help="Folder of the cells' run directories and "
                                                                          "the comparison (default: runs/<recipe>).")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the grid and each cell's plan; run nothing.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Start every cell over (default: a finished cell is "
                                                             "skipped, a cut-off one resumed).")]
Resume = Annotated[bool, typer.Option("--resume", hidden=True, help="The default: accepted for launchers that pass it.")]
Launch = Annotated[str | None, typer.Option("--launch", help="Run each cell under accelerate with this preset (ddp, "
                                                             "zero2, zero3, ...); with --slurm, the job's preset.")]
NumProcesses = Annotated[int | None, typer.Option("--num-processes", show_default=False, help=(
    "Processes per cell for --launch (default: as `smolalign sft` decides: the recipe's launch.num_processes, else "
    "one per GPU)."))]
Slurm = Annotated[list[str] | None, typer.Option("--slurm", help="Write a Slurm array job (one task per cell) instead "
                                                                 "of running here; KEY=VALUE settings of `launch "
                                                                 "slurm` (nodes=1, gpus-per-node=8, partition=gpu, "
                                                                 "time=4:00:00, sbatch=qos=high, submit=true); "
                                                                 "repeatable.")]
ArrayTask = Annotated[bool, typer.Option("--array-task", hidden=True, help="Run cell $SLURM_ARRAY_TASK_ID only.")]


def sweep(ctx: typer.Context, recipe: RecipeArg, grid: Grid = None, seeds: Seeds = None, set_: SetOption = None,
          output_dir: OutputDir = None, dry_run: DryRun = False, overwrite: Overwrite = False, resume: Resume = False, launch: Launch = None,
          num_processes: NumProcesses = None, slurm: Slurm = None, array_task: ArrayTask = False) -> None:
    """Run RECIPE once per cell of a grid (each a normal run directory named by its overrides), evaluate each with
    the recipe's eval: section and compare them with the first cell: intervals and paired differences."""
    from smolalign.runs.rundir import refuse_resume_with_overwrite
    from smolalign.stages.compile_cache import keep_compiled_kernels

    keep_compiled_kernels()  # before anything imports TRL: a Slurm array task trains its cell in this process
    from smolalign.sweep.run import SweepRequest, run_sweep
    from smolalign.sweep.slurm import write_sweep_job

    refuse_resume_with_overwrite(resume, overwrite)
    request = SweepRequest(recipe, grid or [], seeds, Path(output_dir) if output_dir else None, dry_run,
                           overwrite, launch, num_processes, slurm or [], set_ or [], array_task, command_line(ctx))
    write_sweep_job(request) if request.slurm else run_sweep(request)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Train")(sweep)
