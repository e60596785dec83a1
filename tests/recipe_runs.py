"""A recipe mapping taken as the CLI takes a recipe file: parsed, resolved into a `Run` for a machine (this one unless
a test names another) and checked for its target, the way `smolalign sft RECIPE` starts."""

from smolalign.hardware import Hardware
from smolalign.preflight import preflight
from smolalign.recipe.validate import load_recipe, parse_recipe
from smolalign.resolve import Run, resolve
from smolalign.target import Target


def run_of(raw: dict, stage: str, source: str = "test", *, hardware: Hardware | None = None,
           target: Target | None = None, check: bool = True) -> Run:
    """`raw` parsed for `stage`, resolved, and (`check`) refused where the target cannot run it."""
    run = resolve(parse_recipe(raw, stage, source), hardware, target)
    if check:
        preflight(run)
    return run


def loaded_run(name_or_path: str, overrides: list[str], stage: str, *, hardware: Hardware | None = None,
               target: Target | None = None) -> Run:
    """A recipe file (or shipped name) as `run_of` takes a mapping."""
    run = resolve(load_recipe(name_or_path, overrides, stage), hardware, target)
    preflight(run)
    return run


def command_run(argv: list[str]) -> Run:
    """The run a train command line (`[STAGE, RECIPE, --set KEY=VALUE, ...]`) resolves before it decides whether to
    launch, on one CPU process (the GPUs a test stands in for are counted apart), unchecked."""
    overrides = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("--set", "-s")]
    return resolve(load_recipe(argv[1], overrides, argv[0]), Hardware("cpu", 0, "a test CPU", False, 1, 1))
