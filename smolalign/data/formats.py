"""Dataset formats: detecting messages / prompt-completion / text from columns, and the canonical columns of each."""

from rewards.think_mode import scan_flags, system_text
from smolalign.errors import SmolalignError

EXTRA_COLUMNS = ("chat_template_kwargs", "tools")
"""Optional per-row columns passed to the chat template."""

FORMAT_COLUMNS = {
    "messages": ("messages",),
    "prompt_completion": ("prompt", "completion"),
    "text": ("text",),
    "preference": ("chosen", "rejected"),
    "unpaired": ("prompt", "completion", "label"),
}
OPTIONAL_COLUMNS = {"preference": ("prompt",)}
"""Format columns that may be absent: a preference pair's prompt can be implicit in chosen and rejected."""
PREFERENCE_FORMATS = ("preference", "unpaired")


def detect_format(columns: list[str], requested: str, where: str) -> str:
    """The format of a source from its columns (`requested` may force one); ShareGPT `conversations` is messages."""
    if requested != "auto":
        needed = FORMAT_COLUMNS[requested]
        missing = [c for c in needed if c not in columns and not (c == "messages" and "conversations" in columns)]
        if missing:
            raise SmolalignError(
                f"data source {where} has no column {missing[0]!r} needed by format {requested} "
                f"(columns: {', '.join(columns)}; rename yours with columns: {{yours: {missing[0]}}})")
        return requested
    if "chosen" in columns or "rejected" in columns:
        missing = "rejected" if "chosen" in columns else "chosen"
        if missing not in columns:
            raise SmolalignError(
                f"data source {where} has {'chosen' if missing == 'rejected' else 'rejected'} but no {missing!r} "
                f"column; preference pairs need prompt, chosen and rejected (columns: {', '.join(columns)})")
        return "preference"
    if "label" in columns and "prompt" in columns and "completion" in columns:
        return "unpaired"
    if "messages" in columns or "conversations" in columns:
        return "messages"
    if "prompt" in columns and "completion" in columns:
        return "prompt_completion"
    if "text" in columns:
        return "text"
    raise SmolalignError(
        f"data source {where}: cannot tell its format from columns {', '.join(columns)}; expected messages, "
        "prompt + completion, text, prompt/chosen/rejected pairs or prompt/completion/label (rename yours with "
        "columns: {yours: messages})")


def canonical_columns(fmt: str, columns: list[str]) -> list[str]:
    return [c for c in (*OPTIONAL_COLUMNS.get(fmt, ()), *FORMAT_COLUMNS[fmt], *EXTRA_COLUMNS) if c in columns]


def sharegpt_to_messages(conversations: list[dict], where: str) -> list[dict]:
    """ShareGPT turns ({from, value}) as messages; a row that is not a list of turns is refused naming `where`."""
    if not isinstance(conversations, list) or not all(isinstance(t, dict) for t in conversations):
        raise SmolalignError(f"data row {where}: conversations must be a list of {{from, value}} turns")
    roles = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system",
             "tool": "tool", "function_call": "assistant", "observation": "tool"}
    return [{"role": roles.get(turn.get("from"), turn.get("from")), "content": turn.get("value")} for turn in conversations]


def with_system_message(messages: list[dict], text: str) -> list[dict]:
    """The messages with a system message holding `text` first, unless they already open with one (a row's own
    system message wins, as open-r1's make_conversation leaves rows that have one). A row's system message that
    holds nothing but flags (`/no_think`) gets `text` before them: the flags choose a mode, and a template reads
    the rest of that message as the instructions, which would otherwise be empty."""
    own = system_text(messages)
    if own is None:
        return [{"role": "system", "content": text}, *messages]
    if scan_flags(own)[1].strip() or not isinstance(messages[0].get("content"), str):
        return list(messages)
    return [{**messages[0], "content": " ".join(part for part in (text.rstrip(), own.strip()) if part)}, *messages[1:]]


def add_system_prompt(dataset, fmt: str, text: str, where: str):
    """`data.system_prompt` put into every row of a source: the conversation (messages), or the prompt (prompt +
    completion, preference pairs, unpaired); a pair without a prompt gets it at the start of both answers."""
    def conversational(value, column: str):
        if isinstance(value, str):
            if fmt in ("prompt_completion", "unpaired"):
                raise SmolalignError(f"data.system_prompt: data source {where} has plain-text prompts (column "
                                     f"{column!r} is a string), which no chat template renders; give the prompts as "
                                     "messages, or remove system_prompt")
            return with_system_message([{"role": "user", "content": value}], text)
        return with_system_message(list(value or []), text)

    if fmt == "text":
        raise SmolalignError(f"data.system_prompt: data source {where} is plain text (column 'text'), which has no "
                             "conversation to add a system message to")
    if fmt == "messages":
        return dataset.map(lambda row: {"messages": conversational(row["messages"], "messages")})
    if fmt == "preference" and "prompt" not in dataset.column_names:
        return dataset.map(lambda row: {side: conversational(row[side], side) for side in ("chosen", "rejected")})
    return dataset.map(lambda row: {"prompt": conversational(row["prompt"], "prompt")})
