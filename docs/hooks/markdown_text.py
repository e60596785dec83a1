"""Markdown for the generated reference pages: table cells that keep their code spans and lose nothing to HTML."""

import re

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def cell(text: str) -> str:
    """`text` on one line, safe inside a Markdown table cell: pipes, angle brackets and asterisks outside code spans
    are escaped (`runs/<name>` would otherwise be read as an HTML tag and vanish)."""
    text = " ".join(str(text).split())
    out, end = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_escape(text[end:match.start()]))
        out.append(match.group(0))  # Python-Markdown's tables never split a row inside a code span
        end = match.end()
    out.append(_escape(text[end:]))
    return "".join(out)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("*", "\\*")


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; every cell passes through `cell`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(text: str) -> str:
    """`text` as one inline code span, whatever backticks it holds."""
    text = " ".join(str(text).split())
    fence = "``" if "`" in text else "`"
    return f"{fence}{' ' if fence == '``' else ''}{text}{' ' if fence == '``' else ''}{fence}"
