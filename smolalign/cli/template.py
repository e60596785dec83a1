"""`smolalign template render`: see exactly what a chat template makes of a conversation."""

import json
from pathlib import Path
from typing import Annotated

import typer

from smolalign.errors import SmolalignError

app = typer.Typer(help="Render chat templates.", no_args_is_help=True)


@app.command()
def render(
    template: Annotated[str, typer.Argument(help="Shipped template name (smollm3, chatml) or a .jinja file.")],
    messages: Annotated[Path, typer.Option("--messages", "-m", help="JSON file: a list of {role, content} messages.")],
    kwargs: Annotated[str, typer.Option("--kwargs", help="JSON object of template kwargs, e.g. '{\"enable_thinking\": false}'.")] = "{}",
    generation_prompt: Annotated[bool, typer.Option("--generation-prompt", help="Append the assistant generation prompt.")] = False,
    show_trained: Annotated[bool, typer.Option("--show-trained", help="Wrap the trained ({% generation %}) spans in ⟦ ⟧.")] = False,
) -> None:
    """Print the rendered conversation."""
    from smolalign.templates.registry import refuse_unread_kwargs, resolve_template
    from smolalign.templates.render import render as render_text

    chat = _read_json(messages, "--messages")
    if isinstance(chat, dict) and "messages" in chat:
        chat = chat["messages"]
    from smolalign.data.rows import check_messages

    check_messages(chat, f"--messages {messages}")
    try:
        extra = json.loads(kwargs)
    except json.JSONDecodeError as exc:
        raise SmolalignError(f"--kwargs: invalid JSON ({exc.msg})") from None
    if not isinstance(extra, dict):
        raise SmolalignError("--kwargs must be a JSON object")
    chosen = resolve_template(template)
    refuse_unread_kwargs(chosen, extra, "--kwargs")
    text, spans = render_text(chosen, chat, add_generation_prompt=generation_prompt, **extra)
    if show_trained:
        for start, end in reversed(spans):
            text = text[:start] + "⟦" + text[start:end] + "⟧" + text[end:]
    typer.echo(text, nl=False)


def _read_json(path: Path, option: str):
    if not path.is_file():
        raise SmolalignError(f"{option} {path}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    try:
        return json.loads(path.read_text())
    except UnicodeDecodeError:
        raise SmolalignError(f"{option} {path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise SmolalignError(f"{option} {path}: invalid JSON at line {exc.lineno} ({exc.msg})") from None
