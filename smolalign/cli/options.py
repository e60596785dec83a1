"""Argument and option types shared by several commands."""

from pathlib import Path
from typing import Annotated

import typer

RecipeArg = Annotated[str, typer.Argument(help="Recipe YAML file or shipped recipe name (e.g. quickstart/sft).")]
SetOption = Annotated[list[str] | None, typer.Option("--set", "-s", help="Override, KEY=VALUE (e.g. train.learning_rate=1e-5); repeatable.")]
OutputDirOption = Annotated[Path | None, typer.Option("--output-dir", "-o", help="Run directory (default: train.output_dir, else runs/<recipe name>).")]


def command_line(ctx: typer.Context) -> list[str]:
    """The arguments of the running `smolalign` command, as `cli.main` handed them to the app (re-used to launch the
    same command again, and written into job scripts)."""
    return list(ctx.obj or [])
