"""The `smolalign` command line. Only typer, yaml and smolalign's light modules are imported here: torch,
transformers and trl load inside the commands that need them, so `smolalign --help` answers at once."""

import gc
import logging
import sys

import typer
from typer._click import exceptions as click

from smolalign.errors import USER_ERRORS, RunFailure
from smolalign.runs.save_on_signal import SAVED_ON_SIGNAL_EXIT, SavedOnSignal

app = typer.Typer(
    name="smolalign",
    help="Post-training for hybrid-reasoning assistants: SFT, preference optimization and on-policy RL from one recipe.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    from smolalign.cli import chat, convert, data, evaluate, launch, plot, recipes, rewards, sweep, template, train

    train.register(app)
    sweep.register(app)
    app.add_typer(launch.app, name="launch", rich_help_panel="Train")
    evaluate.register(app)
    app.add_typer(recipes.app, name="recipes", rich_help_panel="Recipes")
    app.add_typer(template.app, name="template", rich_help_panel="Inspect")
    app.add_typer(data.app, name="data", rich_help_panel="Inspect")
    app.add_typer(rewards.app, name="rewards", rich_help_panel="Inspect")
    chat.register(app)
    plot.register(app)
    convert.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point. Exit codes: 0 success, 2 bad input (recipe, data, arguments: one message, no traceback),
    75 saved a checkpoint and stopped on SIGUSR1 (run again with --resume), 1 anything else (with its traceback)."""
    # bitsandbytes warns at import, on CPUs with AVX512-BF16, that an optional kernels package is missing.
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    argv = list(argv) if argv is not None else sys.argv[1:]
    # typer (0.29) carries its own copy of click; its usage errors are these classes, not click's.

    try:
        code = app(args=argv, standalone_mode=False, obj=argv)  # the commands read it: cli.options.command_line
    except click.NoArgsIsHelpError as exc:
        exc.show()  # the command's help, as `smolalign sft` alone asks for
        sys.exit(exc.exit_code)
    except click.UsageError as exc:  # a missing argument, an unknown option, a value of the wrong type
        command = exc.ctx.command_path if exc.ctx is not None else "smolalign"
        message = " ".join(exc.format_message().split())
        typer.secho(f"error: {message} (see {command} --help)", fg="red", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.secho("Aborted.", err=True)
        sys.exit(1)
    except USER_ERRORS as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except RunFailure as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(1)
    except SavedOnSignal as exc:
        typer.secho(f"smolalign: {exc}", err=True)
        sys.exit(SAVED_ON_SIGNAL_EXIT)
    if isinstance(code, int) and code:
        sys.exit(code)


def run() -> None:
    """The `smolalign` program (its console script, `python -m smolalign`): `main`, then what is garbage collected
    and the rest frozen, so the interpreter's last collection has nothing to walk. As it exits, Python clears every
    module and collects the cycles that leaves, walking all of torch's, transformers' and vLLM's objects: 2.2 s after
    a training command on 2 cores, 0.9 s collected and frozen here (benchmarks/cli_exit.py). The collection comes
    first because objects already dropped must still be destroyed in order: a launched rank's closed process group,
    left to the end of the process with its threads, aborted it ("terminate called without an active exception").
    Nothing smolalign writes waits for the last collection (Python does not promise it anyway): files are closed,
    temporary folders and child processes ended by context managers and atexit. `main` called in a process that goes
    on (the tests) is left as it is."""
    try:
        main()
    finally:
        gc.collect()
        gc.freeze()
