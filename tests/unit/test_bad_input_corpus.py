"""The bad-input corpus: malformed recipes, data, templates and arguments as users write them, each refused with
exit 2 and one line naming the culprit, before anything is written (harness: tests/badinput.py)."""

import json

import pytest
from badinput import Case, run_refused


def _recipe(**sections) -> str:
    base = {"model": {"source": "{tiny}"}, "template": {"name": "smollm3"},
            "data": {"sources": [{"path": "{dir}/chat.jsonl"}]},
            "train": {"max_length": 128, "max_steps": 1, "per_device_train_batch_size": 1}}
    base.update(sections)
    return json.dumps(base)  # JSON is YAML


_CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n"

CASES = [
    Case("recipe-unknown-train-key", ("sft", "{dir}/r.yaml", "--dry-run"), ("train.learnin_rate",),
         {"r.yaml": _recipe(train={"learnin_rate": 1e-5}), "chat.jsonl": _CHAT}),
    Case("recipe-duplicate-key", ("sft", "{dir}/r.yaml", "--dry-run"), ("r.yaml", "max_steps"),
         {"r.yaml": "model: {source: '{tiny}'}\ntrain:\n  max_steps: 1\n  max_steps: 2\n", "chat.jsonl": _CHAT}),
    Case("data-missing-file", ("sft", "{dir}/r.yaml", "--dry-run"), ("{dir}/missing.jsonl",),
         {"r.yaml": _recipe(data={"sources": [{"path": "{dir}/missing.jsonl"}]})}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)
