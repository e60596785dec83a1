"""A run whose rows would all be dropped before training (`data.on_untrained: drop`, pairs longer than
train.max_length) is refused by the check before anything loads, in a dry run and in a real run alike: it used to
pass the dry run, load the model, write its run directory and die in the trainer with a traceback (an empty
dataset), or, for a held-out split, evaluate nothing in silence."""

import json

import pytest
from tiny_models import chat_rows, write_jsonl

LONG_QUESTION = "what is the sum " * 80
"""A question that alone fills max_length 64 in the tiny tokenizer: its answer is cut off, nothing is trained."""


def long_rows(n: int) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"{LONG_QUESTION} {i}"}, {"role": "assistant", "content": "4"}]}
            for i in range(n)]


@pytest.fixture
def sft_recipe(write_recipe, tiny_dir):
    def make(data, packing: bool, **section) -> str:
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                 "data": {"sources": [{"path": str(data)}], "on_untrained": "drop", **section},
                                 "train": {"max_length": 64, "packing": packing, "max_steps": 1,
                                           "gradient_checkpointing": False}}))

    return make


@pytest.mark.parametrize("packing", [False, True], ids=["unpacked", "packed"])
def test_an_sft_run_that_would_drop_every_row_is_refused_before_loading(cli, sft_recipe, tmp_path, packing):
    recipe = sft_recipe(write_jsonl(tmp_path / "long.jsonl", long_rows(6)), packing)
    code, _, err = cli("sft", recipe, "--dry-run")
    assert code == 2, err
    assert ("error: no checked training row is left: all 6 were dropped with no trained token (data.on_untrained: "
            "drop), 6 of them cut at train.max_length 64") in err and "Traceback" not in err
    run_dir = tmp_path / "run"
    code, _, err = cli("sft", recipe, "-o", run_dir)
    assert code == 2 and "no checked training row is left" in err and not run_dir.exists()


def test_a_held_out_split_left_with_no_row_is_refused(cli, sft_recipe, tmp_path):
    from recipe_runs import run_of

    from smolalign.data.mixture import build_mixture

    data = write_jsonl(tmp_path / "mixed.jsonl", chat_rows(7) + long_rows(1))
    recipe = sft_recipe(data, False, eval_split=1)

    def holds_the_long_row_out(seed: int) -> bool:  # the mixture's own split, read only to set the test up
        raw = {"model": {"source": "x"}, "data": {"sources": [{"path": str(data)}], "eval_split": 1, "seed": seed}}
        return LONG_QUESTION in str(build_mixture(run_of(raw, "sft", "test", check=False).data).eval[0])

    out_seed = next(seed for seed in range(50) if holds_the_long_row_out(seed))
    in_seed = next(seed for seed in range(50) if not holds_the_long_row_out(seed))
    code, _, err = cli("sft", recipe, "--set", f"data.seed={out_seed}", "--dry-run")
    assert code == 2, err
    assert "error: no checked held-out row is left: all 1 were dropped with no trained token" in err
    code, out, err = cli("sft", recipe, "--set", f"data.seed={in_seed}", "--dry-run")
    assert code == 0 and "and 1 held-out row(s)" in out, err


def pairs(n_short: int, n_long: int) -> list[dict]:
    """Pairs whose sides are ~20 tokens of the tiny tokenizer in ChatML, and pairs whose chosen side is over 60."""
    def pair(i, chosen):
        return {"prompt": [{"role": "user", "content": f"is {i} even"}],
                "chosen": [{"role": "assistant", "content": chosen}], "rejected": [{"role": "assistant", "content": "no"}]}

    return [pair(i, "yes") for i in range(n_short)] + [pair(i, "yes " * 60) for i in range(n_long)]


def test_a_reward_model_whose_every_pair_is_too_long_is_refused_and_some_are_dropped_before_loading(
        cli, write_recipe, tiny_dir, tmp_path):
    def recipe(rows) -> str:
        data = write_jsonl(tmp_path / f"pairs{len(rows)}.jsonl", rows)
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                 "method": "reward", "data": {"sources": [{"path": str(data)}]},
                                 "train": {"max_length": 64, "max_steps": 1, "per_device_train_batch_size": 2,
                                           "gradient_checkpointing": False}}, f"reward{len(rows)}.yaml"))

    every = recipe(pairs(0, 4))
    code, _, err = cli("po", every, "--dry-run")
    assert code == 2, err
    assert "error: train.max_length 64: the longer side (prompt + answer) of every checked row is longer than it" in err
    code, _, err = cli("po", every, "-o", tmp_path / "every")
    assert code == 2 and not (tmp_path / "every").exists()

    some = recipe(pairs(4, 2))
    code, _, err = cli("po", some, "--dry-run")
    assert code == 0 and "of 2 of the 6 checked rows is longer than it" in err, err
    code, _, err = cli("po", some, "-o", tmp_path / "some")
    assert code == 0, err
    manifest = json.loads((tmp_path / "some" / "manifest.json").read_text())
    assert manifest["data"]["stats"]["train"]["longer_than_max_length"] == 2
