"""`smolalign recipes list | show | validate | import | cp`."""

from pathlib import Path
from typing import Annotated

import typer

from smolalign.cli.options import RecipeArg, SetOption

app = typer.Typer(help="List, show and validate recipes.", no_args_is_help=True)


@app.command("list")
def list_() -> None:
    """Shipped recipes, with the first line of each one's header comment."""
    from smolalign.recipe.load import header_comment, shipped_recipes

    shipped = shipped_recipes()
    width = max((len(n) for n in shipped), default=0)
    for name, path in shipped.items():
        typer.echo(f"{name.ljust(width)}  {next(iter(header_comment(path)), '').strip()}")


@app.command()
def show(recipe: RecipeArg, set_: SetOption = None) -> None:
    """The recipe after `extends:` and overrides are applied (not yet validated)."""
    from smolalign.recipe.load import apply_overrides, read_recipe
    from smolalign.recipe.yamlio import dump_yaml

    typer.echo(dump_yaml(apply_overrides(read_recipe(recipe), set_ or [])), nl=False)


ForMachine = Annotated[str | None, typer.Option(
    "--for", metavar="NxGPU|launch", help="Check for another machine: N GPUs of a type (8xH100) or the recipe's "
                                          "launch: section, running the smolalign image; what only this machine "
                                          "lacks is listed as notes.")]


@app.command()
def validate(recipe: RecipeArg, set_: SetOption = None,
             stage: str = typer.Option(None, help="sft, po or rl (default: the recipe's `stage:`, else sft)."),
             for_: ForMachine = None) -> None:
    """Check every section (unknown keys, types, TRL fields) without touching data or weights, and what the recipe
    needs from the machine it runs on (this one, or the one --for describes)."""
    import dataclasses

    from smolalign.hardware import Hardware
    from smolalign.preflight import findings, preflight
    from smolalign.recipe.load import apply_overrides, read_recipe, recipe_path
    from smolalign.recipe.validate import parse_recipe
    from smolalign.resolve import resolve
    from smolalign.target import described_target, this_machine

    path = recipe_path(recipe)
    raw = apply_overrides(read_recipe(path), set_ or [])
    parsed = parse_recipe(raw, stage or raw.get("stage") or "sft", str(path))
    if for_ is None:
        preflight(resolve(parsed))
        typer.echo(f"{path}: ok")
        return
    target, preset = described_target(for_, parsed.launch, parsed.generation)
    # the target's processes and GPUs divide the global batch; its caches are not this machine's
    run = resolve(parsed, Hardware("cuda", target.gpus, target.where, True, target.processes, 1), target)
    preflight(run)
    launched = f"{target.processes} training process(es)" + (f", preset {preset}" if preset else "")
    typer.echo(f"{path}: ok for {target.where}: {launched}")
    for problem in findings(dataclasses.replace(run, target=this_machine())):
        typer.echo(f"note: on this machine, {problem}")


ImportFile = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A TRL, alignment-handbook or open-r1 "
                                                                            "YAML.")]
ImportFrom = Annotated[str | None, typer.Option("--from", help="trl, handbook or open-r1 (default: from the keys).")]
ImportOut = Annotated[Path | None, typer.Option("-o", "--output", help="Where to write the recipe (default: print it).")]
ImportStage = Annotated[str | None, typer.Option(help="sft, po or rl (default: from the keys).")]


@app.command("import")
def import_(file: ImportFile, from_: ImportFrom = None, out: ImportOut = None, stage: ImportStage = None) -> None:
    """Translate an upstream config into a smolalign recipe; prints where every key went."""
    _import(file, from_, out, stage)


def _import(file: Path, fmt: str | None, out: Path | None, stage: str | None) -> None:
    """Translate, then parse and resolve the recipe for this machine; a recipe that does not validate writes
    nothing. Upstream configs are written for a cluster: what this machine lacks is a note, not a refusal."""
    from smolalign.errors import SmolalignError
    from smolalign.preflight import findings
    from smolalign.recipe.importer import translate_file, write_import
    from smolalign.recipe.validate import parse_recipe
    from smolalign.resolve import resolve

    imported, mapping = translate_file(file, fmt, out, stage)
    try:
        run = resolve(parse_recipe(mapping, imported.stage, str(out or file)))
    except SmolalignError as exc:
        raise SmolalignError(f"{file}: the imported recipe does not validate: {exc}") from None
    imported.lines += [f"note     on this machine, {problem}" for problem in findings(run)]
    write_import(file, imported, out)


@app.command()
def cp(name: Annotated[str, typer.Argument(help="A shipped recipe, e.g. quickstart/sft.")],
       dest: Annotated[Path, typer.Argument(help="A file, or a folder to copy the recipe into.")]) -> None:
    """Copy a shipped recipe to edit, with its data files, so that it runs from DEST's folder."""
    from smolalign.recipe.copy_shipped import copy_shipped

    target, data = copy_shipped(name, dest)
    typer.echo(f"{target}" + "".join(f"\n  + {p}" for p in data))
