"""On a GPU: the tiny SFT runs in bf16 with packing and saves bf16 weights (skipped without CUDA). Run: pytest -m gpu."""

import pytest
import torch
from tiny_models import chat_rows, write_jsonl

from tests.gpu.weights import metric_rows, saved_dtypes

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("attention", ["sdpa", "flex_attention"])
def test_tiny_sft_on_gpu_saves_bf16_weights(cli, write_recipe, tiny_dir, tmp_path, attention):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"model": {"source": str(tiny_dir), "attn_implementation": attention},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 256, "packing": "bfd", "max_steps": 3, "logging_steps": 1,
                                     "per_device_train_batch_size": 2}})
    code, out, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert saved_dtypes(tmp_path / "run" / "model") == {"BF16"}
    losses = [row["loss"] for row in metric_rows(tmp_path / "run") if "loss" in row]
    assert len(losses) == 3 and all(loss == loss for loss in losses)  # three real steps, no NaN
