"""On a GPU: the same tiny SFT runs in bf16 with packing (skipped without CUDA). Run: pytest -m gpu."""

import pytest
import torch
from tiny_models import chat_rows, write_jsonl

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_tiny_sft_on_gpu_is_bf16(cli, write_recipe, tiny_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 256, "packing": "bfd", "max_steps": 3,
                                     "per_device_train_batch_size": 2}})
    code, out, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert "bfloat16" in out
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "model")
    assert model.config.dtype == torch.bfloat16
