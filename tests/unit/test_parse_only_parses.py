"""Parse only parses; resolve builds: reading a recipe into a `Recipe` imports neither TRL nor peft and builds no
reward, and a run builds each reward its recipe names exactly once (`Run.rewards`), however many steps use it (the
stage's checks, the plan, the preflight, the pairs' verifier, the `eval:` section)."""

import subprocess
import sys

import pytest
from tiny_models import write_jsonl

PARSE_ONLY = """
import sys
import rewards.registry

def refuse(*args, **kwargs):
    raise AssertionError("a reward was built while parsing")

rewards.registry.resolve_reward = refuse
from smolalign.recipe.validate import load_recipe

for name, stage in (("quickstart/sft", "sft"), ("quickstart/po", "po"), ("quickstart/po_graded", "po"),
                    ("quickstart/rl", "rl"), ("quickstart/distill", "rl")):
    load_recipe(name, ["peft.r=8", "train.learning_rate=0.0001"], stage)
print(sorted(name for name in ("trl", "peft", "torch", "transformers", "vllm") if name in sys.modules))
"""


def test_parsing_a_recipe_imports_no_trainer_library_and_builds_no_reward():
    """A fresh interpreter (this one has TRL loaded already) parses every kind of shipped recipe, with a `peft:`
    section and a `train:` key, while building a reward raises."""
    done = subprocess.run([sys.executable, "-c", PARSE_ONLY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_what_parsing_no_longer_checks_is_refused_when_the_recipe_is_resolved(cli, write_recipe, tiny_dir,
                                                                              tmp_path):
    """The checks that moved from parse to resolve still refuse before anything loads, named by their key."""
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "1 plus 2", "solution": "3"}] * 4)
    base = {"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
            "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
            "train": {"max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2}}
    cases = [({"train": {**base["train"], "learning_rat": 0.1}}, "train.learning_rat"),
             ({"peft": {"rr": 8}}, "peft.rr"),
             ({"rewards": [{"name": "math_acuracy"}]}, "rewards.0: unknown reward 'math_acuracy'"),
             ({"eval": {"data": [{"path": str(data)}], "rewards": [{"name": "nope"}]}}, "eval.rewards.0")]
    for change, named in cases:
        code, _, err = cli("rl", str(write_recipe({**base, **change})), "--dry-run")
        assert code == 2 and named in err, (change, err)


@pytest.fixture
def built(monkeypatch):
    """Every reward built, by name: the registry's function counted under every name a loaded module bound it to."""
    import rewards.registry

    original, names = rewards.registry.resolve_reward, []

    def counted(name, params=None):
        names.append(name)
        return original(name, params)

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("smolalign", "rewards") and getattr(module, "resolve_reward", None) is original:
            monkeypatch.setattr(module, "resolve_reward", counted)
    return names


def test_a_dry_run_builds_each_reward_of_its_recipe_once(cli, write_recipe, tiny_dir, tmp_path, built):
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"{i} plus 2", "solution": str(i + 2)}
                                                    for i in range(4)])
    recipe = write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "data": {"sources": [{"path": str(data)}]},
        "rewards": [{"name": "math_accuracy"}, {"name": "answer_format"}],
        "eval": {"data": [{"path": str(data)}], "rewards": [{"name": "math_accuracy"}], "samples": 1},
        "train": {"max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2}})
    code, _, err = cli("rl", str(recipe), "--dry-run")
    assert code == 0, err
    assert sorted(built) == ["answer_format", "math_accuracy", "math_accuracy"]


def test_a_verified_pairs_dry_run_builds_its_verifier_once(cli, write_recipe, tiny_dir, tmp_path, built):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"{i} plus 2", "solution": str(i + 2)}
                                                       for i in range(4)])
    side = {"source": str(tiny_dir), "max_new_tokens": 8}
    recipe = write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "apo_zero",
        "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "pairs.jsonl"), "strong": side,
                  "weak": side, "verifier": {"rewards": [{"name": "math_accuracy"}]}},
        "train": {"max_steps": 1, "per_device_train_batch_size": 2, "max_length": 64}})
    code, out, err = cli("po", str(recipe), "--dry-run")
    assert code == 0, err
    assert "verifier" in out and built == ["math_accuracy"]
