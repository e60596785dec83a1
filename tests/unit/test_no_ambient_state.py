"""What a command needs reaches the code as arguments, not as ambient state: the command line, the machine a recipe
is checked for, the config check's mode and the vLLM server's GPUs are values passed along; running a command leaves
every smolalign module's globals, this process's environment and accelerate's process state as they were."""

import ast
import os
import sys

import pytest
from tiny_models import chat_rows, write_jsonl


@pytest.fixture
def sft_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    return str(write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                             "train": {"max_length": 128, "max_steps": 1}}))


def _module_globals() -> dict[str, dict[str, int]]:
    """Every loaded smolalign module's globals, by identity."""
    return {name: {key: id(value) for key, value in vars(module).items()}
            for name, module in list(sys.modules.items()) if name.split(".")[0] == "smolalign" and module is not None}


def test_the_command_line_reaches_the_relaunch_as_a_value_and_no_module_keeps_it(cli, sft_recipe, tmp_path,
                                                                                 monkeypatch):
    """Two commands in one process each relaunch with their own arguments, and neither leaves a trace in any module
    (a module-level copy of the arguments, set by `main`, would)."""
    import smolalign.launch

    relaunched = []
    monkeypatch.setattr(smolalign.launch, "relaunch", lambda run, preset, n, argv: relaunched.append(argv) or 0)
    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "SMOLALIGN_LAUNCHED"):
        monkeypatch.delenv(name, raising=False)
    first = ["sft", sft_recipe, "-o", str(tmp_path / "a"), "--launch", "ddp", "--num-processes", "2"]
    assert cli(*first)[0] == 0
    before = _module_globals()
    second = ["sft", sft_recipe, "--set", "train.max_steps=2", "--launch", "ddp"]
    assert cli(*second)[0] == 0
    assert relaunched == [first, second]
    after = _module_globals()
    changed = {module: sorted(k for k in names if after[module].get(k) != names[k] or k not in after[module])
               for module, names in before.items()}
    added = {module: sorted(set(after[module]) - set(names)) for module, names in before.items()}
    assert {m: c for m, c in changed.items() if c} == {} and {m: a for m, a in added.items() if a} == {}


@pytest.fixture
def launcher_variables(monkeypatch):
    """A launcher's variables for a one-process group on this machine (what torchrun sets), and accelerate's state
    empty for the test: a check that set up a process state would set up a real one here."""
    from accelerate.state import AcceleratorState, PartialState

    from smolalign.ports import free_port

    monkeypatch.setattr(PartialState, "_shared_state", {})
    monkeypatch.setattr(AcceleratorState, "_shared_state", {})
    monkeypatch.delenv("SMOLALIGN_LAUNCHED", raising=False)
    for name, value in {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(name, value)
    yield
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def test_the_config_check_sets_up_no_process_state(launcher_variables, sft_recipe, monkeypatch):
    """TRL's own checks run (a value transformers refuses is exit 2 naming the key), and afterwards accelerate has no
    state and torch no process group, without resetting anything: the run's own set-up starts from nothing. The
    environment is not touched either (the launcher's variables are not hidden, they are not read)."""
    import torch.distributed as dist
    from accelerate.state import PartialState
    from recipe_runs import loaded_run

    from smolalign.errors import SmolalignError
    from smolalign.stages.sft import sft_config
    from smolalign.stages.trainer_config import check_config

    resets = []
    monkeypatch.setattr(PartialState, "_reset_state", lambda *args, **kwargs: resets.append(args))
    recipe = loaded_run(sft_recipe, [], "sft")
    environment = dict(os.environ)
    check_config(recipe, sft_config)
    assert PartialState._shared_state == {} and not dist.is_initialized() and resets == []
    assert dict(os.environ) == environment
    bad = loaded_run(sft_recipe, ["train.load_best_model_at_end=true", "train.eval_strategy=steps",
                                   "train.save_strategy=epoch"], "sft")
    with pytest.raises(SmolalignError, match=r"^train\.(load_best_model_at_end|eval_strategy|save_strategy)"):
        check_config(bad, sft_config)
    assert PartialState._shared_state == {} and not dist.is_initialized() and resets == []


ENVIRONMENT_EDITS = {
    ("smolalign/generation/vllm_engine.py", "_in_process"): "vLLM reads VLLM_ENABLE_V1_MULTIPROCESSING from "
                                                              "os.environ only; set for one engine build, put back",
    ("smolalign/launch.py", "kept_process_variables"): "puts back what TRL's colocated vLLM wrote into the process",
    ("smolalign/recipe/method_table.py", "quiet_experimental"): "TRL reads TRL_EXPERIMENTAL_SILENCE at import, from "
                                                                "os.environ only",
    ("smolalign/trainers/preference.py", ""): "the same, for the experimental trainers this module imports",
    ("smolalign/__main__.py", "forget_safe_path"): "a launched process drops the safe-path setting it was started "
                                                   "with, so what it starts does not inherit it",
}
"""The only places smolalign's own process environment is written, and why."""


def _enclosing_functions(tree):
    """Each node of `tree` with the name of the function it is in ("" at module level)."""
    stack = [(tree, "")]
    while stack:
        node, function = stack.pop()
        yield node, function
        inside = node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else function
        stack.extend((child, inside) for child in ast.iter_child_nodes(node))


def _writes_environment(node) -> bool:
    def is_environ(value):
        return isinstance(value, ast.Attribute) and value.attr == "environ"

    if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        return any(isinstance(t, ast.Subscript) and is_environ(t.value) for t in targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        writes = ("update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__")
        return (is_environ(node.func.value) and node.func.attr in writes) or node.func.attr in ("putenv", "unsetenv")
    return False


def test_no_ambient_state_in_the_source():
    """No context variable, no smolalign module's global set from elsewhere or through `global`, no private
    accelerate state, and the process environment written only where a library reads a setting from it alone."""
    from paths import REPO

    found, edits = [], set()
    paths = sorted((REPO / "smolalign").rglob("*.py"))
    ours = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__") for p in paths}
    for path in paths:
        name = str(path.relative_to(REPO))
        tree = ast.parse(path.read_text())
        modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for alias in node.names if alias.name in ours}
        modules |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names if f"{node.module}.{alias.name}" in ours}
        for node, function in _enclosing_functions(tree):
            if isinstance(node, ast.Name | ast.Attribute) and (getattr(node, "id", None) or node.attr) in (
                    "ContextVar", "_reset_state", "_shared_state"):
                found.append(f"{name}: {getattr(node, 'id', None) or node.attr}")
            if isinstance(node, ast.Global):
                found.append(f"{name}: global {', '.join(node.names)}")
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in modules
                    for t in node.targets):
                found.append(f"{name}: sets another module's global in {function or 'the module'}")
            if _writes_environment(node):
                edits.add((name, function))
    assert found == []
    assert edits == set(ENVIRONMENT_EDITS)
