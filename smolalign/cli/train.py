"""`smolalign sft | po | rl`: one command per training stage."""

from typing import Annotated

import typer

from smolalign.cli.options import OutputDirOption, RecipeArg, SetOption
from smolalign.errors import SmolalignError

DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the resolved recipe and the plan, check the data, load no weights.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue from the last checkpoint in the run directory.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Empty a non-empty run directory and start over.")]


def sft(recipe: RecipeArg, set_: SetOption = None, output_dir: OutputDirOption = None, dry_run: DryRun = False,
        resume: Resume = False, overwrite: Overwrite = False) -> None:
    """Supervised fine-tuning (assistant-only loss, packing, /think and /no_think templates)."""
    from smolalign.recipe.validate import load_recipe
    from smolalign.stages import sft as stage

    stage.run(load_recipe(recipe, set_ or [], "sft"), output_dir=output_dir, dry_run=dry_run, resume=resume,
              overwrite=overwrite)


def po(recipe: RecipeArg, set_: SetOption = None, output_dir: OutputDirOption = None, dry_run: DryRun = False,
       resume: Resume = False, overwrite: Overwrite = False) -> None:
    """Preference optimization (DPO, APO-zero, KTO, ORPO)."""
    raise SmolalignError("smolalign po is not available yet")


def rl(recipe: RecipeArg, set_: SetOption = None, output_dir: OutputDirOption = None, dry_run: DryRun = False,
       resume: Resume = False, overwrite: Overwrite = False) -> None:
    """On-policy training (GRPO with verifiable rewards, distillation)."""
    raise SmolalignError("smolalign rl is not available yet")


def register(app: typer.Typer) -> None:
    for command in (sft, po, rl):
        app.command(rich_help_panel="Train")(command)
