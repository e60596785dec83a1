"""Which models a running vLLM engine can go on to serve with their weights reloaded (`vllm_engine.engine_serves`):
checkpoints that differ only in what an engine never reads share it; a different shape, vocabulary, stop token or
sampling default needs an engine of its own. Each case edits one file of a copy of a model directory."""

import json
import shutil
import struct

import pytest

from smolalign.generation.vllm_engine import engine_serves

CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 2, "vocab_size": 300,
          "eos_token_id": 2, "pad_token_id": 0, "transformers_version": "5.17.0", "dtype": "float32"}
GENERATION = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "transformers_version": "5.17.0"}
TOKENIZER_CONFIG = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": "{{ messages }}"}


@pytest.fixture
def model(tmp_path):
    directory = tmp_path / "model"
    directory.mkdir()
    for name, content in (("config.json", CONFIG), ("generation_config.json", GENERATION),
                          ("tokenizer_config.json", TOKENIZER_CONFIG)):
        (directory / name).write_text(json.dumps(content))
    (directory / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0, "b": 1}}}))
    (directory / "model.safetensors").write_bytes(safetensors({"w": [1.0, 2.0]}))
    return directory


def safetensors(tensors: dict) -> bytes:
    """A safetensors file of float32 vectors, written by hand (its format: an 8-byte header length, a JSON header
    of each tensor's dtype, shape and byte range, then the data)."""
    header, data = {}, b""
    for name, values in tensors.items():
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [len(data), len(data) + 4 * len(values)]}
        data += struct.pack(f"<{len(values)}f", *values)
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def edited(model, name: str, change) -> str:
    copy = model.parent / f"copy-{name}"
    shutil.copytree(model, copy)
    path = copy / name
    if name.endswith(".json"):
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    else:
        path.write_bytes(change(path.read_bytes()))
    return str(copy)


@pytest.mark.parametrize(("name", "change"), [
    ("model.safetensors", lambda b: safetensors({"w": [3.0, 4.0]})),
    ("config.json", lambda c: {**c, "_name_or_path": "elsewhere", "transformers_version": "5.17.1",
                               "pad_token_id": 2}),
    ("generation_config.json", lambda c: {**c, "pad_token_id": 2, "transformers_version": "5.17.1"}),
    ("tokenizer_config.json", lambda c: {**c, "chat_template": "{{ other }}"}),
], ids=["weights", "config-name-version-pad", "generation-pad", "template"])
def test_checkpoints_of_one_model_share_an_engine(model, name, change):
    assert engine_serves(str(model), edited(model, name, change))


@pytest.mark.parametrize(("name", "change"), [
    ("config.json", lambda c: {**c, "hidden_size": 128}),
    ("config.json", lambda c: {**c, "architectures": ["Qwen2ForCausalLM"]}),
    ("config.json", lambda c: {**c, "dtype": "bfloat16"}),
    ("generation_config.json", lambda c: {**c, "eos_token_id": [2, 5]}),
    ("generation_config.json", lambda c: {**c, "top_k": 20}),
    ("tokenizer_config.json", lambda c: {**c, "eos_token": "<|im_start|>"}),
    ("tokenizer.json", lambda t: {"model": {"vocab": {"a": 0, "c": 1}}}),
    ("tokenizer_config.json", lambda c: {**c, "pad_token": "<|im_end|>"}),
    ("model.safetensors", lambda b: safetensors({"w": [1.0, 2.0], "extra": [0.0]})),
    ("model.safetensors", lambda b: safetensors({"w": [1.0, 2.0, 3.0]})),
], ids=["shape", "architecture", "dtype", "stop-tokens", "sampling-default", "tokenizer-eos", "vocabulary",
        "pad-token", "another-tensor", "another-tensor-shape"])
def test_anything_else_the_engine_read_needs_its_own(model, name, change):
    assert not engine_serves(str(model), edited(model, name, change))


def test_a_hub_id_is_never_assumed_to_match(model):
    assert not engine_serves("HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert not engine_serves(str(model), "HuggingFaceTB/SmolLM2-135M-Instruct")


def test_quantized_checkpoints_never_share(model):
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "awq"}}))
    assert not engine_serves(str(model), edited(model, "model.safetensors", lambda b: safetensors({"w": [3.0, 4.0]})))


def test_without_safetensors_files_nothing_is_shared(model):
    (model / "model.safetensors").rename(model / "pytorch_model.bin")
    assert not engine_serves(str(model), edited(model, "config.json", lambda c: c))
