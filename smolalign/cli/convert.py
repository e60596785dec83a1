"""`smolalign convert`: a pretraining checkpoint (nanotron, DeepSpeed ZeRO, torch DCP) into a transformers directory,
or a LoRA adapter merged into its base."""

from pathlib import Path
from typing import Annotated

import typer

from smolalign.errors import SmolalignError


def convert(
    source: Annotated[Path, typer.Argument(help="nanotron step or run folder, DeepSpeed checkpoint folder, DCP folder, or a LoRA "
                                                         "adapter folder (a QLoRA run's model/) to merge into its base.")],
    destination: Annotated[Path, typer.Argument(help="Output directory (written atomically).")],
    tokenizer: Annotated[Path | None, typer.Option(help="Tokenizer directory to ship with the model; it also trims a "
                                                        "padded vocabulary to its size.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float32, bfloat16 or float16 (default: the checkpoint's).")] = None,
    config: Annotated[Path | None, typer.Option(help="transformers config.json (or its directory) of the architecture: "
                                                     "needed for DCP, and for DeepSpeed folders without one.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace a non-empty destination.")] = False,
) -> None:
    """Convert a pretraining checkpoint, or merge a LoRA adapter into its base, into a directory that from_pretrained
    loads."""
    from smolalign.checkpoints.convert import convert as run
    from smolalign.models.adapter_folder import merge_adapter_folder
    from smolalign.models.lora_merge import adapter_base

    if source.is_dir() and adapter_base(source) is not None:
        if config is not None:
            raise SmolalignError(f"{source} is a LoRA adapter: its base model has the config; drop --config")
        typer.echo(merge_adapter_folder(source, destination, dtype=dtype, tokenizer=tokenizer, overwrite=overwrite))
        return
    typer.echo(run(source, destination, tokenizer=tokenizer, dtype=dtype, config=config, overwrite=overwrite).describe())


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Models")(convert)
