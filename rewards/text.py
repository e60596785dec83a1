"""Reading completions the way every reward needs: the text of a completion, its think block and its answer (the
think mode a row asked for is decided in `rewards.think_mode`)."""

import re
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINK_TURN = re.compile(r"^\s*<think>(.*?)</think>(.*)$", re.DOTALL)


def split_think(text: str) -> tuple[str, str] | None:
    """(reasoning, answer), stripped, of a text that opens with a think block (leading whitespace allowed); None
    when it does not."""
    match = _THINK_TURN.match(text)
    return None if match is None else (match.group(1).strip(), match.group(2).strip())


def completion_text(completion: Any) -> str:
    """A completion as text: a string, or the last message's content of a conversational completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        content = completion[-1].get("content") if isinstance(completion[-1], dict) else completion[-1]
        return content if isinstance(content, str) else ""
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    return ""


def answer_part(text: str) -> str | None:
    """What follows the last closing think tag; the whole text when there is no think block; None when a think
    block is opened and never closed (the model never answered)."""
    if THINK_CLOSE in text:
        return text.rsplit(THINK_CLOSE, 1)[1]
    if THINK_OPEN in text:
        return None
    return text


def column(columns: dict, name: str, n: int) -> list:
    """A dataset column passed to a reward, or Nones when the dataset has no such column."""
    values = columns.get(name)
    return list(values) if values is not None else [None] * n
