"""The error a reward raises for input its user can fix (an unknown name or parameter, a missing column): one
actionable sentence. Standard library only, so `rewards` works without smolalign; smolalign's CLI treats it as its
own bad-input error (exit 2)."""

import difflib
from collections.abc import Iterable


class RewardError(ValueError):
    """A reward's name, parameters, file or data columns are wrong."""


def suggest(key: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' for the closest known name, or ''."""
    hint = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {hint[0]}?)" if hint else ""
