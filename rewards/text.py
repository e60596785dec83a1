"""Reading completions the way every reward needs: the text of a completion, its think block and its answer (the
think mode a row asked for is decided in `rewards.think_mode`)."""

import re
from typing import Any

from rewards.trajectory import message_text

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_THINK_TURN = re.compile(r"^\s*<think>(.*?)</think>(.*)$", re.DOTALL)


def split_think(text: str) -> tuple[str, str] | None:
    """(reasoning, answer), stripped, of a text that opens with a think block (leading whitespace allowed); None
    when it does not."""
    match = _THINK_TURN.match(text)
    return None if match is None else (match.group(1).strip(), match.group(2).strip())


def completion_text(completion: Any) -> str:
    """A completion as text: a string, or the model's last message of a conversational completion (a parsed think
    block put back in front, `rewards.trajectory.message_text`). A multi-turn tool trajectory that ends on a tool
    result or on a tool call that never ran has no answer: "" (never the tool's output read as the model's)."""
    if isinstance(completion, str):
        return completion
    last = completion[-1] if isinstance(completion, list) and completion else completion
    if isinstance(last, dict):
        if last.get("role", "assistant") != "assistant" or last.get("tool_calls"):
            return ""
        return message_text(last)
    return last if isinstance(last, str) else ""


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
