"""`smolalign plot`: the training curves of one or several run directories in one PNG."""

from pathlib import Path
from typing import Annotated

import typer


def plot(
    run_dirs: Annotated[list[Path], typer.Argument(metavar="RUN_DIR...", help="Run directories (each holds the "
                                                                          "metrics.jsonl its run logged).")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="PNG to write (default: RUN_DIR/curves.png "
                                                                        "for one run, curves.png here for several).")] = None,
) -> None:
    """Draw the loss, learning rate, grad norm and each stage's own metrics of runs, overlaid."""
    from smolalign.runs.curves import CURVES_FILE, plot_runs

    default = run_dirs[0] / CURVES_FILE if len(run_dirs) == 1 else Path(CURVES_FILE)
    typer.echo(f"wrote {plot_runs(run_dirs, output or default)}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Inspect")(plot)
