"""The CLI reference page, written at build time by walking the Typer app's command tree (smolalign/cli/): every
command with its usage, help and options, as `smolalign COMMAND --help` shows them. Build: `make docs`."""

import dataclasses
import inspect

from markdown_text import cell, table


@dataclasses.dataclass(frozen=True)
class Command:
    path: str
    """`smolalign launch slurm`."""
    usage: str
    help: str
    params: list[tuple[str, str]]
    """(option or argument as --help writes it, its help with default) of every visible parameter."""
    missing_help: list[str]
    """Parameters (hidden ones included) that have no help text."""


def commands() -> list[Command]:
    """Every command of `smolalign`, groups and their subcommands depth first, in --help's order."""
    import typer.main
    from typer import _click  # typer 0.29 carries its own click; its Context is what its commands expect

    from smolalign.cli import app

    root = typer.main.get_command(app)
    out = []

    def visit(command, context) -> None:
        params, missing = [], []
        for param in command.params:
            if not getattr(param, "help", None):
                missing.append(param.name)
            record = param.get_help_record(context)
            if record is not None and not getattr(param, "hidden", False):
                params.append(record)
        usage = command.get_usage(context).removeprefix("Usage: ")
        out.append(Command(context.command_path, usage, inspect.cleandoc(command.help or ""), params, missing))
        for name in command.list_commands(context) if hasattr(command, "commands") else ():
            sub = command.commands[name]
            if not sub.hidden:
                visit(sub, _click.Context(sub, info_name=name, parent=context))

    visit(root, _click.Context(root, info_name="smolalign"))
    return out


def missing_help() -> list[str]:
    """Commands without a docstring and parameters without help, as `command: parameter`."""
    found = []
    for command in commands():
        if not command.help:
            found.append(f"{command.path}: (the command's docstring)")
        found += [f"{command.path}: {name}" for name in command.missing_help]
    return found


def page() -> str:
    lines = ["# CLI reference", "",
             "Generated from the Typer app (`smolalign/cli/`) when the site is built: what `smolalign COMMAND --help` "
             "prints. Exit codes: 0 success, 2 bad input (one `error:` line, see "
             "[Troubleshooting](../troubleshooting.md)), 1 anything else, 75 a checkpoint saved on SIGUSR1.", ""]
    for command in commands():
        depth = command.path.count(" ")
        lines += [f"{'#' * min(depth + 1, 4)} `{command.path}`" if depth else "## `smolalign`", "",
                  f"```\n{command.usage}\n```", "", cell(command.help), ""]
        if command.params:
            lines += [table(["option", "help"], [[f"`{opts}`", text] for opts, text in command.params]), ""]
    return "\n".join(lines)
