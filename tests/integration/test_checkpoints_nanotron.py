"""nanotron checkpoints -> transformers: round trips over TP/PP layouts and architectures (weights and logits
bit-identical to the model that was saved), the checkpoint nanotron itself wrote, and every refusal."""

import json
from pathlib import Path

import pytest
import torch
from nanotron_writer import write_nanotron
from paths import REPO

from smolalign.checkpoints.convert import convert
from smolalign.checkpoints.files import read_safetensors_header as read_header
from smolalign.checkpoints.nanotron_shards import parse_shape, parse_slice_pairs
from smolalign.errors import SmolalignError

REAL = REPO / "tests" / "fixtures" / "nanotron-smollm3-tp2"  # written by nanotron itself (its README)


def tiny(arch: str, tied: bool, vocab: int, layers: int = 4, kv_heads: int = 2, seed: int = 0, **extra):
    from transformers import LlamaConfig, LlamaForCausalLM, SmolLM3Config, SmolLM3ForCausalLM

    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=kv_heads, max_position_embeddings=256,
                  tie_word_embeddings=tied, bos_token_id=None, eos_token_id=2, pad_token_id=0, **extra)
    if arch == "smollm3":
        return SmolLM3ForCausalLM(SmolLM3Config(**common, no_rope_layer_interval=4)).eval()
    return LlamaForCausalLM(LlamaConfig(**common)).eval()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A tokenizer whose size (301) no TP degree divides, so every checkpoint here has padded vocabulary rows."""
    from tiny_models import build_tokenizer

    directory = tmp_path_factory.mktemp("tokenizer-301")
    build_tokenizer(directory, vocab_size=301)
    return directory


@pytest.fixture(scope="module")
def vocab(tokenizer_dir) -> int:
    from transformers import AutoTokenizer

    size = len(AutoTokenizer.from_pretrained(tokenizer_dir))
    assert size % 2
    return size


def logits(model, vocab: int):
    ids = torch.arange(24).remainder(vocab).reshape(2, 12)
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize(("arch", "tied", "tp", "pp"), [
    ("smollm3", True, 1, 1), ("smollm3", True, 2, 1), ("smollm3", False, 4, 2),
    ("llama", False, 2, 2), ("llama", True, 4, 1), ("llama", False, 1, 2),
])
def test_round_trip_is_bit_identical(arch, tied, tp, pp, tmp_path, tokenizer_dir, vocab):
    from transformers import AutoModelForCausalLM

    model = tiny(arch, tied, vocab, kv_heads=4 if tp == 4 else 2)
    write_nanotron(model, tmp_path / "run", tp=tp, pp=pp, pad_vocab_to=8)
    assert json.loads((tmp_path / "run" / "10" / "model_config.json").read_text())["vocab_size"] > vocab
    report = convert(tmp_path / "run", tmp_path / "hf", tokenizer=tokenizer_dir)
    assert report.format == "nanotron" and f"TP {tp}, PP {pp}" in report.layout
    converted = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert type(converted) is type(model)
    assert converted.config.vocab_size == vocab and converted.config.tie_word_embeddings == tied
    if arch == "smollm3":
        assert converted.config.no_rope_layers == model.config.no_rope_layers == [1, 1, 1, 0]
    original, loaded = model.state_dict(), converted.state_dict()
    assert original.keys() == loaded.keys()
    for name, tensor in original.items():
        assert torch.equal(tensor, loaded[name]), name
    assert torch.equal(logits(model, vocab), logits(converted, vocab))
    assert ("lm_head.weight" in read_header(tmp_path / "hf" / "model.safetensors")) == (not tied)
    assert (tmp_path / "hf" / "tokenizer.json").is_file()


def test_sharded_output_has_an_index_and_loads(tmp_path, tokenizer_dir, vocab):
    from transformers import AutoModelForCausalLM

    model = tiny("llama", False, vocab)
    write_nanotron(model, tmp_path / "run", tp=2)
    convert(tmp_path / "run", tmp_path / "hf", tokenizer=tokenizer_dir, max_shard_bytes=200_000)
    index = json.loads((tmp_path / "hf" / "model.safetensors.index.json").read_text())
    files = set(index["weight_map"].values())
    assert len(files) > 2 and all((tmp_path / "hf" / f).is_file() for f in files)
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in model.state_dict().values())
    converted = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert torch.equal(logits(model, vocab), logits(converted, vocab))


def test_dtype_defaults_to_the_checkpoint_and_can_be_overridden(tmp_path, tokenizer_dir, vocab):
    from transformers import AutoModelForCausalLM

    model = tiny("llama", True, vocab).to(torch.bfloat16)
    write_nanotron(model, tmp_path / "run", tp=2)
    convert(tmp_path / "run", tmp_path / "bf16", tokenizer=tokenizer_dir)
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16", dtype="auto")
    assert loaded.model.embed_tokens.weight.dtype == torch.bfloat16
    assert torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight)
    convert(tmp_path / "run", tmp_path / "fp32", tokenizer=tokenizer_dir, dtype="float32")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "fp32", dtype="auto")
    assert loaded.model.embed_tokens.weight.dtype == torch.float32
    assert torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight.float())


def test_padded_vocabulary_is_trimmed_to_the_tokenizer(tmp_path, tokenizer_dir, vocab):
    model = tiny("llama", False, vocab)
    write_nanotron(model, tmp_path / "run", tp=2, pad_vocab_to=64)
    rows = json.loads((tmp_path / "run" / "10" / "model_config.json").read_text())["vocab_size"]
    assert rows > vocab and rows % 128 == 0
    report = convert(tmp_path / "run", tmp_path / "hf", tokenizer=tokenizer_dir)
    assert any(f"from {rows} padded rows to the tokenizer's {vocab}" in note for note in report.notes)
    untrimmed = convert(tmp_path / "run", tmp_path / "raw")
    assert "no tokenizer" in " ".join(untrimmed.notes)
    assert json.loads((tmp_path / "raw" / "config.json").read_text())["vocab_size"] == rows


def test_tokenizer_from_config_yaml_and_vocab_check(tmp_path, tokenizer_dir, vocab):
    model = tiny("smollm3", True, vocab)
    write_nanotron(model, tmp_path / "run", tp=2, pad_vocab_to=64, config_yaml=True, tokenizer_dir=tokenizer_dir,
                   model_config_json=False)
    report = convert(tmp_path / "run", tmp_path / "hf")
    assert (tmp_path / "hf" / "tokenizer.json").is_file() and "config.json" in {p.name for p in (tmp_path / "hf").iterdir()}
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["vocab_size"] == vocab
    assert report.notes and "latest.txt -> step 10" in report.notes[0]
    from transformers import AutoTokenizer

    # A tokenizer 200 tokens smaller pads to fewer rows than the embedding has: not this model's tokenizer.
    small = AutoTokenizer.from_pretrained(tokenizer_dir)
    small_dir = tmp_path / "small-tokenizer"
    small.save_pretrained(small_dir)
    data = json.loads((small_dir / "tokenizer.json").read_text())
    data["model"]["vocab"] = {k: v for k, v in data["model"]["vocab"].items() if v < vocab - 200}
    assert len(data["model"]["vocab"]) == vocab - 200
    data["model"]["merges"] = []
    data["added_tokens"] = [t for t in data["added_tokens"] if t["id"] < vocab - 200]
    (small_dir / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(SmolalignError, match="not this model's tokenizer"):
        convert(tmp_path / "run", tmp_path / "bad", tokenizer=small_dir)


def test_real_nanotron_metadata_strings_parse():
    assert parse_shape("(np.int64(128), 64)") == (128, 64)
    assert parse_shape("(64, 128)") == (64, 128)
    pairs = parse_slice_pairs("0,32,None|None,None,None#32,64,None|None,None,None;"
                              "32,48,None|None,None,None#80,96,None|None,None,None")
    assert pairs == [((slice(0, 32), slice(None)), (slice(32, 64), slice(None))),
                     ((slice(32, 48), slice(None)), (slice(80, 96), slice(None)))]


def _real_shaped_model():
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    return SmolLM3ForCausalLM(SmolLM3Config(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rope_parameters={"rope_type": "default", "rope_theta": 50000.0},
        no_rope_layer_interval=4, tie_word_embeddings=True, bos_token_id=1, eos_token_id=7, pad_token_id=None))


def test_writer_matches_what_nanotron_wrote(tmp_path):
    real = REAL / "checkpoint"
    ours = write_nanotron(_real_shaped_model(), tmp_path / "run", tp=2)
    real_files = sorted(str(p.relative_to(real)) for p in (real / "model").rglob("*.safetensors"))
    our_files = sorted(str(p.relative_to(ours)) for p in (ours / "model").rglob("*.safetensors"))
    assert our_files == real_files
    for name in real_files:
        theirs, mine = read_header(real / name), read_header(ours / name)
        assert mine["__metadata__"] == theirs["__metadata__"], name
        assert (mine["data"]["dtype"], mine["data"]["shape"]) == (theirs["data"]["dtype"], theirs["data"]["shape"]), name
    real_config = json.loads((real / "model_config.json").read_text())
    our_config = json.loads((ours / "model_config.json").read_text())
    assert our_config.keys() == real_config.keys()
    assert {k: our_config[k] for k in ("no_rope_layer", "vocab_size", "rope_theta", "is_qwen2_config")} == \
           {k: real_config[k] for k in ("no_rope_layer", "vocab_size", "rope_theta", "is_qwen2_config")}


def test_real_nanotron_checkpoint_converts_bit_identically(tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    report = convert(REAL / "checkpoint", tmp_path / "hf")
    assert report.layout.startswith("nanotron 1.5, TP 2, PP 1")
    ours, expected = load_file(tmp_path / "hf" / "model.safetensors"), load_file(REAL / "expected_hf" / "model.safetensors")
    assert set(expected) - set(ours) == {"lm_head.weight"} and set(ours) <= set(expected)
    for name, tensor in ours.items():
        assert torch.equal(tensor, expected[name]), name
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert type(model).__name__ == "SmolLM3ForCausalLM"
    assert model.config.no_rope_layers == [1, 1, 1, 0]
    assert model.config.rope_parameters["rope_theta"] == 50000
    assert torch.equal(model.lm_head.weight, expected["lm_head.weight"])


@pytest.fixture(scope="module")
def saved(tmp_path_factory, vocab):
    """One TP=2 PP=2 SmolLM3 checkpoint; refusal tests copy and damage it."""
    run = tmp_path_factory.mktemp("nanotron") / "run"
    write_nanotron(tiny("smollm3", False, vocab), run, tp=2, pp=2)
    return run


def copy_of(saved: Path, tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(saved, tmp_path / "run")
    return tmp_path / "run"


def edit_config(run: Path, **changes) -> None:
    path = run / "10" / "model_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize(("change", "message"), [
    ({"sliding_window_size": 4096}, "sliding_window_size is 4096: nanotron applies its sliding window"),
    ({"attention_bias": True}, "attention_bias is True: .*bias on qkv but not on o_proj"),
    ({"rope_interleaved": True}, "rope_interleaved is True: interleaved"),
    ({"rope_seq_len_interpolation_factor": 2.0}, "rope_seq_len_interpolation_factor is 2.0"),
    ({"moe_config": {"num_experts": 8}}, "moe_config .*mixture-of-experts"),
    ({"is_qwen2_config": False}, "neither a Llama"),
])
def test_unsupported_options_are_refused_with_their_reason(change, message, saved, tmp_path):
    run = copy_of(saved, tmp_path)
    edit_config(run, **change)
    with pytest.raises(SmolalignError, match=message):
        convert(run, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.staging-*"))


def test_missing_tp_shard_is_refused_naming_the_file(saved, tmp_path):
    run = copy_of(saved, tmp_path)
    shard = run / "10/model/model/decoder/1/pp_block/attn/qkv_proj/model_weight_pp-rank-0-of-2_tp-rank-1-of-2.safetensors"
    shard.unlink()
    with pytest.raises(SmolalignError, match=r"decoder\.1\.pp_block\.attn\.qkv_proj\.weight is missing tensor-parallel "
                                             r"rank\(s\) \[1\] of 2: .*qkv_proj/model_weight_pp-rank-0-of-2_tp-rank-1-of-2"):
        convert(run, tmp_path / "out")


def test_missing_pipeline_stage_is_refused(saved, tmp_path):
    run = copy_of(saved, tmp_path)
    for path in (run / "10" / "model").rglob("*pp-rank-1-of-2*"):
        path.unlink()
    with pytest.raises(SmolalignError, match=r"model\.decoder\.2\.pp_block\.attn\.qkv_proj\.weight is missing"):
        convert(run, tmp_path / "out")


def test_damaged_slice_metadata_is_refused(saved, tmp_path):
    from safetensors.torch import load_file, save_file

    run = copy_of(saved, tmp_path)
    shard = run / "10/model/model/decoder/0/pp_block/attn/o_proj/model_weight_pp-rank-0-of-2_tp-rank-1-of-2.safetensors"
    header = read_header(shard)["__metadata__"]
    header["local_global_slices_pairs"] = header["local_global_slices_pairs"].replace("32,64", "0,32")
    save_file(load_file(shard), shard, metadata=header)
    with pytest.raises(SmolalignError, match="cover 4096 of its 4096 elements with overlaps"):
        convert(run, tmp_path / "out")


def test_old_versions_and_missing_configs_are_refused(saved, tmp_path):
    run = copy_of(saved, tmp_path)
    meta = run / "10" / "checkpoint_metadata.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "version": "1.1"}))
    with pytest.raises(SmolalignError, match="version 1.1 .* older than 1.2"):
        convert(run, tmp_path / "out")
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "version": "1.4"}))
    (run / "10" / "model_config.json").unlink()
    with pytest.raises(SmolalignError, match="neither config.yaml .* nor model_config.json"):
        convert(run, tmp_path / "out")


def test_expert_shards_are_refused(saved, tmp_path):
    run = copy_of(saved, tmp_path)
    folder = run / "10/model/model/decoder/0/pp_block/mlp/experts"
    folder.mkdir(parents=True)
    (folder / "model_weight_pp-rank-0-of-2_tp-rank-0-of-2_exp-rank-0-of-4.safetensors").write_bytes(b"")
    with pytest.raises(SmolalignError, match="expert-sharded weights"):
        convert(run, tmp_path / "out")


def test_destination_is_protected_and_replaced_atomically(saved, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(SmolalignError, match="exists and is not empty; pass --overwrite"):
        convert(saved, out)
    assert (out / "keep.txt").read_text() == "mine"
    convert(saved, out, overwrite=True)
    assert not (out / "keep.txt").exists() and (out / "config.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
