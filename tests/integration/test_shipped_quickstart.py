"""What `make quickstart` starts from, in the default tier: the bundled SmolLM2 loads (from the package the README's
set-up installs: this test fails when that step is dropped) and answers, and every shipped quickstart recipe passes
its dry run from a directory outside the repository, the earlier stages' outputs standing in as the bundled model; so
does every command the README and the documentation show on a quickstart recipe."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from documented import quickstart_commands
from paths import REPO

QUICKSTART = sorted(p.stem for p in (REPO / "recipes" / "quickstart").glob("*.yaml"))
VERBS = {"sft": "sft", "po": "po", "po_graded": "po", "reward": "po", "rl": "rl", "rl_code": "rl", "online_dpo": "rl",
         "distill": "rl", "gold": "rl", "rl_reasoning_gym": "rl", "tools_sft": "sft", "tools_rl": "rl"}


@pytest.fixture(scope="module")
def bundled() -> Path:
    """The bundled model as the run loads it (converted once from its GGUF file into the session's cache)."""
    from smolalign.models.load import local_dir
    from smolalign.models.sources import resolve_source

    source = resolve_source("smollm2-135m-instruct")
    assert source.kind == "gguf" and source.location.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    directory = Path(local_dir(source))
    assert (directory / "config.json").is_file(), directory
    return directory


@pytest.fixture(scope="module")
def workdir(bundled, tmp_path_factory) -> Path:
    """A directory outside the repository holding what the later quickstart stages read: the earlier stages' models
    (the bundled model in their place: a dry run reads only its config and tokenizer) and GOLD's student."""
    folder = tmp_path_factory.mktemp("user")
    for stage in ("sft", "po", "rl", "tools_sft"):
        (folder / "runs" / "quickstart" / stage).mkdir(parents=True)
        (folder / "runs" / "quickstart" / stage / "model").symlink_to(bundled)
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "make_quickstart_student.py"), "--out",
                           str(folder / "runs" / "quickstart" / "student-init")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


def test_the_bundled_model_loads_and_answers(cli, bundled):
    from safetensors import safe_open

    with safe_open(str(bundled / "model.safetensors"), "pt") as weights:
        parameters = sum(_count(weights.get_slice(name).get_shape()) for name in weights.keys())
    assert 134_000_000 < parameters < 135_000_000  # SmolLM2-135M, tied embeddings
    config = json.loads((bundled / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (30, 576, 49152)
    code, out, err = cli("chat", "smollm2-135m-instruct", "--message", "Which is larger, 38 or 83?", "--no-think",
                         "--max-new-tokens", "12")
    assert code == 0, err
    assert out.strip(), "the bundled model answered nothing"


def _count(shape) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


@pytest.mark.parametrize("name", QUICKSTART)
def test_every_shipped_quickstart_recipe_passes_its_dry_run(cli, workdir, monkeypatch, name):
    monkeypatch.chdir(workdir)
    before = sorted(str(p) for p in workdir.rglob("*"))
    if name == "po_sweep":
        code, out, err = cli("sweep", f"quickstart/{name}", "--grid", "method=apo_zero,dpo", "--dry-run")
    else:
        code, out, err = cli(VERBS[name], f"quickstart/{name}", "--dry-run")
    assert code == 0, err[-3000:]
    assert sorted(str(p) for p in workdir.rglob("*")) == before  # a dry run writes nothing


DOCUMENTED = quickstart_commands()
RUN_ABOVE = {(VERBS[name], f"quickstart/{name}", "--dry-run") for name in VERBS}
"""The plain dry runs the test above runs already: a documented command that is one of them is not run twice."""


@pytest.mark.parametrize("where", [pytest.param(w, id=w) for w, argv in DOCUMENTED.items()
                                   if tuple(argv) not in RUN_ABOVE])
def test_every_documented_command_on_a_quickstart_recipe_passes_its_dry_run(cli, workdir, monkeypatch, where):
    monkeypatch.chdir(workdir)
    code, out, err = cli(*DOCUMENTED[where])
    assert code == 0, err[-3000:]
    assert "data check" in out  # the plan was printed: the recipe, its data and its models passed


def test_the_documentation_shows_every_train_verb_on_a_quickstart_recipe():
    assert {argv[0] for argv in DOCUMENTED.values()} == {"sft", "po", "rl", "sweep"}


def test_every_quickstart_recipe_is_covered():
    assert set(QUICKSTART) == {*VERBS, "po_sweep"}
