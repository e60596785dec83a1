"""`smolalign convert`: a pretraining checkpoint (nanotron, DeepSpeed ZeRO, torch DCP) into a transformers directory."""

from pathlib import Path
from typing import Annotated

import typer


def convert(
    source: Annotated[Path, typer.Argument(help="nanotron step or run folder, DeepSpeed checkpoint folder, or DCP folder.")],
    destination: Annotated[Path, typer.Argument(help="Output directory (written atomically).")],
    tokenizer: Annotated[Path | None, typer.Option(help="Tokenizer directory to ship with the model; it also trims a "
                                                        "padded vocabulary to its size.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16 or float16 (default: the checkpoint's).")] = None,
    config: Annotated[Path | None, typer.Option(help="transformers config.json (or its directory) of the architecture: "
                                                     "needed for DCP, and for DeepSpeed folders without one.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a non-empty destination.")] = False,
) -> None:
    """Convert a pretraining checkpoint into a directory that from_pretrained loads."""
    from smolalign.checkpoints.convert import convert as run

    typer.echo(run(source, destination, tokenizer=tokenizer, dtype=dtype, config=config, overwrite=overwrite).describe())


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Models")(convert)
