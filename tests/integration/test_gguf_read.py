"""Reading a GGUF file once (smolalign/models/gguf_read.py): transformers' loaders get the same metadata and tensor
bytes as from gguf's own reader, and a first run's dry-run read and conversion of the bundled model parse the file
once each instead of six times."""

import gguf
import numpy as np
import pytest
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

from smolalign.models.gguf_read import read_once
from smolalign.models.sources import resolve_source


@pytest.fixture(scope="module")
def bundled_gguf() -> str:
    source = resolve_source("smollm2-135m-instruct")
    assert source.kind == "gguf"
    return source.location


def test_the_shared_reader_reads_what_ggufs_own_reader_reads(bundled_gguf):
    own = gguf.GGUFReader(bundled_gguf)
    expected = load_gguf_checkpoint(bundled_gguf, return_tensors=False)
    with read_once():
        shared = gguf.GGUFReader(bundled_gguf)
        assert gguf.GGUFReader(bundled_gguf) is shared  # one reader per file while the block is open
        assert type(shared.data) is np.ndarray and type(own.data) is np.memmap  # sliced in C, not in Python
        got = load_gguf_checkpoint(bundled_gguf, return_tensors=False)
        with read_once():  # a block inside another shares the enclosing one's readers
            assert gguf.GGUFReader(bundled_gguf) is shared
    assert got == expected  # config, tokenizer (vocabulary, merges, special ids) and tokenizer config
    assert len(expected["tokenizer"]["tokens"]) == 49152
    assert [t.name for t in shared.tensors] == [t.name for t in own.tensors]
    for mine, theirs in zip(shared.tensors, own.tensors, strict=True):
        assert (mine.tensor_type, list(mine.shape)) == (theirs.tensor_type, list(theirs.shape)), mine.name
        assert np.array_equal(mine.data, theirs.data), mine.name
    assert gguf.GGUFReader is not None and gguf.GGUFReader.__name__ == "GGUFReader"  # restored on exit


def test_a_first_run_parses_the_bundled_file_once_per_command_step(bundled_gguf, tmp_path, monkeypatch):
    """A fresh cache: the dry run's tokenizer read and the conversion each build one reader (transformers alone
    builds two and four) and the conversion builds gguf's name table once (it built it per module: 397 times); the
    converted embedding is gguf's own dequantization of the file's token_embd."""
    from safetensors import safe_open

    from smolalign.models import load
    from smolalign.recipe.schema import ModelSection
    from smolalign.target import this_machine

    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "cache"))
    source = resolve_source("smollm2-135m-instruct")
    built, tables = [], []
    reader_init, table = gguf.gguf_reader.GGUFReader.__init__, gguf.get_tensor_name_map
    monkeypatch.setattr(gguf.gguf_reader.GGUFReader, "__init__",
                        lambda self, path, mode="r": (built.append(str(path)), reader_init(self, path, mode))[1])
    monkeypatch.setattr(gguf, "get_tensor_name_map", lambda *a: (tables.append(a), table(*a))[1])

    tokenizer, _ = load.preflight_tokenizer(ModelSection(source="smollm2-135m-instruct"), "smollm3", source,
                                            this_machine())
    assert len(built) == 1
    directory = load.local_dir(source)
    assert len(built) == 2 and set(built) == {bundled_gguf}
    assert len(tables) == 1
    converted, _ = load.load_tokenizer(ModelSection(source=directory), "smollm3")
    assert tokenizer.get_vocab() == converted.get_vocab() and len(converted) == 49152

    own = gguf.GGUFReader(bundled_gguf)
    token_embd = next(t for t in own.tensors if t.name == "token_embd.weight")
    expected = gguf.dequantize(token_embd.data, token_embd.tensor_type)
    with safe_open(f"{directory}/model.safetensors", "np") as weights:
        embedding = weights.get_tensor("model.embed_tokens.weight")
    assert embedding.shape == (49152, 576)
    assert np.array_equal(embedding, expected.astype(np.float32))
