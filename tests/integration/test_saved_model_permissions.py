"""A saved model's files are readable as the process's umask says, like a file `open` creates: safetensors 0.8 writes
weights private to their owner (0600), which on a shared cluster leaves a run's model unreadable to the team."""

import os
from pathlib import Path


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777  # the permission bits (umask: tests/conftest.py)


def test_a_saved_models_weights_are_readable_as_created(tmp_path, umask):
    import torch
    from tiny_models import build_tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    from smolalign.models.load import save_for_inference

    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, vocab_size=64)
    torch.manual_seed(0)
    tokenizer = build_tokenizer(tmp_path / "tokenizer", vocab_size=64)
    save_for_inference(LlamaForCausalLM(config), tokenizer, tmp_path / "model")
    with open(tmp_path / "plain", "w"):
        pass
    assert {path.name: mode(path) for path in (tmp_path / "model").iterdir()} == \
        dict.fromkeys((p.name for p in (tmp_path / "model").iterdir()), mode(tmp_path / "plain"))


def test_a_runs_checkpoints_and_model_are_readable_as_created(cli, tiny_dir, tmp_path):
    import yaml
    from tiny_models import chat_rows, write_jsonl

    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    recipe = tmp_path / "sft.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 1, "save_steps": 1}}))
    previous = os.umask(0o022)
    try:
        code, _, err = cli("sft", str(recipe), "-o", str(tmp_path / "run"))
    finally:
        os.umask(previous)
    assert code == 0, err
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert any(p.name == "model.safetensors" and p.parent.name == "checkpoint-1" for p in written)
    assert {str(p.relative_to(tmp_path)) for p in written if mode(p) != 0o644} == set()
