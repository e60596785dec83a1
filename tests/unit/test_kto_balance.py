"""KTO's desirable and undesirable rows in a ratio its loss weights do not balance: TRL's own data preparation warns
(the KTO paper's Eq. 8), and smolalign's replaces it, so the warning was lost. It is given again, with the weights
that would balance the data, and the data line counts the desirable rows."""

import pytest
from recipe_runs import run_of
from tiny_models import write_jsonl

from smolalign.data.prepare_preference import describe_split, prepare_preference_data
from smolalign.models.load import load_tokenizer


def prepared(tiny_dir, tmp_path, desirable: int, undesirable: int, **train):
    rows = [{"prompt": f"what is {i} plus 1", "completion": f" {i + 1}.", "label": i < desirable}
            for i in range(desirable + undesirable)]
    data = write_jsonl(tmp_path / "kto.jsonl", rows)
    run = run_of({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "kto",
                  "data": {"sources": [{"path": str(data)}]},
                  "train": {"max_length": 64, "per_device_train_batch_size": 2, **train}}, "po", "t")
    tokenizer, template = load_tokenizer(run.recipe.model, "chatml")
    return prepare_preference_data(run, tokenizer, template)


@pytest.mark.parametrize(("train", "warned"), [
    ({}, True),                                          # 7 : 1 at weights 1 : 1
    ({"desirable_weight": 0.15}, False),                # 7 × 0.15 = 1.05 against 1: within [1, 4/3]
    ({"undesirable_weight": 6.0}, False),               # 7 against 6: within
])
def test_unbalanced_labels_are_warned_about_with_the_weights_that_balance_them(tiny_dir, tmp_path, capsys, train,
                                                                                 warned):
    data = prepared(tiny_dir, tmp_path, 7, 1, **train)
    err = capsys.readouterr().err
    assert ("warning: 7 desirable and 1 undesirable rows" in err) == warned, err
    if warned:  # the KTO paper's bounds, computed by hand: desirable 1/7 .. 1.33/7, undesirable 7/1.33 .. 7
        assert "desirable_weight in [0.14, 0.19] or undesirable_weight in [5.26, 7.00]" in err
    assert describe_split(data.stats["train"]).endswith("8 unpaired rows (7 desirable)")


def test_the_warning_is_given_again_when_the_rows_come_from_the_cache(tiny_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "cache"))
    for _ in range(2):
        prepared(tiny_dir, tmp_path, 7, 1)
        assert "warning: 7 desirable and 1 undesirable rows" in capsys.readouterr().err
