"""`smolalign data preview`: the training rows exactly as the trainer will see them."""

import sys
from typing import Annotated

import typer

from smolalign.cli.options import RecipeArg, SetOption
from smolalign.errors import SmolalignError

app = typer.Typer(help="Inspect prepared training data.", no_args_is_help=True)


@app.command()
def preview(
    recipe: RecipeArg,
    n: Annotated[int, typer.Option("-n", help="How many training rows to show.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per row: input_ids, tokens, trained, position_ids.")] = False,
    set_: SetOption = None,
) -> None:
    """Templated, masked and packed rows: per token its id, text, whether it is trained, and its position id.
    For a po recipe: each prompt with its chosen and rejected answers (or KTO's completion and label)."""
    from smolalign.data.prepare import Layout, prepare_sft_data
    from smolalign.data.preview import collated_rows, print_json, print_readable
    from smolalign.models.load import load_tokenizer
    from smolalign.recipe.method_table import method_spec
    from smolalign.recipe.validate import load_recipe, recipe_stage

    if n < 1:
        raise SmolalignError(f"-n {n}: show at least 1 row")
    stage = recipe_stage(recipe, set_ or [])
    loaded = load_recipe(recipe, set_ or [], stage)
    tokenizer, template = load_tokenizer(loaded.model, loaded.template.name)
    if method_spec(stage, loaded.method).preference:
        _preview_preference(loaded, tokenizer, template, n, as_json)
        return
    data = prepare_sft_data(loaded, tokenizer, template)
    rows = collated_rows(data.train, tokenizer, Layout.from_recipe(loaded).packing, n)
    if as_json:
        print_json(rows)
    else:
        print_readable(rows, color=sys.stdout.isatty())


def _preview_preference(recipe, tokenizer, template, n: int, as_json: bool) -> None:
    from smolalign.data.prepare_preference import prepare_preference_data
    from smolalign.data.preview import preference_rows, print_json, print_preference_readable
    from smolalign.pairs.output import is_up_to_date

    if recipe.pairs is not None and not is_up_to_date(recipe):
        raise SmolalignError(f"the pairs of {recipe.source} are not generated yet: run smolalign po pairs "
                             f"{recipe.source} first")
    rows = preference_rows(prepare_preference_data(recipe, tokenizer, template).train, tokenizer, n)
    if as_json:
        print_json(rows)
    else:
        print_preference_readable(rows, color=sys.stdout.isatty())
