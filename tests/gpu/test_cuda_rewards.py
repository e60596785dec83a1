"""On a GPU: a `model:` reward scores on CUDA what a CPU forward pass of the same model gives, and graded pairs
sample their N candidates with vLLM's n (skipped without CUDA, or without vLLM for the vLLM test). Run: pytest -m gpu."""

import importlib.util
import json

import pytest
import torch
from tiny_models import chat_rows, sft_tiny, write_jsonl

from rewards.registry import resolve_reward
from tests.integration.test_reward_model import reward_model_dir  # noqa: F401 - the tiny classifier fixture

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="needs vLLM (pip install 'smolalign[vllm]')")


def test_a_reward_model_scores_on_cuda_what_cpu_gives(reward_model_dir):  # noqa: F811
    from transformers import AutoTokenizer, LlamaForSequenceClassification

    prompts = [[{"role": "user", "content": f"what is {i} plus {i}"}] for i in range(6)]
    completions = [f"{i} + {i} = {2 * i}." for i in range(6)]
    reward = resolve_reward(f"model:{reward_model_dir}", {"batch_size": 4, "dtype": "float32"})
    scores = reward(completions=completions, prompts=prompts)
    assert reward._device.type == "cuda"

    tokenizer = AutoTokenizer.from_pretrained(reward_model_dir)
    model = LlamaForSequenceClassification.from_pretrained(reward_model_dir, dtype=torch.float32).eval()
    expected = []
    for messages, answer in zip(prompts, completions, strict=True):
        text = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": answer}], tokenize=False)
        with torch.no_grad():
            expected.append(model(**tokenizer(text, add_special_tokens=False, return_tensors="pt")).logits[0, 0].item())
    assert scores == pytest.approx(expected, abs=1e-3)


@needs_vllm
def test_graded_pairs_sample_with_vllm(cli, write_recipe, tiny_dir, tmp_path):
    policy = sft_tiny(tiny_dir, tmp_path / "sft", chat_rows(64), steps=60)  # a tiny model that ends its turns
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": row["messages"][1]["content"]}
                                                       for row in chat_rows(16, seed=1)])
    (tmp_path / "scorer.py").write_text("def length(completions, **columns):\n"
                                        "    return [float(len(c)) for c in completions]\n")
    recipe = write_recipe({"model": {"source": str(policy)}, "template": {"name": "chatml"}, "method": "dpo",
                           "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "p.jsonl"),
                                     "graded": {"n": 4, "margin": 0, "sampler": {"backend": "vllm", "temperature": 1.2,
                                                                                 "max_new_tokens": 48},
                                                "scorer": [{"name": f"{tmp_path / 'scorer.py'}:length"}]}}})
    code, out, err = cli("po", "pairs", recipe)
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines() if line.strip()]
    assert rows and all(len(row["provenance"]["candidates"]) == 4 for row in rows)
    for row in rows:
        scored = [c["score"] for c in row["provenance"]["candidates"] if c.get("score") is not None]
        assert max(scored) > min(scored)
