"""A dry run of a preference stage that would generate its pairs checks the models that would generate them and the
prompts against train.max_length, and `po pairs --dry-run` generates nothing: a plan that promised pairs from a
missing folder, or pairs whose prompts alone fill train.max_length (preparation drops every such row), passed before
the GPU bill and failed after it."""

import json

import pytest
from tiny_models import write_jsonl

PROMPTS = [f"what is {i} plus {i + 1}" for i in range(4)]


def chatml_prompt_lengths(tiny_dir) -> list[int]:
    """The prompts rendered by hand in ChatML, with the generation prompt, in the tiny tokenizer's tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    return [len(tokenizer(f"<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
                ["input_ids"]) for p in PROMPTS]


@pytest.fixture
def recipe(write_recipe, tiny_dir, tmp_path):
    def make(weak_source: str) -> str:
        data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": p} for p in PROMPTS])
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


def test_prompts_that_fill_max_length_are_refused_before_any_pair_is_generated(cli, recipe, tiny_dir, tmp_path):
    lengths = chatml_prompt_lengths(tiny_dir)
    path = recipe(str(tiny_dir))
    code, _, err = cli("po", path, "--set", f"train.max_length={min(lengths)}", "--dry-run")
    assert code == 2, err
    assert (f"error: train.max_length {min(lengths)}: the prompt of every checked row fills it alone (the shortest is "
            f"{min(lengths)} tokens") in err
    code, _, err = cli("po", path, "--set", f"train.max_length={min(lengths)}")
    assert code == 2 and not (tmp_path / "out").exists()  # refused before generating
    code, _, err = cli("po", path, "--set", f"train.max_length={min(lengths) + 1}", "--dry-run")
    assert code == 0, err
    filling = sum(length > min(lengths) for length in lengths)
    assert (f"the prompt of {filling} of the 4 checked rows fills it alone" in err) is (filling > 0)


def test_pairs_whose_prompts_fill_max_length_are_refused_by_the_dry_run(cli, write_recipe, tiny_dir, tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": p}],
                                        "chosen": [{"role": "assistant", "content": "yes"}],
                                        "rejected": [{"role": "assistant", "content": "no"}]}) + "\n" for p in PROMPTS))
    # A pair's prompt may end a token earlier than the prompt alone: a token across the boundary goes to the answers.
    shortest = min(chatml_prompt_lengths(tiny_dir)) - 1
    for method in ("dpo", "kto"):
        recipe = str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                   "method": method, "data": {"sources": [{"path": str(data)}]},
                                   "train": {"max_length": shortest}}))
        code, _, err = cli("po", recipe, "--dry-run")
        assert code == 2 and f"error: train.max_length {shortest}: the prompt of every checked row" in err, err
        code, _, err = cli("po", recipe, "--dry-run", "--set", f"train.max_length={shortest + 20}")
        assert code == 0 and "warning" not in err, err
