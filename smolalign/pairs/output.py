"""Files of a pair-generation run: the append-only work log that makes it resumable, and the atomic final write
(where the pairs go, and the key of what they depend on, are smolalign.inputs.pairs_file's).

The work log (`<output>.partial.jsonl`) gets one line per generated answer, flushed and fsynced batch by batch, so
a run killed at any point loses at most the batch in flight; its first line names the configuration it belongs to,
and a log written under another configuration is discarded rather than mixed in.
"""

import json
import os
import sys
from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.inputs.pairs_file import config_key, pairs_path
from smolalign.jsonl import read_jsonl

REPORT_SUFFIX = ".report.json"
PARTIAL_SUFFIX = ".partial.jsonl"


class WorkLog:
    """Answers generated so far, by (prompt key, side); appended to as batches finish."""

    def __init__(self, path: Path, key: str):
        self.path, self.key = path, key
        self.done: dict[tuple[str, str], dict] = {}
        if path.is_file():
            records = list(read_jsonl(path, skip_bad_lines=True))  # a line cut by a kill is regenerated
            header = records[0][1] if records and records[0][0] == 0 else None
            if header and header.get("config") == key:
                for _, record in records[1:]:
                    if "key" in record and "side" in record:
                        self.done[(record["key"], record["side"])] = record
            else:
                print(f"pairs: discarding {path.name}: its answers were generated under another configuration",
                      file=sys.stderr)
                path.unlink()
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"config": key}) + "\n")

    def has(self, prompt_key: str, side: str) -> bool:
        return (prompt_key, side) in self.done

    def get(self, prompt_key: str, side: str) -> dict:
        return self.done[(prompt_key, side)]

    def append(self, records: list[dict]) -> None:
        with self.path.open("a") as stream:
            for record in records:
                stream.write(json.dumps(record, ensure_ascii=False) + "\n")
                self.done[(record["key"], record["side"])] = record
            stream.flush()
            os.fsync(stream.fileno())


def write_jsonl_atomically(path: Path, rows: list[dict]) -> None:
    """Readers see the old file or the whole new one (smolalign.atomic)."""
    write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def write_json_atomically(path: Path, value: dict) -> None:
    write_atomically(path, json.dumps(value, indent=2))


def is_up_to_date(recipe) -> bool:
    """The pairs file exists and was written by this very configuration."""
    out = pairs_path(recipe)
    report = Path(str(out) + REPORT_SUFFIX)
    if not (out.is_file() and report.is_file()):
        return False
    try:
        return json.loads(report.read_text()).get("config") == config_key(recipe)
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):  # a damaged report: generate again
        return False
