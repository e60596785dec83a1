"""A hub dataset source: `revision:` reaches datasets, and what identifies the source (the prepared-data cache key,
the run's manifest) is the fingerprint datasets gives the rows it read, which follows the commit read. Keyed by id,
config and split alone, a dataset updated on the hub kept training on the rows tokenized before the update.

The hub cannot be reached here: `datasets.load_dataset` is replaced by a stand-in that serves two commits of one
dataset, as datasets does, with a fingerprint per commit (datasets hashes the builder's cache folder, which names
the commit: `DatasetBuilder._get_dataset_fingerprint`). The last test shows that mechanism on datasets itself."""

import pytest
from recipe_runs import run_of
from tiny_models import write_jsonl

from smolalign.data.mixture import build_mixture
from smolalign.errors import SmolalignError
from smolalign.inputs.data_sources import fingerprint_of, rows_fingerprint
from smolalign.runs.inputs import input_stamps

DATASET = "org/chats"
COMMITS = {"main": "c2", "v1": "c1", "c1": "c1", "c2": "c2"}


@pytest.fixture
def hub(monkeypatch):
    """The stand-in hub: `newest` is the commit `main` names (a test moves it); every load is recorded."""
    import datasets

    state = {"newest": "c2", "calls": []}

    def load_dataset(path, name=None, split=None, revision=None, **kwargs):
        assert path == DATASET, path
        commit = state["newest"] if revision in (None, "main") else COMMITS[revision]
        state["calls"].append({"name": name, "split": split, "revision": revision})
        rows = [{"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"{commit} a{i}"}]}
                for i in range(4)]
        dataset = datasets.Dataset.from_list(rows)
        dataset._fingerprint = f"{DATASET}-{name}-{split}-{commit}"
        return dataset

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the stand-in answers; nothing asks the endpoint
    return state


def _run(**source):
    return run_of({"model": {"source": "org/m"}, "data": {"sources": [{"path": DATASET, **source}]}}, "sft", "t")


def test_the_revision_reaches_datasets(hub):
    mixture = build_mixture(_run(revision="v1").data)
    assert hub["calls"][-1] == {"name": None, "split": "train", "revision": "v1"}
    assert mixture.train[0]["messages"][1]["content"] == "c1 a0"


def test_the_source_is_identified_by_the_commit_read(hub):
    source = _run().data.sources[0]
    before = rows_fingerprint(source)
    assert rows_fingerprint(source) == before           # the same commit: the same rows
    hub["newest"] = "c3"                                 # the dataset updated on the hub
    assert rows_fingerprint(source) != before
    pinned = _run(revision="v1").data.sources[0]
    assert rows_fingerprint(pinned) != rows_fingerprint(source)
    calls = len(hub["calls"])
    assert fingerprint_of(pinned) != fingerprint_of(source)  # without reading: by the pinned revision
    assert len(hub["calls"]) == calls


def test_the_manifest_stamps_the_commit_read(hub):
    stamps = input_stamps(_run())
    hub["newest"] = "c3"
    after = input_stamps(_run())
    assert set(stamps) == {f"data source {DATASET}"} and stamps != after


def test_revision_on_local_files_or_a_generated_task_is_refused(tmp_path):
    data = write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    with pytest.raises(SmolalignError, match=r"a\.jsonl: revision picks a hub dataset's commit"):
        build_mixture(run_of({"model": {"source": "org/m"}, "data": {"sources": [
            {"path": str(data), "revision": "v1"}]}}, "sft", "t").data)
    with pytest.raises(SmolalignError, match="revision is a hub dataset's; a reasoning_gym: source generates"):
        run_of({"model": {"source": "org/m"}, "data": {"sources": [
            {"path": "reasoning_gym:chain_sum", "revision": "v1"}]}}, "rl", "t")


def test_datasets_fingerprints_the_rows_by_the_folder_it_read(tmp_path):
    """The mechanism the stand-in copies, on datasets itself: a builder's rows are fingerprinted by its cache folder
    (dataset, config, version and the hash of what was read), so other data files give another fingerprint."""
    import datasets

    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = write_jsonl(tmp_path / "one" / "train.jsonl", [{"text": "a"}])
    second = write_jsonl(tmp_path / "two" / "train.jsonl", [{"text": "b"}])
    cache = str(tmp_path / "cache")
    one = datasets.load_dataset("json", data_files=str(first), split="train", cache_dir=cache)
    again = datasets.load_dataset("json", data_files=str(first), split="train", cache_dir=cache)
    two = datasets.load_dataset("json", data_files=str(second), split="train", cache_dir=cache)
    assert one._fingerprint == again._fingerprint != two._fingerprint
