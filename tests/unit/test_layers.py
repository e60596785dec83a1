"""The layers of smolalign, bottom to top, and the rules between them, measured on every module's imports (an import
inside a function counts): no module imports one of a higher layer, and an import inside a function is of a heavy
package only (pyproject's banned-module-level-imports, which ruff keeps out of module level), or of a module that
imports one, so that `smolalign --help` loads no more than the command line. docs/architecture.md draws this table;
a test keeps the two the same. No import cycle: tests/unit/test_package_structure.py."""

import re
import tomllib

import pytest
from import_graph import ROOT, Import, all_imports, module_files

Part = tuple[str, str]
"""(a package or module, what it owns)."""

LAYERS: tuple[tuple[str, tuple[Part, ...]], ...] = (
    ("rewards", (
        ("rewards", "verifiable rewards and the sandbox, usable without smolalign"),)),
    ("foundation", (
        ("smolalign.__init__", "the version"),
        ("smolalign.errors", "the errors a user can fix (exit 2) and a run's failure"),
        ("smolalign.atomic", "files replaced whole or not at all"),
        ("smolalign.jsonl", "JSON-lines files, read row by row with the row named on a bad one"),
        ("smolalign.progress", "progress bars and rates"),
        ("smolalign.quantities", "sizes and counts written for people"),
        ("smolalign.assets", "where the shipped recipes and chat templates are"),
        ("smolalign.gpus", "the GPUs a plan can target and memory sizes written as text"),
        ("smolalign.hardware", "what this machine offers, and the dtype and precision that follow"),
        ("smolalign.ports", "TCP ports on this machine: free or in use"),
        ("smolalign.deepspeed_settings", "a DeepSpeed preset as accelerate and DeepSpeed take it"),
        ("smolalign.library_patch", "a library's attribute replaced while a block runs, and put back"),
        ("smolalign.rounding", "float32 to bfloat16 by stochastic rounding"),
        ("smolalign.hub_access", "whether the hub answers, asked once; hub sources read from the local caches when "
                                 "not"))),
    ("trainers", (
        ("smolalign.trainers", "TRL's trainers as smolalign runs them, and the prefill a prompt's answers share"),)),
    ("recipe", (
        ("smolalign.recipe", "recipe YAML parsed and type-checked: extends, --set, did-you-mean, the method table"),)),
    ("machine", (
        ("smolalign.target", "where a run will run: this machine, a Slurm job's nodes, the GPU image"),
        ("smolalign.gpu_partition", "which GPUs training and a vLLM server started beside it get"))),
    ("sources", (
        ("smolalign.checkpoints", "pretraining checkpoints (nanotron, DeepSpeed ZeRO, torch DCP) read and converted"),
        ("smolalign.templates", "chat templates: shipped, from a file or the tokenizer's, rendered"),
        ("smolalign.tools", "tools a policy calls while it generates: the python tool, a team's, checked"),
        ("smolalign.models", "model sources classified, loaded and saved"),
        ("smolalign.inputs", "what a run reads before it is resolved: one data source read and fingerprinted, "
                             "and where generated pairs are, keyed by what they depend on"))),
    ("resolve", (
        ("smolalign.resolve", "a parsed recipe and its machine turned once into a typed, frozen Run"),)),
    ("generation", (
        ("smolalign.generation", "vLLM engines and servers, and generation on a CPU"),)),
    ("data", (
        ("smolalign.data", "a run's data: mixtures, formats, masks, packing, the checks before loading"),)),
    ("checks", (
        ("smolalign.preflight", "what a run needs from its target, refused before anything loads"),
        ("smolalign.estimate", "memory per device and time per step"),
        ("smolalign.plan", "the plan a dry run prints"),
        ("smolalign.launch", "several processes from one command, and what a launched process was handed"))),
    ("pairs", (
        ("smolalign.pairs", "preference pairs generated: strong and weak, or graded"),)),
    ("evaluation", (
        ("smolalign.evaluation", "K answers per prompt in each think mode, scored, with intervals"),
        ("smolalign.chat", "one chat turn with a model, as it will be served"))),
    ("runs", (
        ("smolalign.runs", "run directories: what a run writes, its card, curves and push"),)),
    ("stages", (
        ("smolalign.stages", "one module per verb: check, load, train and save, on TRL's trainers"),)),
    ("orchestration", (
        ("smolalign.sweep", "a grid of runs of one recipe, compared"),
        ("smolalign.slurm", "a multi-node job on Slurm"))),
    ("cli", (
        ("smolalign.cli", "the `smolalign` command line"),
        ("smolalign.__main__", "`python -m smolalign`"),
        ("smolalign.accelerate_config", "`python -m smolalign.accelerate_config`, for a job's accelerate launch"))),
)
"""Bottom to top; a module imports from its own layer and the layers below it."""

FUNCTION_IMPORTS_ALLOWED = {
    "smolalign.cli": "each command imports what it runs inside its body: Typer builds `--help` from every command "
                     "module, and `smolalign --help` must not load the rest of smolalign",
}
"""Importers (a package or module) that may import modules other than heavy packages inside functions, and why."""

ARCHITECTURE_PAGE = ROOT / "docs" / "architecture.md"


def heavy_packages() -> set[str]:
    """The packages kept out of module level (ruff's TID253 list): loading any of them takes seconds or a GPU stack."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(settings["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-module-level-imports"])


def longest_prefix(module: str, prefixes) -> str | None:
    found = [p for p in prefixes if module == p or module.startswith(p + ".")]
    return max(found, key=len) if found else None


def layer_index() -> dict[str, int]:
    return {part: index for index, (_, parts) in enumerate(LAYERS) for part, _ in parts}


def layer_of(module: str) -> int | None:
    index = layer_index()
    part = longest_prefix("smolalign.__init__" if module == "smolalign" else module, index)
    return index[part] if part is not None else None


def upward(imports: list[Import]) -> list[str]:
    """Each import of a module in a higher layer than its importer's."""
    out = []
    for found in imports:
        if not found.internal:
            continue
        low, high = layer_of(found.importer), layer_of(found.imported)
        if low is not None and high is not None and high > low:
            out.append(f"{found.importer}:{found.line} ({LAYERS[low][0]}) imports {found.imported} "
                       f"({LAYERS[high][0]})")
    return out


def heavy_modules(imports: list[Import], heavy: set[str]) -> set[str]:
    """smolalign modules that load a heavy package when imported (a module-level import, or one of such a module)."""
    loads = {found.importer for found in imports if not found.in_function and not found.internal
             and found.imported in heavy}
    while True:
        more = {found.importer for found in imports if not found.in_function and found.imported in loads} - loads
        if not more:
            return loads
        loads |= more


def deferred(imports: list[Import], heavy: set[str]) -> list[str]:
    """Imports inside smolalign's functions of anything but a heavy package (or a module that loads one), outside
    FUNCTION_IMPORTS_ALLOWED."""
    loading = heavy_modules(imports, heavy)
    return [f"{found.importer}:{found.line} imports {found.imported} inside a function" for found in imports
            if found.in_function and found.importer.startswith("smolalign")
            and found.imported not in heavy and found.imported not in loading
            and longest_prefix(found.importer, FUNCTION_IMPORTS_ALLOWED) is None]


def table() -> list[str]:
    """docs/architecture.md's table rows, bottom to top."""
    rows = []
    for number, (layer, parts) in enumerate(LAYERS, start=1):
        for part, owns in parts:
            path = part.replace(".", "/") + ("/" if (ROOT / part.replace(".", "/")).is_dir() else ".py")
            rows.append(f"| {number} | {layer} | `{path}` | {owns} |")
    return rows


def test_every_module_is_in_a_layer():
    assert [module for module in module_files() if layer_of(module) is None] == []


def test_no_module_imports_a_higher_layer():
    assert upward(all_imports()) == []


def test_imports_inside_functions_are_of_heavy_packages_only():
    assert deferred(all_imports(), heavy_packages()) == []


def test_the_architecture_page_draws_the_table():
    page = ARCHITECTURE_PAGE.read_text()
    drawn = [line for line in page.splitlines() if re.match(r"\| \d+ \|", line)]
    assert drawn == table(), "\n" + "\n".join(table())


def test_the_checks_find_what_they_look_for(tmp_path):
    """On a package of three modules: an upward import inside a function, a deferred import of a light module, and
    a deferred import of a heavy package (allowed), as the checks above read them."""
    from import_graph import all_imports as read

    package = tmp_path / "smolalign"
    (package / "recipe").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "recipe" / "__init__.py").write_text("")
    (package / "recipe" / "schema.py").write_text("def f():\n    from smolalign.stages import rl\n    import torch\n")
    (package / "stages").mkdir()
    (package / "stages" / "__init__.py").write_text("")
    (package / "stages" / "rl.py").write_text("import json\n\ndef g():\n    import yaml\n")
    (tmp_path / "rewards").mkdir()
    (tmp_path / "rewards" / "__init__.py").write_text("")
    imports = read(tmp_path)
    assert upward(imports) == ["smolalign.recipe.schema:2 (recipe) imports smolalign.stages.rl (stages)"]
    assert deferred(imports, {"torch"}) == ["smolalign.recipe.schema:2 imports smolalign.stages.rl inside a function",
                                            "smolalign.stages.rl:4 imports yaml inside a function"]


@pytest.mark.parametrize("module", ["smolalign.trainers.preference"])
def test_a_module_that_loads_a_heavy_package_may_be_imported_inside_a_function(module):
    """It imports trl at module level (its classes subclass TRL's trainers): deferring it is deferring trl."""
    assert module in heavy_modules(all_imports(), heavy_packages())


def test_the_architecture_page_is_in_the_site_nav():
    assert "architecture.md" in (ROOT / "mkdocs.yml").read_text()

