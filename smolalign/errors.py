"""The exceptions for input a user can fix: the CLI prints its message and exits with code 2."""

from rewards.errors import RewardError


class SmolalignError(Exception):
    """Bad input (recipe, data, arguments): one actionable sentence, no traceback."""


class RunFailure(Exception):
    """A run that started and then failed for a reason smolalign detected (a stalled step, a dead server): one
    message, exit code 1, no traceback."""


USER_ERRORS = (SmolalignError, RewardError)
"""Bad input from smolalign itself or from a reward (the rewards package does not depend on smolalign)."""
