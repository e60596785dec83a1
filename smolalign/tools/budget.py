"""What every tool's result goes through before the model reads it: cut to the recipe's length budget, the cut
named, so a tool that prints a megabyte costs the completion budget a stated number of characters."""


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and a line saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit} more characters cut]"


def cut_tail(text: str, limit: int) -> str:
    """The last `limit` characters of `text` (where a traceback's exception is), the cut named before them."""
    if len(text) <= limit:
        return text
    return f"[… {len(text) - limit} characters cut]\n{text[-limit:]}"
