"""`smolalign chat`: one reply from a model, through its own chat template (to check a trained model by hand)."""

from typing import Annotated

import typer


def chat(
    model: Annotated[str, typer.Argument(help="Model directory (e.g. runs/quickstart/sft/model), .gguf file or bundled name.")],
    message: Annotated[str, typer.Option("--message", "-m", help="The user message.")],
    think: Annotated[bool, typer.Option("--think/--no-think", help="Reasoning mode (hybrid templates).")] = True,
    max_new_tokens: Annotated[int, typer.Option(help="Generation budget.")] = 128,
) -> None:
    """Print the model's reply to one message (greedy decoding)."""
    from smolalign.chat import reply

    typer.echo(reply(model, message, think=think, max_new_tokens=max_new_tokens))


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Inspect")(chat)
