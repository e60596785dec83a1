"""open-r1's and TRL's reward names: which built-in scores the same thing, and for the others the closest real
equivalent. `smolalign recipes import` translates with it, and `resolve_reward` answers an upstream name with it
instead of a spelling suggestion (`format` is not `think_format`). Standard library only.
"""

OPENR1_TAGS = ["<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>"]
"""open-r1's tag_count_reward: a quarter point for each of these appearing exactly once."""

REWARD_ALIASES = {
    # open-r1 (src/open_r1/rewards.py get_reward_funcs) and TRL's `trl grpo` registry (trl/scripts/grpo.py)
    "accuracy": "math_accuracy",
    "accuracy_reward": "math_accuracy",
    "reasoning_accuracy_reward": "math_accuracy",
    "format": "answer_format",
    "code_format": "answer_format",
    "tag_count": "tag_count",
    "repetition_penalty": "repetition",
    "soft_overlong_punishment": "soft_overlong",
    "get_soft_overlong_punishment": "soft_overlong",
    "code": "code",
}
"""Upstream reward name -> the built-in reward that scores the same thing (math-verify equality with the solution
column; open-r1's exact <think>/<answer> layout; the tags counted once; word n-gram repetition; DAPO's overlong
penalty in tokens; the pass share of the row's tests)."""

REWARDS_REFUSED = {
    "reasoning_steps": "open-r1 counts 'Step 1:', bullets and 'First,'/'Next,' words; there is no built-in "
                       "equivalent: write it as path/to/file.py:function",
    "length": "open-r1's Kimi-1.5 length reward compares character lengths within a group; the closest built-ins "
              "are cosine_length (accuracy scaled by length, in tokens) and soft_overlong (DAPO, in tokens)",
    "cosine": "open-r1's cosine reward counts characters (max_len), ours counts tokens: use cosine_length with "
              "max_length in tokens (params min_value_wrong, max_value_wrong, min_value_correct, max_value_correct)",
    "binary_code": "use code (the share of tests passed) or write a 0/1 wrapper as path/to/file.py:function",
    "ioi_code": "IOI scoring runs on a Piston server; smolalign's code reward runs Python tests locally",
    "cf_code": "Codeforces scoring runs on a Piston server; smolalign's code reward runs Python tests locally",
    "think_format_reward": "TRL's accepts any text with one <think>...</think>; think_format also needs non-empty "
                           "reasoning and an answer after it, matching the row's think mode: use think_format if "
                           "that is what you want",
}
"""Upstream reward names with no built-in of the same meaning, and the closest real equivalent."""


def reward_hint(name: str) -> str | None:
    """A message for an upstream reward name used where a smolalign reward is expected, else None."""
    if name in REWARD_ALIASES and REWARD_ALIASES[name] != name:
        return f"{name!r} is the open-r1 / TRL name; the built-in that scores the same is {REWARD_ALIASES[name]!r}"
    if name in REWARDS_REFUSED:
        return f"{name!r} is an open-r1 / TRL reward with no built-in equivalent: {REWARDS_REFUSED[name]}"
    return None
