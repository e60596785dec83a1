"""Training moves the signal it optimizes, on tiny models with a learnable target: GRPO raises its mean training
reward, APO-zero and DPO raise the implicit reward margin and the chosen-over-rejected log-probability on held-out
pairs, on-policy distillation lowers the student-teacher divergence on held-out prompts. Every run is compared with
the same run at learning rate 0 (the control), whose weights must stay those it started from, so a gradient that
never reaches the weights fails these tests. The held-out measurements are computed here with transformers, not
read from the trainer's logs. Run: make test-slow (OMP_NUM_THREADS=2)."""

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import pair_rows, sft_tiny, write_jsonl

from smolalign.runs.metrics import read_metrics

pytestmark = pytest.mark.slow

HEAD = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
"""ChatML (chat_templates/chatml.jinja), the template these runs train with."""

TARGET_SHARE = '''
TARGETS = set({targets})


def target_share(completions, completion_ids, **kw):
    """The share of completion tokens that are digits: a reward a tiny model can reach, dense enough that most of
    GRPO's groups differ from the start (one token, ~1/512 of a random model's, left the outcome to a few samples)."""
    return [sum(i in TARGETS for i in ids) / max(len(ids), 1) for ids in completion_ids]
'''


def weights(model_dir) -> dict[str, torch.Tensor]:
    return load_file(model_dir / "model.safetensors")


def moved(run_dir, start_dir) -> float:
    """The largest change of any weight from the model the run started from."""
    before, after = weights(start_dir), weights(run_dir / "model")
    return max((after[name].float() - before[name].float()).abs().max().item() for name in before)


def train(cli, recipe, run_dir, rate):
    code, _, err = cli("rl" if "rewards" in recipe or "teacher" in recipe else "po", recipe["path"], "-o", run_dir,
                       "--set", f"train.learning_rate={rate}")
    assert code == 0, err
    return run_dir


@pytest.fixture
def recipe_file(write_recipe):
    def make(mapping: dict, name: str) -> dict:
        return {**mapping, "path": str(write_recipe(mapping, name))}

    return make


def test_grpo_raises_its_training_reward(cli, recipe_file, tiny_dir, tiny_tokenizer, tmp_path):
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(32)])
    rewards = tmp_path / "share.py"
    digits = tiny_tokenizer.convert_tokens_to_ids(list("0123456789"))
    assert None not in digits and tiny_tokenizer.unk_token_id not in digits  # ten tokens of the tiny vocabulary
    rewards.write_text(TARGET_SHARE.format(targets=sorted(digits)))
    recipe = recipe_file({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "grpo",
        "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": f"{rewards}:target_share"}],
        "train": {"num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 16,
                  "max_steps": 24, "learning_rate": 1e-2, "logging_steps": 1, "save_strategy": "no",
                  "gradient_checkpointing": False, "seed": 0}}, "grpo.yaml")
    runs = {rate: train(cli, recipe, tmp_path / f"lr{rate}", rate) for rate in (1e-2, 0.0)}
    reward = {rate: torch.tensor([m["reward"] for m in read_metrics(run) if "reward" in m])
              for rate, run in runs.items()}
    assert len(reward[0.0]) == len(reward[1e-2]) == 24
    noise = reward[0.0].std().item()  # the control's step-to-step spread: sampling noise alone
    trained, control = reward[1e-2][-6:].mean().item(), reward[0.0][-6:].mean().item()
    print(f"GRPO mean reward, last 6 steps: trained {trained:.3f}, control {control:.3f}, noise (sd) {noise:.3f}")
    assert trained > control + max(0.03, 5 * noise)
    assert trained > reward[1e-2][:6].mean().item() + 0.03  # and above where the trained run itself started
    assert moved(runs[1e-2], tiny_dir) > 0 and moved(runs[0.0], tiny_dir) == 0


def completion_logps(model_dir, rows: list[dict]) -> torch.Tensor:
    """(rows, 2): log p(chosen) and log p(rejected) given the prompt, each answer closed by <|im_end|>."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModelForCausalLM.from_pretrained(model_dir)
    out = torch.zeros(len(rows), 2)
    with torch.no_grad():
        for i, row in enumerate(rows):
            head = HEAD.format(row["prompt"][0]["content"])
            start = len(tokenizer(head, add_special_tokens=False)["input_ids"])
            for j, side in enumerate(("chosen", "rejected")):
                text = head + row[side][0]["content"] + "<|im_end|>"
                ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
                logps = torch.log_softmax(model(ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])
                out[i, j] = logps[start - 1:].sum()
    return out


@pytest.mark.parametrize("method", ["apo_zero", "dpo"])
def test_preference_optimization_raises_the_held_out_margin(cli, recipe_file, tiny_dir, tmp_path, method):
    train_rows = pair_rows(32, seed=0)
    seen = {row["prompt"][0]["content"] for row in train_rows}
    held_out = [row for row in pair_rows(40, seed=1) if row["prompt"][0]["content"] not in seen][:16]
    data = write_jsonl(tmp_path / "pairs.jsonl", train_rows)
    beta = 0.1
    recipe = recipe_file({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": method,
        "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 160, "per_device_train_batch_size": 4, "max_steps": 24, "learning_rate": 5e-3,
                  "logging_steps": 4, "save_strategy": "no", "gradient_checkpointing": False, "beta": beta,
                  "seed": 0}}, "po.yaml")
    runs = {rate: train(cli, recipe, tmp_path / f"lr{rate}", rate) for rate in (5e-3, 0.0)}
    reference = completion_logps(tiny_dir, held_out)
    margin, gap, chosen_first = {}, {}, {}
    for rate, run in runs.items():
        policy = completion_logps(run / "model", held_out)
        ratios = policy - reference  # log pi/ref of chosen and of rejected
        margin[rate] = (beta * (ratios[:, 0] - ratios[:, 1])).mean().item()
        gap[rate] = (policy[:, 0] - policy[:, 1]).mean().item()  # how far chosen is ranked above rejected, nats
        chosen_first[rate] = (policy[:, 0] > policy[:, 1]).float().mean().item()
    print(f"{method} held-out ({len(held_out)} pairs): margin trained {margin[5e-3]:.2f}, control {margin[0.0]:.2f}; "
          f"log p(chosen) - log p(rejected) trained {gap[5e-3]:.1f}, control {gap[0.0]:.1f}; chosen ranked first "
          f"trained {chosen_first[5e-3]:.2f}, control {chosen_first[0.0]:.2f}")
    assert margin[0.0] == pytest.approx(0.0, abs=1e-4)  # the control is its own reference
    assert margin[5e-3] > margin[0.0] + 1.0
    # The random model already prefers the shorter chosen answer; training must widen that gap, and keep every pair
    # in order.
    assert gap[5e-3] > gap[0.0] + 10 and chosen_first[5e-3] == 1.0
    assert moved(runs[5e-3], tiny_dir) > 0 and moved(runs[0.0], tiny_dir) == 0


def divergence(student_dir, teacher_dir, prompts: list[str], tokens: int = 8) -> float:
    """Mean per-token KL(teacher || student) over the teacher's greedy answers to `prompts` (same tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(teacher_dir)
    teacher = AutoModelForCausalLM.from_pretrained(teacher_dir)
    student = AutoModelForCausalLM.from_pretrained(student_dir)
    total, count = 0.0, 0
    with torch.no_grad():
        for prompt in prompts:
            ids = tokenizer(HEAD.format(prompt), add_special_tokens=False, return_tensors="pt")["input_ids"]
            full = teacher.generate(ids, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
            positions = slice(ids.shape[1] - 1, full.shape[1] - 1)  # the logits that predict the answer's tokens
            p = torch.log_softmax(teacher(full).logits[0, positions].float(), -1)
            q = torch.log_softmax(student(full).logits[0, positions].float(), -1)
            total += (p.exp() * (p - q)).sum().item()
            count += p.shape[0]
    return total / count


def test_on_policy_distillation_lowers_the_held_out_divergence(cli, recipe_file, tiny_dir, tmp_path):
    answer = "the answer is yes."
    (tmp_path / "teacher").mkdir()
    teacher = sft_tiny(tiny_dir, tmp_path / "teacher",
                       [{"messages": [{"role": "user", "content": f"what is {i} plus {i + 1}"},
                                      {"role": "assistant", "content": answer}]} for i in range(32)], steps=30)
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(16)])
    recipe = recipe_file({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "distill",
        "teacher": {"source": str(teacher)}, "data": {"sources": [{"path": str(data)}]},
        "train": {"per_device_train_batch_size": 4, "max_completion_length": 16, "max_steps": 20,
                  "learning_rate": 5e-3, "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False,
                  "seed": 0}}, "distill.yaml")
    runs = {rate: train(cli, recipe, tmp_path / f"lr{rate}", rate) for rate in (5e-3, 0.0)}
    held_out = [f"what is {i} plus {i + 3}" for i in range(100, 108)]
    kl = {rate: divergence(run / "model", teacher, held_out) for rate, run in runs.items()}
    start = divergence(tiny_dir, teacher, held_out)
    print(f"distill held-out KL(teacher||student): trained {kl[5e-3]:.3f}, control {kl[0.0]:.3f}, start {start:.3f}")
    assert kl[0.0] == pytest.approx(start, rel=1e-4)
    assert kl[5e-3] < 0.5 * kl[0.0]
    assert moved(runs[5e-3], tiny_dir) > 0 and moved(runs[0.0], tiny_dir) == 0
