"""A completion read as a trajectory: the model's turns, its tool calls and the tools' results, as TRL's tool loop
leaves them (GRPOTrainer with `tools=`: assistant messages, each with the `tool_calls` the response parser found, then
one `tool` message per call). What the tool rewards, the training logs and `eval` count comes from here, so they
count the same things.

- a *call* is a tool call the parser read (name and JSON arguments);
- a *malformed call* is a `<tool_call>` block it could not read: TRL keeps such a turn as plain text, so the block
  is still in the message's content;
- a *tool error* is a result TRL reports as `{'error': ...}`: the tool raised, timed out (smolalign's time limit
  raises), or no tool of that name exists;
- the trajectory is *answered* when its last message is the model's and asks for no further tool call; when the
  turn limit or the completion budget stopped it first, it has no answer.
"""

import ast
from dataclasses import dataclass
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"


def message_text(message: Any) -> str:
    """An assistant message as the model wrote it: a parsed think block (`reasoning_content`) is put back in front
    of the content, so think-mode rewards read the same text with and without a response parser."""
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    content = content if isinstance(content, str) else ""
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        return f"<think>\n{reasoning}\n</think>\n{content}"
    return content


def is_tool_error(content: Any) -> bool:
    """Whether a tool message's content is TRL's report of a failed call, `str({"error": ...})`."""
    if not isinstance(content, str) or not content.startswith("{'error'"):
        return False
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError):
        return False
    return isinstance(value, dict) and set(value) == {"error"}


@dataclass(frozen=True)
class Trajectory:
    assistant_turns: int
    calls: int
    """Tool calls the parser read."""
    malformed_calls: int
    """`<tool_call>` blocks left as text: the parser could not read them."""
    tool_results: int
    tool_errors: int
    """Results that report a failure (raised, timed out, unknown tool)."""
    answered: bool
    """The last message is the model's and calls no tool."""
    answer: str
    """The last assistant message's text when answered, else ""."""
    call_names: tuple[str, ...] = ()

    @property
    def pending_call(self) -> bool:
        """The model asked for a tool, and the loop stopped before it ran (turn limit or completion budget)."""
        return not self.answered and self.assistant_turns > 0


def read_trajectory(completion: Any) -> Trajectory:
    """The trajectory of one completion: a string (one turn, no tools) or a list of messages."""
    if isinstance(completion, str):
        return Trajectory(1, 0, completion.count(TOOL_CALL_OPEN), 0, 0, TOOL_CALL_OPEN not in completion,
                          "" if TOOL_CALL_OPEN in completion else completion)
    messages = [m for m in completion if isinstance(m, dict)] if isinstance(completion, list) else (
        [completion] if isinstance(completion, dict) else [])
    turns = calls = malformed = results = errors = 0
    names: list[str] = []
    for message in messages:
        if message.get("role", "assistant") == "tool":
            results += 1
            errors += is_tool_error(message.get("content"))
            continue
        turns += 1
        parsed = message.get("tool_calls") or []
        calls += len(parsed)
        names += [str((call.get("function") or call).get("name", "")) for call in parsed if isinstance(call, dict)]
        malformed += message_text(message).count(TOOL_CALL_OPEN)
    last = messages[-1] if messages else None
    answered = (last is not None and last.get("role", "assistant") == "assistant" and not last.get("tool_calls")
                and TOOL_CALL_OPEN not in message_text(last))
    return Trajectory(turns, calls, malformed, results, errors, answered,
                      message_text(last) if answered else "", tuple(names))
