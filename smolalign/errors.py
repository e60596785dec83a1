"""The one exception for input a user can fix: the CLI prints its message and exits with code 2."""


class SmolalignError(Exception):
    """Bad input (recipe, data, arguments): one actionable sentence, no traceback."""


class RunFailure(Exception):
    """A run that started and then failed for a reason smolalign detected (a stalled step, a dead server): one
    message, exit code 1, no traceback."""
