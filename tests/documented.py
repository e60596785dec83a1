"""What the documentation shows, read from its Markdown (README.md and docs/**/*.md): its fenced code blocks, and the
commands in them that train on a shipped quickstart recipe, as argv lists for a dry run."""

import re
import shlex
from pathlib import Path

from paths import REPO

QUICKSTART_COMMAND = re.compile(r"smolalign (sft|po|rl|sweep) (recipes/)?quickstart/\w+(\.ya?ml)?(\s|$)")


def pages() -> list[Path]:
    """The README and every page of the site's sources."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def fenced_blocks(markdown: str) -> list[str]:
    blocks, current = [], None
    for line in markdown.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def quickstart_commands() -> dict[str, list[str]]:
    """`smolalign sft|po|rl|sweep RECIPE ...` lines on a shipped quickstart recipe, each with `--dry-run` (added when
    missing), by "page: the command as written" (a command shown twice is kept once). `po pairs` generates, so it is
    left out; a `recipes/quickstart/X.yaml` path is made absolute, so it runs from any directory."""
    found: dict[str, list[str]] = {}
    seen = set()
    for page in pages():
        for block in fenced_blocks(page.read_text()):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.strip().removeprefix("$ ")
                if not QUICKSTART_COMMAND.match(line):
                    continue
                argv = shlex.split(line, comments=True)[1:]
                shown = " ".join(["smolalign", *argv])
                if argv[1].startswith("recipes/"):
                    argv[1] = str(REPO / argv[1])
                if "--dry-run" not in argv:
                    argv.append("--dry-run")
                if tuple(argv) not in seen:
                    seen.add(tuple(argv))
                    found[f"{page.relative_to(REPO)}: {shown}"] = argv
    return found
