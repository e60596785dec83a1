"""`smolalign recipes list | show | validate`."""

import typer

from smolalign.cli.options import RecipeArg, SetOption

app = typer.Typer(help="List, show and validate recipes.", no_args_is_help=True)


def _first_comment(path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
        if line.strip():
            break
    return ""


@app.command("list")
def list_() -> None:
    """Shipped recipes, with the first line of each one's header comment."""
    from smolalign.recipe.load import shipped_recipes

    shipped = shipped_recipes()
    width = max((len(n) for n in shipped), default=0)
    for name, path in shipped.items():
        typer.echo(f"{name.ljust(width)}  {_first_comment(path)}")


@app.command()
def show(recipe: RecipeArg, set_: SetOption = None) -> None:
    """The recipe after `extends:` and overrides are applied (not yet validated)."""
    from smolalign.recipe.load import apply_overrides, read_recipe
    from smolalign.recipe.yamlio import dump_yaml

    typer.echo(dump_yaml(apply_overrides(read_recipe(recipe), set_ or [])), nl=False)


@app.command()
def validate(recipe: RecipeArg, set_: SetOption = None,
             stage: str = typer.Option(None, help="sft, po or rl (default: the recipe's `stage:`, else sft).")) -> None:
    """Check every section (unknown keys, types, TRL fields) without touching data or weights."""
    from smolalign.recipe.load import apply_overrides, read_recipe, recipe_path
    from smolalign.recipe.validate import validate_recipe

    path = recipe_path(recipe)
    raw = apply_overrides(read_recipe(path), set_ or [])
    validate_recipe(raw, stage or raw.get("stage") or "sft", str(path))
    typer.echo(f"{path}: ok")
