"""The data check before anything loads (`smolalign.data.check`): which rows it renders, what it does with a hub
model it cannot see, and that the TRL config and train ranges are checked in the same pass."""

import json

import pytest
from badinput import GOOD_CHAT, jsonl, sft_recipe
from recipe_runs import run_of

from smolalign.data.check import FIRST, RANDOM, sample, tokenizer_for
from smolalign.data.mixture import ORIGIN
from smolalign.errors import SmolalignError
from smolalign.recipe.train_section import RANGES, check_ranges
from smolalign.target import Target


def test_sample_takes_the_first_rows_and_a_seeded_draw_of_each_source():
    from datasets import Dataset

    origins = [f"a.jsonl#{i}" for i in range(100)] + [f"b.jsonl#{i}" for i in range(10)]
    dataset = Dataset.from_dict({ORIGIN: origins})
    rows, sources = sample(dataset, seed=3)
    picked = rows[ORIGIN]
    assert sources == 2
    assert picked[:FIRST] == origins[:FIRST]  # the first rows of a
    drawn = [o for o in picked if o.startswith("a.jsonl") and int(o.split("#")[1]) >= FIRST]
    assert len(drawn) == RANDOM and len(set(drawn)) == RANDOM
    assert [o for o in picked if o.startswith("b.jsonl")] == origins[100:]  # a small source is read whole
    again, _ = sample(dataset, seed=3)
    assert again[ORIGIN] == picked  # seeded: the same rows every time


def _hub_recipe(tmp_path, target=None):
    (tmp_path / "chat.jsonl").write_text(jsonl(GOOD_CHAT))
    raw = json.loads(sft_recipe(model={"source": "models/not_here"}).replace("{dir}", str(tmp_path)))
    return run_of(raw, "sft", "test", target=target)


def test_hub_model_absent_here_is_refused_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    with pytest.raises(SmolalignError, match="models/not_here.*HF_HUB_OFFLINE"):
        tokenizer_for(_hub_recipe(tmp_path))


def test_hub_model_absent_here_is_left_unchecked_online_or_for_a_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    found, why = tokenizer_for(_hub_recipe(tmp_path, Target(8, "the job's nodes")))  # they may reach the hub
    assert found is None and "models/not_here" in why
    recipe = _hub_recipe(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr("smolalign.hub_access._unreachable", lambda: None)  # the hub answers; nothing is asked
    found, why = tokenizer_for(recipe)  # nothing is downloaded: the answer comes from the (empty) cache
    assert found is None and "not checked" in why
    assert not (tmp_path / "hf" / "hub" / "models--models--not_here").exists()


@pytest.mark.parametrize(("key", "good", "bad"), [("learning_rate", 0.0, -1e-9), ("max_steps", -1, 0),
                                                  ("per_device_train_batch_size", 1, 0), ("adam_beta2", 0.999, 1.0),
                                                  ("num_generations", 2, 1), ("warmup_steps", 0, -1)])
def test_ranges_admit_the_edges_trl_accepts(key, good, bad):
    assert RANGES[key].admits(good) and not RANGES[key].admits(bad)
    check_ranges({key: good})
    with pytest.raises(SmolalignError, match=f"train.{key}"):
        check_ranges({key: bad})


def test_every_float_must_be_finite():
    with pytest.raises(SmolalignError, match="train.beta must be a finite number"):
        check_ranges({"beta": float("nan")})


@pytest.mark.parametrize("parallel_above", [10_000, 0])
def test_reward_rows_are_checked_once_per_value_in_order_and_on_every_core(parallel_above, monkeypatch):
    """math_accuracy's gold answers, in one process and in a pool of processes (as for large data): the rows whose
    gold does not parse are named in file order, each distinct gold parsed once, blank golds left alone."""
    from datasets import Dataset

    from rewards.math import MathAccuracy
    from smolalign.data import check as check_module

    monkeypatch.setattr(check_module, "PARALLEL_ABOVE", parallel_above)
    golds = ["4", "", "a moose?", r"\frac{1}{2}", "4", "a moose?", "no idea"] + ["7"] * 5 + ["x?"] * 4
    rows = Dataset.from_dict({ORIGIN: [f"p.jsonl#{i}" for i in range(len(golds))], "solution": golds,
                              "prompt": ["q"] * len(golds)})
    reward = MathAccuracy()
    calls = []
    if parallel_above:  # counted in this process only
        monkeypatch.setattr(reward, "_parse", lambda text, parse=reward._parse: calls.append(text) or parse(text))
    with pytest.raises(SmolalignError) as refused:
        check_module.check_reward_rows([("math_accuracy", reward), ("think_format", object())], rows)
    message = str(refused.value)
    assert message.startswith("reward math_accuracy: data row p.jsonl#2: its gold answer 'a moose?'")
    assert "also p.jsonl#5, p.jsonl#6, p.jsonl#12, p.jsonl#13 (7 rows in all)" in message
    if parallel_above:
        assert sorted(calls) == sorted({"4", "a moose?", r"\frac{1}{2}", "no idea", "7", "x?"})
    check_module.check_reward_rows([("math_accuracy", reward)], rows.select(range(2)))  # "4" and "": no problem


@pytest.mark.parametrize("parallel_above", [10_000, 0])
def test_code_reward_rows_whose_tests_cannot_run_are_refused_before_loading(parallel_above, monkeypatch):
    """A column of answers where the code reward wants tests: every row named before the run loads (in a pool of
    processes too, where the reward's sandbox cannot travel), instead of a ValueError at the first reward call."""
    from datasets import Dataset

    from rewards.code import CodeReward
    from smolalign.data import check as check_module

    monkeypatch.setattr(check_module, "PARALLEL_ABOVE", parallel_above)
    tests = ['[{"input": "1", "output": "2"}]', "44", '["assert f(1) == 2"]', "not json", None, '{"a": 1}']
    rows = Dataset.from_dict({ORIGIN: [f"c.jsonl#{i}" for i in range(len(tests))], "solution": tests})
    reward = CodeReward(workers=1, test_column="solution")
    try:
        with pytest.raises(SmolalignError) as refused:
            check_module.check_reward_rows([("code", reward)], rows)
        message = str(refused.value)
        assert message.startswith("reward code: data row c.jsonl#1: its tests (column 'solution') cannot be run: "
                                  "tests must be a list of")
        assert message.endswith("also c.jsonl#3, c.jsonl#5; fix or drop these rows")
        check_module.check_reward_rows([("code", reward)], rows.select([0, 2, 4]))  # io tests, asserts, none
    finally:
        reward.close()
