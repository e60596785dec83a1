"""The one check of a row's fields before a template renders them, shared by every reader of rows: training (SFT,
preference pairs, prompts for rl and pairs), `data preview` and `template render`.

A chat template renders what it is given without complaint: a number or a mapping as `content` becomes an empty
turn (and an empty trained answer), and a role it does not know (`robot`) is dropped, so the model learns to answer
no question. There is no list-of-parts content in smolalign's templates, so content must be text (or absent on an
assistant turn that carries `tool_calls`). Each problem is one phrase naming the field (`messages.1.content`); the
caller adds where the row came from (`file.jsonl#row`).
"""

import json
from typing import Any

from rewards.errors import suggest
from smolalign.errors import SmolalignError

ROLES = ("system", "user", "assistant", "tool")
"""The roles smolalign's templates render; any other is refused rather than silently dropped."""


def kind(value: Any) -> str:
    """How a JSON value reads in a message: `a number (5)`, `a mapping`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value[:30]!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def messages_problem(messages: Any, field: str = "messages", *, allow_empty: bool = False) -> str:
    """What is wrong with a conversation ("" when nothing is), naming the field."""
    if not isinstance(messages, list):
        return f"{field} must be a list of {{role, content}} messages, got {kind(messages)}"
    if not messages and not allow_empty:
        return f"{field} is an empty list"
    for index, message in enumerate(messages):
        where = f"{field}.{index}"
        if not isinstance(message, dict):
            return f"{where} must be a {{role, content}} mapping, got {kind(message)}"
        role = message.get("role")
        if role not in ROLES:
            return f"{where}.role must be one of {', '.join(ROLES)}, got {kind(role)} (a template drops such a turn)"
        calls_problem = tool_calls_problem(message.get("tool_calls"), f"{where}.tool_calls")
        if calls_problem:
            return calls_problem
        content = message.get("content")
        if content is None and role == "assistant" and message.get("tool_calls"):
            continue
        if not isinstance(content, str):
            return (f"{where}.content must be text, got {kind(content)} (a template renders it as an empty turn)")
    return ""


def tool_calls_problem(calls: Any, field: str) -> str:
    """What is wrong with an assistant's tool calls ("" when nothing is): each names its function and gives its
    arguments as a mapping or as the JSON text of one (OpenAI's form), which templates print as they are."""
    if calls is None:
        return ""
    if not isinstance(calls, list):
        return f"{field} must be a list of calls, got {kind(calls)}"
    for number, call in enumerate(calls):
        spec = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
        where = f"{field}.{number}" + (".function" if spec is not call else "")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            return f"{where} must be a {{name, arguments}} mapping with the function's name"
        arguments = spec.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as err:
                return f"{where}.arguments is text that is not JSON ({err.msg} at character {err.pos})"
        if not isinstance(arguments, dict):
            return (f"{where}.arguments must be a mapping (or its JSON text), got {kind(arguments)}; the template "
                    "prints it where the model learns to write a JSON object")
    return ""


def text_or_messages_problem(value: Any, field: str) -> str:
    """A prompt or answer given either as plain text or as messages."""
    return "" if isinstance(value, str) else messages_problem(value, field)


def missing_problem(row: dict, field: str, columns: tuple[str, ...] = ()) -> str:
    """A format column that is null in this row: usually rows of another schema in the same file."""
    others = [c for c, v in row.items() if v is not None and not c.startswith("_") and c not in columns]
    has = f"this row has {', '.join(others)}; " if others else ""
    return f"{field} is missing ({has}the rows of a source must share one schema)"


def check_messages(messages: Any, where: str, field: str = "messages") -> list:
    """The conversation, or a SmolalignError naming `where` (a file#row or an option) and the field."""
    problem = messages_problem(messages, field)
    if problem:
        raise SmolalignError(f"{where}: {problem}")
    return messages


def tool_names(tools: Any) -> set[str] | None:
    """The names a row's `tools` column declares (JSON schemas, `{type: function, function: {name}}` or
    `{name}`, as a list or its JSON text); None when the row declares none."""
    if tools is None:
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError:
            return None
    if not isinstance(tools, list):
        return None
    names = set()
    for tool in tools:
        if isinstance(tool, dict):
            spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            if isinstance(spec.get("name"), str):
                names.add(spec["name"])
    return names


def unknown_tool_problem(messages: Any, known: set[str], field: str = "messages") -> str:
    """An assistant tool call naming a tool that is not among `known` ("" when every call names one): a model
    trained on it learns to call a tool that will not be there."""
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for number, call in enumerate(calls if isinstance(calls, list) else ()):
            spec = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
            name = spec.get("name") if isinstance(spec, dict) else None
            if name not in known:
                choices = ", ".join(sorted(known)) or "none"
                return (f"{field}.{index}.tool_calls.{number} calls an unknown tool {name!r}"
                        f"{suggest(str(name), sorted(known))}; the tools are: {choices}")
    return ""
