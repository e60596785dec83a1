"""`smolalign rl` with `method: online_dpo` end to end on a tiny model: the loss TRL logs on a step equals a hand
computation from the answers it sampled (recorded by the reward), the reward that picked the chosen one, log-probs
of the policy it logged and log-probs of the frozen reference recomputed here from the starting weights.

The recipes pin `model.dtype: float32`: these comparisons are exact to float32 rounding, and on a CPU with bf16 the default
would compute in bf16 (differences of ~2e-3 per token)."""

import json
import math

import pytest
import torch
from tiny_models import write_jsonl

from smolalign.runs.metrics import read_metrics

RECORDING_REWARD = '''
import json


def token_sum(prompts, completions, completion_ids, **kw):
    """A deterministic score that rarely ties: the sum of the answer's token ids, with each call's inputs recorded."""
    scores = [float(sum(ids)) for ids in completion_ids]
    with open({log!r}, "a") as out:
        out.write(json.dumps({{"prompts": prompts, "completion_ids": completion_ids, "scores": scores}}) + "\\n")
    return scores


def token_count(prompts, completion_ids, **kw):
    """A second score, recorded the same way (to its own file): the answer's length in tokens."""
    scores = [float(len(ids)) for ids in completion_ids]
    with open({log!r} + ".count", "a") as out:
        out.write(json.dumps({{"completion_ids": completion_ids, "scores": scores}}) + "\\n")
    return scores
'''


@pytest.fixture
def online_recipe(write_recipe, tiny_dir, tmp_path):
    rows = [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1)} for i in range(16)]
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    rewards_file = tmp_path / "recording.py"
    log = tmp_path / "calls.jsonl"
    rewards_file.write_text(RECORDING_REWARD.format(log=str(log)))

    def make(rewards=None, **train) -> str:
        train = {"per_device_train_batch_size": 1, "max_new_tokens": 12, "max_length": 64, "max_steps": 2,
                 "learning_rate": 5e-2, "beta": 0.1, "logging_steps": 1, "save_strategy": "no",
                 "gradient_checkpointing": False, "seed": 0, **train}
        return str(write_recipe({
            "model": {"source": str(tiny_dir), "dtype": "float32"}, "template": {"name": "chatml"}, "method": "online_dpo",
            "data": {"sources": [{"path": str(data)}]},
            "rewards": rewards or [{"name": f"{rewards_file}:token_sum"}], "train": train}))

    make.log, make.rewards_file = log, rewards_file
    return make


def completion_logps(model, tokenizer, prompt, completion_ids) -> float:
    """Sum of log p(answer token | everything before it), one unpadded sequence; the answer ends at its first
    end-of-turn token (TRL masks what follows)."""
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    answer = completion_ids[:completion_ids.index(eos) + 1] if eos in completion_ids else completion_ids
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
    prompt_ids = prompt_ids["input_ids"]
    ids = torch.tensor([prompt_ids + answer])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1]
    return logits.log_softmax(-1).gather(1, torch.tensor(answer)[:, None]).sum().item()


@pytest.mark.parametrize("loss_type", ["sigmoid", "ipo"])
def test_logged_loss_equals_a_hand_computation(cli, online_recipe, tiny_dir, tmp_path, loss_type):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_dir = tmp_path / "run"
    code, out, err = cli("rl", online_recipe(loss_type=loss_type), "-o", run_dir)
    assert code == 0, err
    steps = [m for m in read_metrics(run_dir) if "loss" in m]
    calls = [json.loads(line) for line in online_recipe.log.read_text().splitlines()]
    # The first call is the check before loading: the reward called once on the first row with an empty answer.
    assert calls[0]["completion_ids"] == [[]] and len(calls[0]["prompts"]) == 1
    calls = calls[1:]
    assert len(steps) == 2 and len(calls) == 2
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    tokenizer.chat_template = (run_dir / "model" / "chat_template.jinja").read_text()
    start = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()  # the policy at step 1 and the reference always
    beta = 0.1
    for index, (logged, call) in enumerate(zip(steps, calls, strict=True)):
        assert len(call["completion_ids"]) == 2 and call["prompts"][0] == call["prompts"][1]
        first, second = call["scores"]
        chosen, rejected = (0, 1) if first >= second else (1, 0)  # the higher-scored answer is the chosen one
        prompt = call["prompts"][0]
        ref = [completion_logps(start, tokenizer, prompt, call["completion_ids"][i]) for i in (chosen, rejected)]
        if index == 0:  # the policy has not moved yet: its log-probs are the starting model's
            assert logged["logps/chosen"] == pytest.approx(ref[0], rel=1e-4)
            assert logged["logps/rejected"] == pytest.approx(ref[1], rel=1e-4)
        # DPO's implicit reward: beta × (policy − reference log-prob) of each answer, against our reference
        assert logged["rewards/chosen"] == pytest.approx(beta * (logged["logps/chosen"] - ref[0]), abs=1e-4)
        assert logged["rewards/rejected"] == pytest.approx(beta * (logged["logps/rejected"] - ref[1]), abs=1e-4)
        logits = (logged["logps/chosen"] - logged["logps/rejected"]) - (ref[0] - ref[1])
        if loss_type == "sigmoid":
            expected = math.log1p(math.exp(-beta * logits))  # -log σ(β · logits)
        else:
            expected = (logits - 1 / (2 * beta)) ** 2
        assert logged["loss"] == pytest.approx(expected, abs=2e-4 * max(1.0, expected))
        assert logged["objective/scores_margin"] == pytest.approx(abs(first - second))
    assert steps[1]["rewards/margins"] != 0  # after one update the policy differs from its reference
    assert (run_dir / "model" / "config.json").is_file()
    assert json.loads((run_dir / "manifest.json").read_text())["stage"] == "rl"  # the run directory's state, as GRPO's
    assert (run_dir / "recipe.yaml").is_file()


def test_reward_weights_make_the_score_that_picks_the_chosen_answer(cli, online_recipe, tmp_path):
    """Two recorded rewards with weights 0.5 and 2: the margin TRL logs between the chosen and rejected answers is
    the weighted sum's, computed here from what each reward returned."""
    rewards = [{"name": f"{online_recipe.rewards_file}:token_sum", "weight": 0.5},
               {"name": f"{online_recipe.rewards_file}:token_count", "weight": 2.0}]
    run_dir = tmp_path / "run"
    code, out, err = cli("rl", online_recipe(rewards, max_steps=2), "-o", run_dir)
    assert code == 0, err
    steps = [m for m in read_metrics(run_dir) if "loss" in m]
    sums = [json.loads(line) for line in online_recipe.log.read_text().splitlines()][1:]  # after the pre-load check
    counts = [json.loads(line) for line in online_recipe.log.with_name(online_recipe.log.name + ".count")
              .read_text().splitlines()][1:]
    assert len(steps) == len(sums) == len(counts) == 2
    for logged, by_sum, by_count in zip(steps, sums, counts, strict=True):
        assert by_sum["completion_ids"] == by_count["completion_ids"]
        totals = [0.5 * a + 2.0 * b for a, b in zip(by_sum["scores"], by_count["scores"], strict=True)]
        assert logged["objective/scores_margin"] == pytest.approx(abs(totals[0] - totals[1]))
    (a0, a1), (b0, b1) = sums[0]["scores"], counts[0]["scores"]
    assert steps[0]["objective/scores_margin"] != pytest.approx(abs(a0 + b0 - a1 - b1))  # the weights changed it


def test_registry_rewards_and_weights_train(cli, online_recipe, tmp_path):
    rewards = [{"name": "math_accuracy", "weight": 1.0},
               {"name": "soft_overlong", "weight": 0.5, "params": {"max_length": 12, "cache": 4}}]
    run_dir = tmp_path / "run"
    code, out, err = cli("rl", online_recipe(rewards, max_steps=3), "-o", run_dir)
    assert code == 0, err
    steps = [m for m in read_metrics(run_dir) if "loss" in m]
    assert len(steps) == 3 and all(math.isfinite(m["loss"]) for m in steps)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["result"]["global_step"] == 3
    assert (run_dir / "model" / "model.safetensors").is_file()
