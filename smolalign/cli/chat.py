"""`smolalign chat`: one reply from each model given, through its own chat template (to check trained models by
hand, side by side)."""

from typing import Annotated

import typer


def chat(
    models: Annotated[list[str], typer.Argument(
        help="Model directories (e.g. runs/quickstart/sft/model), .gguf files or bundled names: each answers.")],
    message: Annotated[str, typer.Option("--message", "-m", help="The user message.")],
    think: Annotated[bool | None, typer.Option("--think/--no-think", help="Reasoning mode of a hybrid template "
                                                                       "(default: the template's own).")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Generation budget.")] = 128,
) -> None:
    """Print each model's reply to one message (greedy decoding); with several models, each reply after its
    model's name, models loaded one at a time in one process."""
    from smolalign.chat import reply

    for model in models:
        answer = reply(model, message, think=think, max_new_tokens=max_new_tokens)
        typer.echo(answer if len(models) == 1 else f"{model}: {answer}")


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Inspect")(chat)
