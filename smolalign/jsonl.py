"""JSON-lines files, read one way: one JSON object per line, blank lines skipped, rows numbered by their line from 0
(`file.jsonl#row`, as every data error names its row). A file the user gave (data, `--completions`, a sweep cell's
samples) has every line checked: the first that is not UTF-8 text, not JSON or not an object is refused, naming
`file#row`. A file smolalign appends to as it goes (metrics.jsonl, the pairs' work log) may end in a line cut off by a
killed run: read with `skip_bad_lines`, such a line is left out instead.

Lines are split at `\\n` only: a JSON string may hold U+2028 and other characters that `str.splitlines` would split
at (smolalign writes with `ensure_ascii=False`)."""

import json
from collections.abc import Iterator
from pathlib import Path

from smolalign.errors import SmolalignError


def _at(where: str, row: int) -> str:
    """A line named as its row (from 0, as rows are named everywhere) and as an editor numbers it (from 1)."""
    return f"{where}#{row} (line {row + 1})"


def read_jsonl(path: Path, what: str = "", *, skip_bad_lines: bool = False) -> Iterator[tuple[int, dict]]:
    """(row, object) for every non-blank line of `path`; a bad line is refused as `{what} {path}#{row} (line N): ...`, or
    left out with `skip_bad_lines`."""
    where = f"{what} {path}" if what else str(path)
    with Path(path).open("rb") as lines:
        for row, raw in enumerate(lines):
            try:
                line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace" if skip_bad_lines else "strict")
            except UnicodeDecodeError as exc:
                raise SmolalignError(f"{_at(where, row)}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file "
                                     "as UTF-8") from None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                if skip_bad_lines:
                    continue
                raise SmolalignError(f"{_at(where, row)}: invalid JSON ({exc.msg} at column {exc.colno})") from None
            if isinstance(value, dict):
                yield row, value
            elif not skip_bad_lines:
                raise SmolalignError(f"{_at(where, row)}: a row must be a JSON object, got {type(value).__name__}")
