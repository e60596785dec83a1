"""The built-in rewards that stand for TRL's (rewards/upstream.py: "scores the same thing") give TRL 1.16's own
reward functions' values, called side by side on the same completions: soft_overlong against
trl.rewards.get_soft_overlong_punishment at every length around its window, math_accuracy against
trl.rewards.accuracy_reward on answers both read the same way (a final boxed or plain answer, LaTeX, fractions)."""

import pytest
from trl.rewards import accuracy_reward, get_soft_overlong_punishment

from rewards.registry import resolve_reward
from rewards.upstream import REWARD_ALIASES


@pytest.mark.parametrize(("max_length", "cache"), [(1280, 256), (100, 20), (16, 16)])
def test_soft_overlong_is_trls_soft_overlong_punishment(max_length, cache):
    assert REWARD_ALIASES["get_soft_overlong_punishment"] == "soft_overlong"
    ours = resolve_reward("soft_overlong", {"max_length": max_length, "cache": cache})
    theirs = get_soft_overlong_punishment(max_completion_len=max_length, soft_punish_cache=cache)
    ids = [[7] * n for n in range(0, max_length + 40)]
    expected = theirs(completion_ids=ids)
    assert ours(completions=["x"] * len(ids), completion_ids=ids) == pytest.approx(expected, abs=1e-12)
    assert min(expected) == -1.0 and max(expected) == 0.0 and len(set(expected)) > 2  # the window was crossed


CASES = [
    ("The answer is $\\boxed{42}$.", "42"),
    ("The answer is $\\boxed{41}$.", "42"),
    ("So $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("So $x = \\boxed{0.5}$.", "\\frac{1}{2}"),
    ("We find $\\boxed{3\\sqrt{2}}$.", "3\\sqrt{2}"),
    ("We find $\\boxed{2\\sqrt{3}}$.", "3\\sqrt{2}"),
    ("Therefore, the final answer is $\\boxed{\\pi}$.", "\\pi"),
    ("Thus the total is $\\boxed{1000}$.", "1000"),
    ("Thus the total is $\\boxed{999}$.", "1000"),
    ("The result: $\\boxed{-7}$", "-7"),
]


def test_math_accuracy_agrees_with_trls_accuracy_reward():
    assert REWARD_ALIASES["accuracy_reward"] == "math_accuracy"
    ours = resolve_reward("math_accuracy")
    completions = [[{"role": "assistant", "content": text}] for text, _ in CASES]
    solutions = [f"${gold}$" for _, gold in CASES]
    expected = accuracy_reward(completions=completions, solution=solutions)
    assert sorted(set(expected)) == [0.0, 1.0]  # both verdicts are among the cases
    assert ours(completions=completions, solution=solutions) == expected
