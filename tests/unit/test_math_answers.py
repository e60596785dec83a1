"""math_accuracy reads the final answer the way math-verify reads the whole text, except where a documented rule is
better: the hand-reasoned table of tests/math_answers.py and open-r1's and Math-Verify's own published cases score
as a grader would, and every verdict that differs from math-verify on the whole text is one of the rule classes the
README and docs/math-answers.md list."""

import pytest
from math_answers import CASES, UPSTREAM
from math_verify import parse, verify

from rewards import resolve_reward
from rewards.final_answer import RULES

DOCUMENTED = ("think", "final statement", "boxes", "asides")
"""Why math_accuracy may differ from `verify(parse(gold), parse(whole text))`, as docs/math-answers.md lists them."""


def msg(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


@pytest.fixture(scope="module")
def reward():
    return resolve_reward("math_accuracy")


def test_the_table_covers_every_class_of_answer():
    assert len(CASES) >= 80 and len({c.id for c in CASES + UPSTREAM}) == len(CASES + UPSTREAM)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reads_the_final_answer(case, reward):
    assert reward([case.completion], solution=[case.gold]) == [case.expected]
    assert reward([msg(case.completion)], solution=[case.gold]) == [case.expected]


@pytest.mark.parametrize("case", UPSTREAM, ids=lambda c: c.id)
def test_open_r1_and_math_verify_cases(case, reward):
    assert reward([msg(case.completion)], solution=[case.gold]) == [case.expected]


def test_differences_from_math_verify_are_documented_rules(reward):
    """Where the reward and math-verify on the untouched text disagree, a documented rule changed what was read; each
    class explains at least one such case, so none is listed without a reason."""
    assert RULES == DOCUMENTED
    explained = set()
    for case in CASES + UPSTREAM:
        gold = parse(case.gold)
        if not gold:
            continue
        whole = float(verify(gold, parse(case.completion)))
        if reward([case.completion], solution=[case.gold])[0] != whole:
            rules = reward.reading(case.completion, gold).rules
            assert rules and set(rules) <= set(DOCUMENTED), f"{case.id}: differs from math-verify for no listed rule"
            explained.update(rules)
    assert explained == set(DOCUMENTED)


def test_a_gold_answer_that_cannot_be_scored_is_named(reward):
    """The data check's question (smolalign.data.check.check_reward_rows; through the CLI in the bad-input corpus):
    a gold answer math-verify cannot parse is a problem naming its column; a blank one is a row without a math
    answer, unscored (None) rather than refused."""
    assert reward.row_problem({"solution": r"\frac{1}{2}"}) == ""
    assert reward.row_problem({"solution": ""}) == reward.row_problem({"solution": None}) == ""
    assert reward([msg("4")], solution=[""]) == [None]
    problem = reward.row_problem({"solution": "a moose?"})
    assert "'a moose?'" in problem and "'solution'" in problem and "math-verify" in problem
