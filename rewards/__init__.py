"""Verifiable rewards for `smolalign rl`, usable on their own: `resolve_reward(name, params)` returns a callable
with TRL's reward signature (`completions` plus dataset columns as keyword arguments, one float or None per
completion; None means "no reward for this sample": an unparseable gold answer, a sandbox failure).

Modules: `math` (math-verify accuracy), `format` (think tags per mode, tag counting), `length` (DAPO soft overlong,
cosine-scaled, repetition), `code` and `sandbox` (test cases run in an isolated process), `reasoning_gym`
(reasoning-gym's tasks as rows, scored by their own scorers), `registry` (names, parameters,
`path/to/file.py:function`), `think_mode` (the one rule for a row's think mode, which smolalign uses too), `errors`
(RewardError). Nothing here imports smolalign.
"""

from rewards.registry import REWARDS, resolve_reward

__all__ = ["REWARDS", "resolve_reward"]
