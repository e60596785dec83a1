"""`smolalign data preview`: the training rows exactly as the trainer will see them."""

import sys
from typing import Annotated

import typer

from smolalign.cli.options import RecipeArg, SetOption

app = typer.Typer(help="Inspect prepared training data.", no_args_is_help=True)


@app.command()
def preview(
    recipe: RecipeArg,
    n: Annotated[int, typer.Option("-n", help="How many training rows to show.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per row: input_ids, tokens, trained, position_ids.")] = False,
    set_: SetOption = None,
) -> None:
    """Templated, masked and packed rows: per token its id, text, whether it is trained, and its position id."""
    from smolalign.data.prepare import Layout, prepare_sft_data
    from smolalign.data.preview import collated_rows, print_json, print_readable
    from smolalign.models.load import load_tokenizer
    from smolalign.recipe.validate import load_recipe

    loaded = load_recipe(recipe, set_ or [], "sft")
    tokenizer, template = load_tokenizer(loaded.model, loaded.template.name)
    data = prepare_sft_data(loaded, tokenizer, template)
    rows = collated_rows(data.train, tokenizer, Layout.from_recipe(loaded).packing, n)
    if as_json:
        print_json(rows)
    else:
        print_readable(rows, color=sys.stdout.isatty())
