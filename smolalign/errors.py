"""The one exception for input a user can fix: the CLI prints its message and exits with code 2."""


class SmolalignError(Exception):
    """Bad input (recipe, data, arguments): one actionable sentence, no traceback."""
