"""`smolalign sweep` refuses a bad grid before any cell runs: an unknown key (with a did-you-mean), a value of the
wrong type, an empty grid or value, a grid over the eval: section, a recipe without eval: (harness:
tests/badinput.py)."""

import json

import pytest
from badinput import Case, run_refused

_EVAL = {"data": [{"path": "{dir}/held_out.jsonl"}], "rewards": [{"name": "math_accuracy"}], "modes": ["no_think"]}


def _recipe(**sections) -> str:
    base = {"model": {"source": "{tiny}"}, "template": {"name": "smollm3"},
            "data": {"sources": [{"path": "{dir}/chat.jsonl"}]},
            "train": {"max_length": 1024, "max_steps": 1, "per_device_train_batch_size": 1}, "eval": _EVAL}
    base.update(sections)
    return json.dumps({k: v for k, v in base.items() if v is not None})  # JSON is YAML


_CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n"
_HELD_OUT = json.dumps({"prompt": "what is 1 plus 1", "solution": "2"}) + "\n"
_FILES = {"r.yaml": _recipe(), "chat.jsonl": _CHAT, "held_out.jsonl": _HELD_OUT}


def _sweep(*args: str) -> tuple[str, ...]:
    return ("sweep", "{dir}/r.yaml", *args, "-o", "{dir}/sweep")


CASES = [
    Case("grid-unknown-train-key", _sweep("--grid", "train.learnin_rate=1e-3,1e-4"),
         ("train.learnin_rate", "learning_rate"), _FILES),
    Case("grid-unknown-section", _sweep("--grid", "trian.learning_rate=1e-3,1e-4"), ("trian", "did you mean train"),
         _FILES),
    Case("set-unknown-key", _sweep("--grid", "train.max_steps=1,2", "--set", "train.warmup_step=1"),
         ("train.warmup_step", "warmup_steps"), _FILES),
    Case("grid-wrong-type", _sweep("--grid", "train.max_steps=2,three"), ("train.max_steps", "three"), _FILES),
    Case("grid-wrong-type-own-section", _sweep("--grid", "template.name=smollm3,7"), ("template.name",), _FILES),
    Case("grid-empty", _sweep(), ("--grid",), _FILES),
    Case("grid-empty-values", _sweep("--grid", "train.learning_rate="), ("--grid train.learning_rate",), _FILES),
    Case("grid-empty-value-in-list", _sweep("--grid", "train.learning_rate=1e-3,,1e-4"),
         ("--grid train.learning_rate",), _FILES),
    Case("grid-not-key-value", _sweep("--grid", "learning_rate"), ("--grid 'learning_rate'",), _FILES),
    Case("grid-key-twice", _sweep("--grid", "train.max_steps=1,2", "--grid", "train.max_steps=3"),
         ("--grid train.max_steps",), _FILES),
    Case("grid-value-twice", _sweep("--grid", "train.max_steps=1,1"), ("--grid train.max_steps",), _FILES),
    Case("grid-over-eval", _sweep("--grid", "eval.samples=1,2"), ("--grid eval.samples",), _FILES),
    Case("grid-seed-and-seeds", _sweep("--grid", "train.seed=1,2", "--seeds", "2"), ("train.seed", "--seeds"),
         _FILES),
    Case("seeds-zero", _sweep("--grid", "train.max_steps=1,2", "--seeds", "0"), ("--seeds",), _FILES),
    Case("recipe-without-eval", _sweep("--grid", "train.max_steps=1,2"), ("r.yaml", "eval:"),
         {**_FILES, "r.yaml": _recipe(eval=None)}),
    Case("eval-data-missing", _sweep("--grid", "train.max_steps=1,2"), ("{dir}/held_out.jsonl",),
         {"r.yaml": _recipe(), "chat.jsonl": _CHAT}),
    Case("set-of-a-grid-key", _sweep("--grid", "train.max_steps=1,2", "--set", "train.max_steps=3"),
         ("--set train.max_steps=3", "grid"), _FILES),
    Case("set-seed-with-seeds", _sweep("--grid", "train.max_steps=1,2", "--seeds", "2", "--set", "train.seed=5"),
         ("--set train.seed=5",), _FILES),
    Case("slurm-num-processes", _sweep("--grid", "train.max_steps=1,2", "--slurm", "gpus-per-node=2",
                                       "--num-processes", "1"), ("--num-processes", "gpus-per-node"), _FILES),
    Case("slurm-unknown-setting", _sweep("--grid", "train.max_steps=1,2", "--slurm", "partiton=gpu"),
         ("--slurm partiton", "partition"), _FILES),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)
