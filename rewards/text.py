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


class WithPrefill:
    """A reward given each answer whole: the part of the generation prompt that belongs to the answer (`prefill`, a
    template's `<think>\n` that opens the reasoning the model then writes, as reasoning models' templates end their
    generation prompt) put in front of every assistant turn, as the model's turn reads in full. Without it the
    reasoning reads as the answer, and reasoning cut off by the budget scores as an answer."""

    def __init__(self, reward, prefill: str):
        self.reward, self.prefill = reward, prefill
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)

    def __getattr__(self, name: str):  # required_columns, row_problem, probe: the reward's own
        if name in ("reward", "prefill") or name.startswith("__"):  # not set yet: a copy or an unpickling
            raise AttributeError(name)
        return getattr(self.reward, name)

    def __call__(self, completions: list, **columns) -> list:
        return self.reward([whole_turns(completion, self.prefill) for completion in completions], **columns)


def whole_turns(completion: Any, prefill: str) -> Any:
    """A completion (text, or a conversation's messages) with `prefill` put in front of each assistant turn that
    does not open with its own think block: the turns as the model's read in full."""
    if not prefill:
        return completion
    if isinstance(completion, str):
        return completion if completion.lstrip().startswith(THINK_OPEN) else prefill + completion
    if not isinstance(completion, list):
        return completion
    return [{**m, "content": prefill + (m.get("content") or "")}
            if isinstance(m, dict) and m.get("role") == "assistant" and not m.get("reasoning_content")
            and isinstance(m.get("content") or "", str) and not (m.get("content") or "").lstrip().startswith(
                THINK_OPEN) else m for m in completion]
