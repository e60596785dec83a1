"""`smolalign sft | po | rl`: one command per training stage."""

import os
from typing import Annotated

import typer

from smolalign.cli.options import OutputDirOption, RecipeArg, SetOption, command_line
from smolalign.errors import SmolalignError

DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the resolved recipe and the plan, check the data, load no weights.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in the run directory.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Empty a non-empty run directory and start over.")]
Launch = Annotated[str | None, typer.Option("--launch", help="Run on several processes under accelerate with a preset "
                                                             "(ddp, zero2, zero3, zero3_offload, fsdp2) or an "
                                                             "accelerate config file.")]
NumProcesses = Annotated[int | None, typer.Option(
    "--num-processes", help="Processes for --launch (default: the recipe's launch.num_processes, else one per GPU "
                            "left for training, 1 on a CPU).", show_default=False)]


def refuse_resume_with_overwrite(resume: bool, overwrite: bool) -> None:
    from smolalign.runs.rundir import refuse_resume_with_overwrite as refuse

    refuse(resume, overwrite)


def _train(stage: str, recipe: str, overrides: list[str] | None, argv: list[str], *, launch: str | None,
           num_processes: int | None, **options) -> None:
    """Parse the recipe for `stage` and resolve it once for this machine; then either launch this command (`argv`)
    on several processes, or as one process in a child that sees only training's GPUs when the run starts a vLLM
    server beside it (launch.planned_launch decides: --launch, the recipe's `launch:` section, or one process per
    GPU), or run it here: check what it needs from the machine and run it with its method's stage
    (`stages.registry`). A process some launcher started (ours, accelerate, torchrun, srun) runs it here; one process
    that would see several GPUs is refused first, with the command that runs one per GPU."""
    from smolalign.launch import check_not_data_parallel, under_launcher
    from smolalign.resolve import load_run
    from smolalign.stages.compile_cache import keep_compiled_kernels

    keep_compiled_kernels()  # before anything imports TRL, whose import sets torch's default; launched ranks inherit
    run = load_run(recipe, overrides or [], stage)
    if not under_launcher() and _launched(run, argv, launch, num_processes):
        return
    from smolalign.preflight import preflight  # only where it runs here: a launching command loads no stage
    from smolalign.stages.registry import run_stage

    preflight(run)
    check_not_data_parallel(run.recipe, argv)
    run_stage(run, **options)


def _launched(run, argv: list[str], launch: str | None, num_processes: int | None) -> bool:
    """Whether `run` went to other processes (exit with the launcher's code when it failed)."""
    from smolalign.launch import partition_for, planned_launch, relaunch, run_on_partition

    launch, num_processes = planned_launch(run, launch, num_processes)
    if launch is not None:
        code = relaunch(run, launch, num_processes, argv)
    elif (gpus := partition_for(run, 1)) is not None:
        code = run_on_partition(argv, gpus)
    else:
        return False
    if code:
        raise typer.Exit(code)
    return True


def sft(ctx: typer.Context, recipe: RecipeArg, set_: SetOption = None, output_dir: OutputDirOption = None,
        dry_run: DryRun = False, resume: Resume = False, overwrite: Overwrite = False, launch: Launch = None,
        num_processes: NumProcesses = None) -> None:
    """Supervised fine-tuning (assistant-only loss, packing, /think and /no_think templates)."""
    refuse_resume_with_overwrite(resume, overwrite)
    _train("sft", recipe, set_, command_line(ctx), launch=launch, num_processes=num_processes, output_dir=output_dir,
           dry_run=dry_run, resume=resume, overwrite=overwrite)


PoTarget = Annotated[str, typer.Argument(
    metavar="RECIPE | pairs RECIPE",
    help="A recipe file or shipped name (quickstart/po). `pairs RECIPE` only generates the recipe's pairs.")]
PairsRecipe = Annotated[str | None, typer.Argument(metavar="", show_default=False, hidden=True,
                                                   help="The recipe of `po pairs RECIPE`.")]
Regenerate = Annotated[bool, typer.Option("--regenerate", help="pairs: generate again even if the pairs are cached.")]


def po(ctx: typer.Context, target: PoTarget, pairs_recipe: PairsRecipe = None, set_: SetOption = None,
       output_dir: OutputDirOption = None, dry_run: DryRun = False, resume: Resume = False,
       overwrite: Overwrite = False, regenerate: Regenerate = False, launch: Launch = None,
       num_processes: NumProcesses = None) -> None:
    """Preference optimization (DPO and its loss variants, APO-zero, KTO, ORPO); `po pairs RECIPE` generates
    chosen/rejected pairs from a strong and a weak model."""
    refuse_resume_with_overwrite(resume, overwrite)
    if target == "pairs":
        if pairs_recipe is None:
            raise SmolalignError("usage: smolalign po pairs RECIPE")
        if dry_run:  # it would generate: the plan of the pairs is the po stage's
            overrides = "".join(f" --set {item}" for item in set_ or [])
            raise SmolalignError(f"po pairs generates; for its plan (what would be generated, from which models, all "
                                 f"checked) run `smolalign po {pairs_recipe}{overrides} --dry-run`")
        given = [option for option, value in (("--output-dir", output_dir), ("--resume", resume),
                                               ("--overwrite", overwrite), ("--launch", launch),
                                               ("--num-processes", num_processes)) if value]
        if given:
            raise SmolalignError(f"po pairs: {given[0]} is for training; the pairs are written to pairs.output (or "
                                 "the pairs cache) by one process, and generated again with --regenerate")
        _generate_pairs(pairs_recipe, set_, force=regenerate)
        return
    if pairs_recipe is not None:
        raise SmolalignError(f"unexpected argument {pairs_recipe!r} (did you mean smolalign po pairs {pairs_recipe}?)")
    argv = command_line(ctx)
    if regenerate:
        _regenerate_first(target, set_, dry_run)
        argv = [arg for arg in argv if arg != "--regenerate"]  # launched processes find them generated
    _train("po", target, set_, argv, launch=launch, num_processes=num_processes, output_dir=output_dir,
           dry_run=dry_run, resume=resume, overwrite=overwrite)


def _generate_pairs(recipe: str, overrides: list[str] | None, *, force: bool) -> None:
    from smolalign.pairs.build import generate_pairs
    from smolalign.pairs.sides import warn_sides_in_other_modes
    from smolalign.preflight import preflight
    from smolalign.resolve import load_run

    run = load_run(recipe, overrides or [], "po")
    preflight(run)
    warn_sides_in_other_modes(run.recipe)
    generate_pairs(run, force=force)


def _regenerate_first(recipe: str, overrides: list[str] | None, dry_run: bool) -> None:
    """`po RECIPE --regenerate`: the pairs generated again in this one process, before training (or the processes
    it launches) reads them."""
    if dry_run:
        raise SmolalignError("--regenerate with --dry-run: a dry run generates nothing; drop one of them")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise SmolalignError("--regenerate in one of several launched processes: each would generate the pairs; run "
                             f"`smolalign po pairs {recipe} --regenerate` once first, then the launch without it")
    _generate_pairs(recipe, overrides, force=True)


def rl(ctx: typer.Context, recipe: RecipeArg, set_: SetOption = None, output_dir: OutputDirOption = None,
       dry_run: DryRun = False, resume: Resume = False, overwrite: Overwrite = False, launch: Launch = None,
       num_processes: NumProcesses = None) -> None:
    """On-policy training: GRPO with verifiable rewards (math, format, length, code in a sandbox), or on-policy
    distillation from a teacher (distill, gold, auto)."""
    refuse_resume_with_overwrite(resume, overwrite)
    _train("rl", recipe, set_, command_line(ctx), launch=launch, num_processes=num_processes, output_dir=output_dir,
           dry_run=dry_run, resume=resume, overwrite=overwrite)


def register(app: typer.Typer) -> None:
    for command in (sft, po, rl):
        app.command(rich_help_panel="Train")(command)
