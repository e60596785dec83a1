"""The bad-input corpus's harness: each case writes its files into a fresh folder, runs one smolalign command there
in-process, and must be refused the way the exit-code contract (docs/verbs/index.md) says: exit 2, exactly one line on stderr
starting with `error: ` and naming the culprit, no traceback, and no file created or changed in the folder.

A case's texts may hold placeholders, filled in before it runs:
  {dir}   the case's folder (absolute)
  {tiny}  a tiny Llama + tokenizer directory (tests/tiny_models.py), for recipes that need a real model source
Files are given as text (written UTF-8) or bytes (written as they are)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    culprit: tuple[str, ...]
    """Fragments the one error line must contain (a file#row, a key, a flag), after placeholders are filled."""
    files: dict[str, str | bytes] = field(default_factory=dict)


def fill(text: str, folder: Path, tiny: Path | None) -> str:
    return text.replace("{dir}", str(folder)).replace("{tiny}", str(tiny) if tiny else "{tiny}")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` with a digest of its bytes, to see what a refused command wrote."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def run_refused(case: Case, cli, folder: Path, tiny: Path | None = None, monkeypatch=None) -> str:
    """Write the case's files, run it, assert it was refused cleanly; returns the error line."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(fill(content, folder, tiny), encoding="utf-8")
    before = snapshot(folder)
    if monkeypatch is not None:
        monkeypatch.chdir(folder)
    code, _, err = cli(*(fill(arg, folder, tiny) for arg in case.argv))
    assert "Traceback" not in err, f"{case.id}: traceback\n{err}"
    assert code == 2, f"{case.id}: exit {code}, expected 2\n{err}"
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{case.id}: not one error line\n{err}"
    for fragment in case.culprit:
        assert fill(fragment, folder, tiny) in lines[0], f"{case.id}: {fragment!r} not named in\n{lines[0]}"
    after = snapshot(folder)
    assert after == before, f"{case.id}: a refused command wrote {sorted(set(after.items()) - set(before.items()))}"
    return lines[0]


# Builders for the corpus: a recipe that is valid but for what a case changes, and data files as JSON lines.

import json  # noqa: E402 - the builders below only
import re  # noqa: E402

GOOD_CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
GOOD_PAIR = {"prompt": [{"role": "user", "content": "hi"}], "chosen": [{"role": "assistant", "content": "hello"}],
             "rejected": [{"role": "assistant", "content": "go away"}]}
GOOD_PROMPT = {"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "solution": "4"}
_BASE = {"model": {"source": "{tiny}"}, "template": {"name": "smollm3"}}
_TRAIN = {"max_length": 1024, "max_steps": 1, "per_device_train_batch_size": 2}


def yaml_text(mapping: dict) -> str:
    """The mapping as YAML (JSON is YAML); a string value "@@x@@" is written bare, for YAML's `.nan` or `.inf`."""
    return re.sub(r'"@@(.*?)@@"', r"\1", json.dumps(mapping))


def _merged(base: dict, sections: dict) -> str:
    out = {**base}
    for key, value in sections.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return yaml_text(out)


def sft_recipe(**sections) -> str:
    return _merged({**_BASE, "data": {"sources": [{"path": "{dir}/chat.jsonl"}]}, "train": dict(_TRAIN)}, sections)


def po_recipe(**sections) -> str:
    return _merged({**_BASE, "method": "dpo", "data": {"sources": [{"path": "{dir}/pairs.jsonl"}]},
                    "train": dict(_TRAIN)}, sections)


def rl_recipe(**sections) -> str:
    return _merged({**_BASE, "method": "grpo", "rewards": [{"name": "think_format"}],
                    "generation": {"backend": "transformers"}, "data": {"sources": [{"path": "{dir}/prompts.jsonl"}]},
                    "train": {"num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 8,
                              "max_steps": 1}}, sections)


def jsonl(*rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)
