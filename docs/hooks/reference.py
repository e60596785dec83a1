"""MkDocs hook (mkdocs.yml `hooks:`): adds the reference pages, written from the code when the site is built, so they
cannot drift from it: recipe keys (the schema), the CLI (the Typer app), rewards (the registry) and the shipped
recipes. Build: `make docs`."""

import sys
from pathlib import Path

HOOKS = Path(__file__).resolve().parent
# The tree being documented, ahead of any installed copy of smolalign; and this folder, for the page modules.
sys.path[:0] = [str(HOOKS.parents[1]), str(HOOKS)]

import cli_commands  # noqa: E402
import recipe_keys  # noqa: E402
import reward_params  # noqa: E402
import shipped_recipes  # noqa: E402

PAGES = {
    "reference/recipe.md": recipe_keys.page,
    "reference/cli.md": cli_commands.page,
    "reference/rewards.md": reward_params.page,
    "reference/recipes.md": shipped_recipes.page,
}
"""Site path -> the function that writes the page."""


def on_files(files, config):
    from mkdocs.structure.files import File

    for path, write in PAGES.items():
        files.append(File.generated(config, path, content=write()))
    return files
