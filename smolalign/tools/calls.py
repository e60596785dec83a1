"""A generated turn read as TRL's tool loop reads it, and its calls run as TRL runs them, for the loops smolalign
drives itself (`eval` with tools). The turn's form is the Hermes one of the `smollm3` template (TRL parses it with
its Qwen3 response template): an optional `<think>` block, the content, then `<tool_call>{"name": ...,
"arguments": {...}}</tool_call>` blocks. As in TRL, a turn with a block that does not read as a call (bad JSON, no
name) keeps its whole text as content and calls nothing: `rewards.trajectory` counts it as malformed."""

import json
import re
from collections.abc import Callable
from typing import Any

_THINK = re.compile(r"^\s*<think>\n?(.*?)\n?</think>\s*", re.DOTALL)
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>\s*", re.DOTALL)
_END = "<|im_end|>"


def parse_turn(text: str) -> dict:
    """The assistant message a generated turn is: content, reasoning_content (a think block), tool_calls."""
    text = text.removesuffix(_END)
    message: dict[str, Any] = {"role": "assistant"}
    think = _THINK.match(text)
    body = text[think.end():] if think else text
    if think and think.group(1).strip():
        message["reasoning_content"] = think.group(1)
    first = body.find("<tool_call>")
    if first < 0:
        message["content"] = body.strip()
        return message
    calls = []
    for block in _CALL.finditer(body[first:]):
        try:
            call = json.loads(block.group(1))
        except json.JSONDecodeError:
            return {"role": "assistant", "content": text.strip()}
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return {"role": "assistant", "content": text.strip()}
        arguments = call.get("arguments", {})
        calls.append({"type": "function", "function": {"name": call["name"], "arguments": arguments}})
    rest = _CALL.sub("", body[first:]).strip()
    if not calls or rest:  # an unclosed block, or text after the calls: not a call the parser reads
        return {"role": "assistant", "content": text.strip()}
    message["content"] = body[:first].strip()
    message["tool_calls"] = calls
    return message


def run_calls(calls: list[dict], functions: dict[str, Callable]) -> list[dict]:
    """One `tool` message per call, as TRL makes them: the result as text, or `str({"error": ...})` when the tool
    raised, its arguments did not fit, or no tool has that name."""
    messages = []
    for call in calls:
        function = call.get("function") or {}
        name = function.get("name", "unknown")
        arguments = function.get("arguments")
        try:
            if name not in functions:
                raise ValueError(f"Tool {name} not found.")
            if not isinstance(arguments, dict):
                raise TypeError(f"arguments must be a mapping, got {type(arguments).__name__}")
            result: Any = functions[name](**arguments)
        except Exception as exc:  # the tool's or the model's fault: reported to the model, as TRL does
            result = {"error": str(exc)}
        messages.append({"role": "tool", "name": name, "content": str(result)})
    return messages
