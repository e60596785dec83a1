"""The documentation site as a reader gets it: `mkdocs build --strict` passes (a broken link or anchor, a page missing
from the nav or a snippet that is not there fails it), the reference pages hold what the code declares, the search
index holds their text, and in headless Chromium the home page and a reference page show the navigation and load
that search index. The site is built once for this file."""

import dataclasses
import functools
import http.server
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from paths import REPO

NAV_TITLES = ("Getting started", "Recipes", "Verbs", "Rewards and the sandbox", "Scaling",
              "Run directories and checkpoints", "Troubleshooting", "Architecture", "Tests and claims", "Benchmarks",
              "Reference")
"""The top-level sections of mkdocs.yml's nav, as a reader sees them in the sidebar."""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def text_of(site: Path, page: str) -> str:
    """The visible text of a built page (tags dropped, entities decoded)."""
    import html

    raw = (site / page / "index.html").read_text()
    body = raw[raw.index('<article'):raw.index('</article>')]
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def test_every_page_is_built(site):
    sources = [p.relative_to(REPO / "docs") for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts]
    for source in sources:
        page = source.parent if source.name == "index.md" else source.with_suffix("")
        assert (site / page / "index.html").is_file(), source
    for page in ("reference/recipe", "reference/cli", "reference/rewards", "reference/recipes"):
        assert (site / page / "index.html").is_file(), page


def test_no_page_fetches_anything_from_the_network(site):
    """The site works offline (the README's promise; a headless browser would wait on a blocked font request)."""
    import re

    remote = {m for page in site.rglob("*.html")
              for m in re.findall(r'<(?:link|script)[^>]+(?:href|src)="(https?://[^"]+)"', page.read_text())}
    assert remote == set()


def test_the_recipe_keys_page_holds_every_field_with_its_docstring(site):
    from smolalign.recipe.data_schema import DataSection, SourceSection
    from smolalign.recipe.eval_schema import EvalSection
    from smolalign.recipe.generation_schema import GenerationSection
    from smolalign.recipe.schema import LaunchSection

    text = text_of(site, "reference/recipe")
    for prefix, cls in (("data", DataSection), ("data.sources[]", SourceSection), ("generation", GenerationSection),
                        ("launch", LaunchSection), ("eval", EvalSection)):
        for field in dataclasses.fields(cls):
            assert f"{prefix}.{field.name}" in text, f"{prefix}.{field.name}"
    assert "0.5 keeps a random half, 2.0 repeats it twice" in text  # SourceSection.weight's docstring
    assert "trl.GRPOConfig" in text and "learning_rate" in text  # the method table and the train: ranges


def test_the_cli_page_holds_every_command_and_option(site):
    text = text_of(site, "reference/cli")
    for command in ("smolalign sft", "smolalign po", "smolalign rl", "smolalign eval", "smolalign sweep",
                    "smolalign convert", "smolalign launch slurm", "smolalign recipes import", "smolalign rewards test",
                    "smolalign data preview", "smolalign template render", "smolalign chat", "smolalign plot"):
        assert command in text, command
    for option in ("--dry-run", "--num-processes", "--vllm-nodes", "--container-runtime", "--max-new-tokens",
                   "--show-trained", "--regenerate", "--grid"):
        assert option in text, option
    assert "Print the resolved recipe and the plan, check the data, load no weights." in text  # --dry-run's help


def test_the_rewards_page_holds_every_reward_and_parameter(site):
    from rewards.registry import REWARDS, reward_class

    text = text_of(site, "reference/rewards")
    for name in REWARDS:
        assert name in text, name
        for parameter in inspect.signature(reward_class(name).__init__).parameters:
            if parameter != "self":
                assert parameter in text, (name, parameter)
    assert "the width of the linear window before max_length" in text  # soft_overlong's cache


def test_the_shipped_recipes_page_lists_every_recipe(site):
    from smolalign.recipe.load import shipped_recipes

    text = text_of(site, "reference/recipes")
    for name in shipped_recipes():
        assert name in text, name
    assert "Quickstart SFT: the bundled SmolLM2-135M-Instruct learns /think and /no_think answers" in text


def test_the_search_index_holds_the_reference_pages(site):
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    reference = " ".join(d["text"] for d in docs if d["location"].startswith("reference/recipe/"))
    assert "generation.server.startup_timeout" in reference
    assert any(d["location"].startswith("troubleshooting/") for d in docs)


# --- In a browser ---------------------------------------------------------------------------------------------------

def chromium() -> str:
    found = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if found is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    return found


@pytest.fixture(scope="module")
def served(site):
    """(the base URL of site/ served over HTTP, the paths the browser asked for)."""
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            requested.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requested
    server.shutdown()
    server.server_close()


def rendered(url: str, profile: Path) -> str:
    """The DOM after the page's scripts ran (Chromium's own clock budget of 5 s)."""
    done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                           "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # nothing but the local site
                           f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("page", ["", "reference/cli/"])
def test_a_reader_sees_the_navigation_and_a_working_search(served, tmp_path, page):
    base, requested = served
    requested.clear()
    dom = rendered(f"{base}/{page}", tmp_path / "profile")
    nav = dom[dom.index('<nav class="md-nav md-nav--primary"'):]
    for title in NAV_TITLES:
        assert re.search(rf">\s*{re.escape(title)}\s*<", nav), title
    assert 'data-md-component="search-query"' in dom
    # The page's scripts started the search worker, which fetched the index: search is wired, not just drawn.
    assert "/search/search_index.json" in requested, requested
