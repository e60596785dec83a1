"""A dry run of a preference stage that would generate its pairs checks the models that would generate them, and
`po pairs --dry-run` generates nothing: a plan that promised pairs from a missing folder passed before the GPU bill
and failed after it."""

import pytest
from tiny_models import write_jsonl


@pytest.fixture
def recipe(write_recipe, tiny_dir, tmp_path):
    def make(weak_source: str) -> str:
        data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(4)])
        generator = {"max_new_tokens": 8, "batch_size": 4}
        pairs = {"prompts": [{"path": str(data)}], "output": str(tmp_path / "out" / "pairs.jsonl"),
                 "strong": {"source": str(tiny_dir), **generator}, "weak": {"source": weak_source, **generator}}
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                 "method": "apo_zero", "pairs": pairs, "train": {"max_length": 128}}))

    return make


def test_a_missing_generator_is_refused_by_the_dry_run(cli, recipe, tmp_path):
    code, _, err = cli("po", recipe(str(tmp_path / "no-such-model")), "--dry-run")
    assert code == 2
    assert "pairs.weak.source: model source" in err and "no such directory or file" in err


def test_the_dry_run_plans_pairs_from_models_that_exist(cli, recipe, tiny_dir):
    code, out, err = cli("po", recipe(str(tiny_dir)), "--dry-run")
    assert code == 0, err
    assert "to generate before training" in out


def test_po_pairs_with_dry_run_generates_nothing(cli, recipe, tiny_dir, tmp_path):
    path = recipe(str(tiny_dir))
    code, _, err = cli("po", "pairs", path, "--set", "train.beta=0.2", "--dry-run")
    assert code == 2 and f"run `smolalign po {path} --set train.beta=0.2 --dry-run`" in err
    assert not (tmp_path / "out").exists()
