"""Progress of the long steps: bars with counts and rates for tokenization and packing (datasets' bars) and for
generation batches, on in a terminal or when asked, and off in tests and logs, where generation prints a line per
batch instead."""

import io
import re

import huggingface_hub.utils
import pytest
from recipe_runs import run_of
from tiny_models import chat_rows, write_jsonl

from smolalign.data.prepare import prepare_sft_data
from smolalign.models.load import load_tokenizer
from smolalign.progress import Progress, bars_on


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("value", "terminal", "on"), [("", True, True), ("", False, False), ("0", True, False),
                                                        ("off", True, False), ("1", False, True), ("yes", False, True)])
def test_bars_follow_the_terminal_unless_the_variable_says(value, terminal, on, monkeypatch):
    monkeypatch.setenv("SMOLALIGN_PROGRESS", value)
    monkeypatch.setattr("sys.stderr", Terminal() if terminal else io.StringIO())
    assert bars_on() is on


def test_without_bars_each_batch_prints_its_count_and_rate(monkeypatch, capsys):
    monkeypatch.setenv("SMOLALIGN_PROGRESS", "0")
    with Progress(5, "pairs: strong", "answers") as progress:
        progress.update(2)
        progress.update(3)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == ["pairs: strong: 2/5 answers", "pairs: strong: 5/5 answers"]
    assert all(re.search(r", [\d.e+]+ answers/s$", line) for line in lines)


def test_a_bar_counts_to_the_total_with_a_rate(monkeypatch, capsys):
    monkeypatch.setenv("SMOLALIGN_PROGRESS", "1")
    with Progress(4, "eval: after no_think", "prompts") as progress:
        for _ in range(4):
            progress.update(1)
    err = capsys.readouterr().err
    assert "eval: after no_think" in err and "4/4" in err and re.search(r"prompts/s", err)


def prepare(tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(12))
    recipe = run_of({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                              "data": {"sources": [{"path": str(data)}]},
                              "train": {"max_length": 256, "packing": "bfd"}}, "sft", "test")
    tokenizer, template = load_tokenizer(recipe.recipe.model, "smollm3")
    return prepare_sft_data(recipe, tokenizer, template, use_cache=False)


def test_tokenization_and_packing_show_bars_when_asked_and_stay_quiet_otherwise(tiny_dir, tmp_path, monkeypatch,
                                                                                capfd):
    monkeypatch.setenv("SMOLALIGN_PROGRESS", "1")
    prepared = prepare(tiny_dir, tmp_path)
    err = capfd.readouterr().err
    assert re.search(r"tokenize: 100%.*\b12/12\b.*examples/s", err)
    assert re.search(r"pack: 100%.*\b12/12\b", err) and prepared.stats["train"]["rows"] == 12
    assert not huggingface_hub.utils.are_progress_bars_disabled()  # hub downloads show theirs too
    monkeypatch.setenv("SMOLALIGN_PROGRESS", "0")
    prepare(tiny_dir, tmp_path)
    err = capfd.readouterr().err
    assert "tokenize" not in err and "pack:" not in err and huggingface_hub.utils.are_progress_bars_disabled()
