"""A pairs threshold no score can meet is refused before anything generates: a graded margin wider than the
scorer's weighted sum can span, a verifier threshold above its maximum (no strong answer is ever chosen) or at its
minimum (every weak answer passes), an unpaired threshold that labels every candidate alike. Each used to pass the
dry run and throw away every answer after all of them were sampled and scored. The ranges here are worked out by
hand from the rewards' documented scores (math_accuracy, think_format: 0 or 1)."""

import pytest
from recipe_runs import run_of

from smolalign.errors import SmolalignError
from smolalign.pairs.thresholds import check_thresholds

MATH, THINK = {"name": "math_accuracy"}, {"name": "think_format"}


@pytest.fixture(autouse=True)
def prompts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "what is 2 plus 2", "solution": "4"}\n')


def graded(scorer: list[dict], **options):
    return run_of({"model": {"source": "org/model"}, "method": "apo_zero",
                   "pairs": {"prompts": [{"path": "prompts.jsonl"}], "graded": {"scorer": scorer, **options}}},
                  "po", "test", check=False)


def verified(rewards: list[dict], threshold: float):
    generator = {"source": "org/model"}
    return run_of({"model": {"source": "org/model"}, "method": "apo_zero",
                   "pairs": {"prompts": [{"path": "prompts.jsonl"}], "strong": generator, "weak": generator,
                             "verifier": {"rewards": rewards, "threshold": threshold}}}, "po", "test", check=False)


@pytest.mark.parametrize(("scorer", "widest"), [
    ([MATH], 1.0),
    ([MATH, {**THINK, "weight": 0.5}], 1.5),
    ([{**MATH, "weight": 2.0}, {**THINK, "weight": -1.0}], 3.0),  # [-1, 2]
], ids=["one", "two-weighted", "a-negative-weight"])
def test_a_graded_margin_wider_than_the_scorer_spans_is_refused(scorer, widest):
    check_thresholds(graded(scorer, margin=widest))
    with pytest.raises(SmolalignError, match=rf"^pairs\.graded\.margin {widest + 0.25:g}: wider than any two "):
        check_thresholds(graded(scorer, margin=widest + 0.25))


def test_a_scorer_with_an_unbounded_reward_is_not_refused(tmp_path):
    team = tmp_path / "team.py"
    team.write_text("def score(completions, **kwargs):\n    return [100.0 for _ in completions]\n")
    check_thresholds(graded([MATH, {"name": f"{team}:score"}], margin=50.0))


def test_an_unpaired_threshold_labelling_every_candidate_alike_is_refused():
    check_thresholds(graded([MATH], unpaired=True, threshold=1.0))
    for threshold, label in ((0.0, "desirable"), (1.5, "undesirable")):
        with pytest.raises(SmolalignError, match=rf"every candidate would be labelled {label} \(.*\[0, 1\]"):
            check_thresholds(graded([MATH], unpaired=True, threshold=threshold))


def test_a_verifier_threshold_out_of_the_rewards_reach_is_refused():
    check_thresholds(verified([MATH], 1.0))
    check_thresholds(verified([MATH, THINK], 2.0))
    with pytest.raises(SmolalignError, match=r"^pairs\.verifier\.threshold 2: no answer can reach it .*at most 1\)"):
        check_thresholds(verified([MATH], 2.0))
    with pytest.raises(SmolalignError, match=r"^pairs\.verifier\.threshold 0: every answer reaches it"):
        check_thresholds(verified([MATH], 0.0))
