"""`smolalign data preview`: the training rows exactly as the trainer will see them."""

import contextlib
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
    from smolalign.data.preview import collated_rows, print_json, print_preference_readable, print_readable
    from smolalign.models.load import load_tokenizer
    from smolalign.preflight import preflight
    from smolalign.recipe.validate import recipe_stage
    from smolalign.resolve import load_run

    if n < 1:
        raise SmolalignError(f"-n {n}: show at least 1 row")
    stage = recipe_stage(recipe, set_ or [])
    if stage == "rl":  # its rows are prompts, rendered with the generation prompt: the dry run checks them
        raise SmolalignError(f"data preview shows the rows sft and po recipes train on; {recipe} is an rl recipe, "
                             f"whose prompts `smolalign rl {recipe} --dry-run` renders and checks")
    # With --json, standard output holds the rows alone: what loading says (a checkpoint converted once) goes to
    # standard error.
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        run = load_run(recipe, set_ or [], stage)
        preflight(run)
        tokenizer, template = load_tokenizer(run.recipe.model, run.recipe.template.name, run.source())
        if run.method_spec.preference:
            rows = _preference_rows(run, tokenizer, template, n)
        else:
            data = prepare_sft_data(run, tokenizer, template)
            rows = collated_rows(data.train, tokenizer, Layout.from_settings(run.settings).packing, n)
    if as_json:
        print_json(rows)
    elif run.method_spec.preference:
        print_preference_readable(rows, color=sys.stdout.isatty())
    else:
        print_readable(rows, color=sys.stdout.isatty())


def _preference_rows(run, tokenizer, template, n: int) -> list:
    from smolalign.data.prepare_preference import prepare_preference_data
    from smolalign.data.preview import preference_rows
    from smolalign.pairs.output import is_up_to_date

    recipe = run.recipe
    if recipe.pairs is not None and not is_up_to_date(recipe):
        raise SmolalignError(f"the pairs of {recipe.source} are not generated yet: run smolalign po pairs "
                             f"{recipe.source} first")
    return preference_rows(prepare_preference_data(run, tokenizer, template).train, tokenizer, n)
