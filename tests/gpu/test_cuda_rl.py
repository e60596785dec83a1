"""On a GPU: GRPO in bf16 with transformers generation, and with vLLM colocated (skipped without CUDA, or without
vLLM for the vLLM test). Run: pytest -m gpu."""

import importlib.util

import pytest
import torch
from tiny_models import write_jsonl

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def grpo_recipe(write_recipe, tiny_dir, tmp_path, **extra):
    rows = [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1)} for i in range(16)]
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    return write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "grpo",
                         "data": {"sources": [{"path": str(data)}]},
                         "rewards": [{"name": "math_accuracy"}, {"name": "tag_count", "weight": 0.1}],
                         "train": {"num_generations": 4, "per_device_train_batch_size": 8,
                                   "max_completion_length": 16, "max_steps": 3, "logging_steps": 1}, **extra})


def test_grpo_on_gpu(cli, write_recipe, tiny_dir, tmp_path):
    code, out, err = cli("rl", grpo_recipe(write_recipe, tiny_dir, tmp_path), "-o", tmp_path / "run")
    assert code == 0, err
    assert "bfloat16" in out


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (pip install 'smolalign[vllm]')")
def test_grpo_with_vllm_colocated(cli, write_recipe, tiny_dir, tmp_path):
    recipe = grpo_recipe(write_recipe, tiny_dir, tmp_path, generation={"backend": "vllm_colocate"})
    code, out, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert "vLLM colocated" in out
