"""The pieces of `smolalign eval` that need no model: mode compliance, the template's answer prefill, pass@k,
bootstrap intervals, model labels and mode flags in prompts."""

import math

import pytest

from rewards.think_mode import without_mode_flags
from smolalign.evaluation.compliance import complies
from smolalign.evaluation.inputs import EvalModel, parse_model, unique_labels
from smolalign.evaluation.metrics import estimate, pass_at_k, per_prompt, resample_indices
from smolalign.templates.registry import resolve_template
from smolalign.templates.render import answer_prefill


@pytest.mark.parametrize(("turn", "think", "no_think"), [
    ("<think>\nadd 2 and 3\n</think>\n5", True, False),
    ("\n<think>\nreason\n</think>\n\nThe answer is 5.", True, False),   # leading whitespace is fine
    ("<think>\n\n</think>\n5", False, True),                           # the empty block SmolLM3 prefills
    ("<think></think>5", False, True),
    ("5", False, False),                                               # no block at all
    ("<think>\nreason\n</think>\n", False, False),                     # no answer after the block
    ("<think>\n\n</think>\n", False, False),
    ("<think>\nstill reasoning when the budget ran out", False, False),
    ("<think>\n\n</think>\n<think>\nreason\n</think>\n5", False, False),  # a second block
    ("Sure. <think>\nreason\n</think>\n5", False, False),              # text before the block
    ("<think>\nreason\n</think>\n5 </think>", False, False),
])
def test_compliance_by_mode(turn, think, no_think):
    assert complies(turn, "think") is think
    assert complies(turn, "no_think") is no_think


def test_answer_prefill_comes_from_the_template():
    smollm3, chatml = resolve_template("smollm3"), resolve_template("chatml")
    assert answer_prefill(smollm3, {"enable_thinking": False}) == "<think>\n\n</think>\n"
    assert answer_prefill(smollm3, {"enable_thinking": True}) == ""
    assert answer_prefill(chatml, {"enable_thinking": False}) == ""
    assert answer_prefill(None, {"enable_thinking": False}) == ""


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 2, 2, 1 - 3 / 10),        # 1 - C(3,2)/C(5,2)
    (4, 0, 2, 0.0), (3, 3, 1, 1.0), (10, 3, 1, 0.3),
    (10, 1, 5, 1 - math.comb(9, 5) / math.comb(10, 5)),
    (4, 3, 2, 1.0),               # fewer than k wrong samples: every k-subset holds a right one
])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_per_prompt_metrics_by_hand():
    import numpy as np

    nan = float("nan")
    samples = {"rewards": {"acc": np.array([[1.0, 0.0, 0.0], [nan, nan, nan], [1.0, nan, 0.5]])},
               "compliant": np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=float),
               "finished": np.array([[1, 1, 1], [0, 1, 1], [1, 1, 1]], dtype=float),
               "tokens": np.array([[3, 4, 5], [6, 6, 6], [1, 2, 3]], dtype=float)}
    values = per_prompt(samples, {"acc": 0.5}, k=3)
    assert values["acc mean"][0] == pytest.approx(1 / 3) and math.isnan(values["acc mean"][1])
    assert values["acc mean"][2] == pytest.approx(0.75)       # the None sample is left out
    assert values["acc avg@3"][2] == pytest.approx(1.0)       # 0.5 reaches the threshold 0.5
    assert values["acc pass@3"][0] == pytest.approx(1.0) and math.isnan(values["acc pass@3"][1])
    assert values["acc pass@3"][2] == pytest.approx(1.0)      # k = the 2 scored samples
    assert list(values["compliance"]) == pytest.approx([2 / 3, 0, 1])
    assert list(values["truncation"]) == pytest.approx([0, 1 / 3, 0])
    assert list(values["length"]) == pytest.approx([4, 6, 2])
    assert "acc pass@1" not in per_prompt(samples, {"acc": 0.5}, k=1)


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    import numpy as np

    values = np.array([0.0, 1.0, 1.0, 0.0, 1.0, float("nan"), 1.0, 1.0])
    indices = resample_indices(len(values), seed=7)
    first, again = estimate(values, indices), estimate(values, resample_indices(len(values), seed=7))
    assert first == again and first.value == pytest.approx(5 / 7)
    assert 0.0 <= first.low < first.value < first.high <= 1.0
    assert estimate(values, resample_indices(len(values), seed=8)) != first
    # By hand: the percentile interval of the means of the very same resamples.
    means = [np.nanmean(values[row]) for row in indices if not np.isnan(values[row]).all()]
    assert first.low == pytest.approx(np.percentile(means, 2.5))
    assert first.high == pytest.approx(np.percentile(means, 97.5))
    assert estimate(np.array([float("nan")] * 3), resample_indices(3, 0)).value is None


def test_model_labels():
    assert parse_model("runs/quickstart/sft/model") == EvalModel("sft", "runs/quickstart/sft/model")
    assert parse_model("base=smollm2-135m-instruct") == EvalModel("base", "smollm2-135m-instruct")
    assert parse_model("HuggingFaceTB/SmolLM3-3B") == EvalModel("SmolLM3-3B", "HuggingFaceTB/SmolLM3-3B")
    assert [m.label for m in unique_labels([EvalModel("a", "x"), EvalModel("a", "y")])] == ["a", "a-2"]


def test_mode_flags_are_taken_out_of_the_system_message():
    user = {"role": "user", "content": "hi /think"}
    assert without_mode_flags([{"role": "system", "content": "Be brief. /no_think"}, user]) == (
        [{"role": "system", "content": "Be brief."}, user], True)
    assert without_mode_flags([{"role": "system", "content": "/think"}, user]) == ([user], True)
    assert without_mode_flags([{"role": "system", "content": "Use /thinking"}, user])[1] is False
    assert without_mode_flags([user]) == ([user], False)   # a user turn's flag is the template's business, not ours
