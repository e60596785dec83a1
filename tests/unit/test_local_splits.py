"""A local folder's splits are the ones its file names make, by datasets' own rules (a downloaded hub dataset:
data/train_sft-00000-of-00001.parquet beside data/test_sft-...): a source reads the files of its `split` only, never a
held-out split's rows beside the training ones. The expected rows come from `datasets.load_dataset(folder,
split=...)`, which infers the splits itself."""

import json

import datasets
import pytest

from smolalign.errors import SmolalignError
from smolalign.inputs.data_sources import load_source
from smolalign.recipe.data_schema import SourceSection


def _rows(tag: str, n: int = 3) -> list[dict]:
    return [{"text": f"{tag} {i}"} for i in range(n)]


def _jsonl(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _parquet(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(str(path))


def _texts(folder, split: str, name: str | None = None) -> list[str]:
    return sorted(load_source(SourceSection(path=str(folder), split=split, name=name))["text"])


def _theirs(folder, split: str, name: str | None = None) -> list[str]:
    return sorted(datasets.load_dataset(str(folder), name, split=split)["text"])


@pytest.fixture
def hub_snapshot(tmp_path):
    """A hub dataset as `hf download --local-dir` leaves it: named splits in data/, a README, a cache folder."""
    folder = tmp_path / "snapshot"
    _parquet(folder / "data" / "train_sft-00000-of-00002.parquet", _rows("train a"))
    _parquet(folder / "data" / "train_sft-00001-of-00002.parquet", _rows("train b"))
    _parquet(folder / "data" / "test_sft-00000-of-00001.parquet", _rows("test"))
    (folder / "README.md").write_text("---\nlicense: mit\n---\n")
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    (folder / ".cache" / "huggingface" / ".gitignore").write_text("*\n")
    return folder


def test_a_downloaded_hub_dataset_reads_the_split_asked_for(hub_snapshot):
    assert _texts(hub_snapshot, "train_sft") == _theirs(hub_snapshot, "train_sft")
    assert len(_texts(hub_snapshot, "train_sft")) == 6
    assert _texts(hub_snapshot, "test_sft") == _theirs(hub_snapshot, "test_sft") == sorted(t["text"] for t in
                                                                                           _rows("test"))


def test_a_split_the_folder_does_not_have_is_refused_naming_those_it_has(hub_snapshot):
    with pytest.raises(SmolalignError, match=r"no split 'train' .*test_sft, train_sft"):
        _texts(hub_snapshot, "train")


def test_train_and_validation_files_train_on_train_only(tmp_path):
    _jsonl(tmp_path / "d" / "train.jsonl", _rows("train"))
    _jsonl(tmp_path / "d" / "validation.jsonl", _rows("held out"))
    assert _texts(tmp_path / "d", "train") == _theirs(tmp_path / "d", "train") == [f"train {i}" for i in range(3)]
    assert _texts(tmp_path / "d", "validation") == _theirs(tmp_path / "d", "validation")


def test_a_folder_whose_files_name_no_split_is_one_train_split(tmp_path):
    _jsonl(tmp_path / "d" / "chat.jsonl", _rows("chat"))
    _jsonl(tmp_path / "d" / "more" / "math.jsonl", _rows("math"))
    assert _texts(tmp_path / "d", "train") == _theirs(tmp_path / "d", "train")
    assert len(_texts(tmp_path / "d", "train")) == 6


def test_a_file_naming_no_split_beside_files_that_do_is_refused(tmp_path):
    _jsonl(tmp_path / "d" / "train.jsonl", _rows("train"))
    _jsonl(tmp_path / "d" / "extra.jsonl", _rows("extra"))  # datasets would leave it out without a word
    with pytest.raises(SmolalignError, match=r"extra\.jsonl names no split"):
        _texts(tmp_path / "d", "train")


def test_a_file_is_read_whole_and_another_split_of_it_is_refused(tmp_path):
    _jsonl(tmp_path / "chat.jsonl", _rows("chat"))
    assert len(_texts(tmp_path / "chat.jsonl", "train")) == 3
    with pytest.raises(SmolalignError, match=r"split 'test' .* a file is read whole"):
        _texts(tmp_path / "chat.jsonl", "test")


@pytest.mark.parametrize("names", [("trainset.jsonl", "testset.jsonl"), ("Train.jsonl", "Test.jsonl"),
                                   ("train/train.jsonl", "train/validation.jsonl")],
                         ids=["set-suffix", "capitals", "inside-a-train-folder"])
def test_a_held_out_file_datasets_would_read_as_training_rows_is_refused(tmp_path, names):
    for name in names:
        _jsonl(tmp_path / "d" / name, _rows(name))
    assert len(_theirs(tmp_path / "d", "train")) == 6  # datasets itself would train on both
    with pytest.raises(SmolalignError, match=r"is read as split 'train', but its name says"):
        _texts(tmp_path / "d", "train")


def test_metadata_and_hidden_files_are_not_rows(tmp_path):
    _parquet(tmp_path / "d" / "data" / "train-00000-of-00001.parquet", _rows("train"))
    (tmp_path / "d" / "dataset_infos.json").write_text('{"default": {}}')
    _jsonl(tmp_path / "d" / ".ipynb_checkpoints" / "train-checkpoint.jsonl", _rows("stale"))
    assert _texts(tmp_path / "d", "train") == [f"train {i}" for i in range(3)]


CONFIGS = """---
configs:
- config_name: Mid
  data_files:
  - {split: OpenThoughts, path: data/Mid/OpenThoughts-*}
  - {split: Other, path: data/Mid/Other-*}
- config_name: SFT
  data_files:
  - {split: Chat, path: data/SFT/Chat-*}
---
"""


def test_a_snapshot_with_configurations_reads_the_one_named(tmp_path):
    """smoltalk2's layout: configurations in the README, their shards below data/<configuration>/."""
    folder = tmp_path / "snapshot"
    _parquet(folder / "data" / "Mid" / "OpenThoughts-00000-of-00002.parquet", _rows("thoughts a"))
    _parquet(folder / "data" / "Mid" / "OpenThoughts-00001-of-00002.parquet", _rows("thoughts b"))
    _parquet(folder / "data" / "Mid" / "Other-00000-of-00001.parquet", _rows("other"))
    _parquet(folder / "data" / "SFT" / "Chat-00000-of-00001.parquet", _rows("chat"))
    (folder / "README.md").write_text(CONFIGS)
    assert _texts(folder, "OpenThoughts", "Mid") == _theirs(folder, "OpenThoughts", "Mid")
    assert len(_texts(folder, "OpenThoughts", "Mid")) == 6
    assert _texts(folder, "Chat", "SFT") == _theirs(folder, "Chat", "SFT")
    with pytest.raises(SmolalignError, match=r"Config name is missing.*Mid.*SFT.*set name: to one"):
        _texts(folder, "train")
