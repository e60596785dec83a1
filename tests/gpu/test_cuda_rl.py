"""On a GPU: GRPO in bf16 with transformers generation, with vLLM colocated, and with a vLLM server smolalign
starts on a second GPU; with vLLM, the completions must come from vLLM (transformers' generate is made to fail, or
the server's log shows the requests). Skipped without CUDA, without vLLM, or (server) with one GPU. Run:
pytest -m gpu."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from node_gpus import gpus_for, needs_gpus
from tiny_models import write_jsonl

from tests.gpu.weights import metric_rows, saved_dtypes

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="needs vLLM (pip install 'smolalign[vllm]')")
STEPS, BATCH, COMPLETION = 3, 8, 16


def grpo_recipe(write_recipe, tiny_dir, tmp_path, **extra):
    rows = [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1)} for i in range(16)]
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    return write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "grpo",
                         "data": {"sources": [{"path": str(data)}]},
                         "rewards": [{"name": "math_accuracy"}, {"name": "tag_count", "weight": 0.1}],
                         "train": {"num_generations": 4, "per_device_train_batch_size": BATCH,
                                   "max_completion_length": COMPLETION, "max_steps": STEPS, "logging_steps": 1},
                         **extra})


@pytest.fixture
def no_transformers_generation(monkeypatch):
    """Completions can then only come from vLLM."""
    from transformers.generation.utils import GenerationMixin

    def refuse(*args, **kwargs):
        raise AssertionError("transformers generate was called: the completions did not come from vLLM")

    monkeypatch.setattr(GenerationMixin, "generate", refuse)


def test_grpo_on_gpu_saves_bf16_weights(cli, write_recipe, tiny_dir, tmp_path):
    code, out, err = cli("rl", grpo_recipe(write_recipe, tiny_dir, tmp_path), "-o", tmp_path / "run")
    assert code == 0, err
    assert saved_dtypes(tmp_path / "run" / "model") == {"BF16"}
    assert len([row for row in metric_rows(tmp_path / "run") if "reward" in row]) == STEPS


@needs_vllm
def test_grpo_with_vllm_colocated_samples_with_vllm(cli, write_recipe, tiny_dir, tmp_path, monkeypatch,
                                                    no_transformers_generation):
    import vllm

    produced: list[list[int]] = []
    generate = vllm.LLM.generate

    def recording(self, *args, **kwargs):
        outputs = generate(self, *args, **kwargs)
        produced.extend(list(c.token_ids) for o in outputs for c in o.outputs)
        return outputs

    monkeypatch.setattr(vllm.LLM, "generate", recording)
    recipe = grpo_recipe(write_recipe, tiny_dir, tmp_path, generation={"backend": "vllm_colocate"},
                         train={"num_generations": 4, "per_device_train_batch_size": BATCH, "logging_steps": 1,
                                "max_completion_length": COMPLETION, "max_steps": STEPS,
                                "vllm_gpu_memory_utilization": 0.3})
    code, out, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert len(produced) >= STEPS * BATCH and all(0 < len(ids) <= COMPLETION for ids in produced)
    assert saved_dtypes(tmp_path / "run" / "model") == {"BF16"}


@needs_vllm
@needs_gpus(2)
def test_grpo_with_a_started_vllm_server(write_recipe, tiny_dir, tmp_path):
    """On two of the node's GPUs, in a child process (this one sees one GPU): the server takes one, training the
    other, and the server's own log shows the generation requests the completions came from."""
    recipe = grpo_recipe(write_recipe, tiny_dir, tmp_path, generation={"backend": "vllm_server"})
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpus_for(2)}
    done = subprocess.run([sys.executable, "-m", "smolalign", "rl", str(recipe), "-o", str(tmp_path / "run")],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len([row for row in metric_rows(tmp_path / "run") if "reward" in row]) == STEPS
    assert saved_dtypes(tmp_path / "run" / "model") == {"BF16"}
    log = Path(re.search(r"\(log (\S+)\)", done.stdout + done.stderr).group(1))
    assert log.read_text().count("/generate/") >= STEPS  # the server answered the trainer's generation requests
