"""On-policy training with a real vLLM engine colocated in the trainer's process (vLLM's CPU build), from the CLI:
every time TRL syncs the policy into the engine, the engine's log-probabilities of a fixed completion equal the
trainer's own (float32 both, within 1e-4), and after optimizer steps they differ from the starting model's: the
engine generates with the current policy. GRPO keeps TRL's importance-sampling correction between the engine's and
the trainer's log-probs on, and logs it. A run whose weights never reach the engine fails these checks.

The recipes pin `model.dtype: float32`: these comparisons are exact to float32 rounding, and on a CPU with bf16 the default
would compute in bf16 (differences of ~2e-3 per token)."""

import os

import pytest
import torch
from tiny_models import cached_model_info, write_jsonl

from smolalign.launch import PROCESS_VARIABLES
from smolalign.runs.metrics import read_metrics

TOLERANCE = 1e-4
"""Engine against trainer log-probs per token: both float32 on the CPU (measured about 1e-6)."""

REWARD = '''
def spread(completions, completion_ids, **kw):
    """Differs between the completions of a group, so that every step has advantages and a gradient."""
    return [(sum(ids) % 97) / 97 for ids in completion_ids]
'''


def log_probs(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return logits.log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def engine_log_probs(llm, ids: list[int]) -> torch.Tensor:
    from vllm import SamplingParams

    output = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0,
                                                                      temperature=1.0), use_tqdm=False)[0]
    return torch.tensor([entry[token].logprob for entry, token in zip(output.prompt_logprobs[1:], ids[1:],
                                                                       strict=True)])


@pytest.fixture
def fixed_sequence(vllm_tiny_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(vllm_tiny_dir)
    prompt = "<|im_start|>user\nwhat is 3 plus 4<|im_end|>\n<|im_start|>assistant\n"
    return tokenizer(prompt + "3 plus 4 is 7.<|im_end|>", add_special_tokens=False)["input_ids"]


@pytest.fixture
def syncs(monkeypatch, fixed_sequence):
    """At every weight sync TRL makes (after it): the engine's and the trainer's log-probs of the fixed sequence."""
    from trl.experimental.online_dpo.online_dpo_trainer import OnlineDPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration

    seen = []

    def record(llm, model):
        model_was_training = model.training
        model.eval()
        seen.append({"engine": engine_log_probs(llm, fixed_sequence), "trainer": log_probs(model, fixed_sequence)})
        model.train(model_was_training)

    original_sync = VLLMGeneration.sync_weights

    def sync_weights(self):
        original_sync(self)
        if self.mode == "colocate":
            record(self.llm, self.model)

    original_move = OnlineDPOTrainer._move_model_to_vllm

    def move_model_to_vllm(self):
        original_move(self)
        record(self.llm, self.model)

    monkeypatch.setattr(VLLMGeneration, "sync_weights", sync_weights)
    monkeypatch.setattr(OnlineDPOTrainer, "_move_model_to_vllm", move_model_to_vllm)
    return seen


def assert_engine_follows_the_policy(seen, start: torch.Tensor) -> None:
    assert len(seen) >= 2, f"{len(seen)} weight sync(s)"
    for index, sync in enumerate(seen):
        gap = (sync["engine"] - sync["trainer"]).abs().max().item()
        assert gap <= TOLERANCE, f"sync {index}: engine and trainer log-probs differ by {gap}"
    moved = (seen[-1]["engine"] - start).abs().max().item()
    assert moved > 1e-3, f"the engine's log-probs moved only {moved} from the starting model's"


def assert_checked_by_smolalign(run_dir) -> None:
    """smolalign's own check of every sync (stages/weight_sync.py) logged each step, and each one verified."""
    trained = [m for m in read_metrics(run_dir) if "loss" in m]
    assert len(trained) == 3
    assert all(m["sync/verified"] == 1 and m["sync/engine_gap"] <= TOLERANCE for m in trained), trained


def rl_recipe(write_recipe, model_dir, tmp_path, method: str, train: dict) -> str:
    (tmp_path / "reward.py").write_text(REWARD)
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(16)])
    return str(write_recipe({
        "model": {"source": str(model_dir), "dtype": "float32"}, "template": {"name": "chatml"}, "method": method,
        "data": {"sources": [{"path": str(prompts)}]}, "rewards": [{"name": f"{tmp_path / 'reward.py'}:spread"}],
        "generation": {"backend": "vllm_colocate"},
        "train": {"max_steps": 3, "learning_rate": 5e-2, "logging_steps": 1, "save_strategy": "no",
                  "gradient_checkpointing": False, **train}}))


def distill_recipe(write_recipe, model_dir, tmp_path) -> str:
    """On-policy distillation of `model_dir` from a teacher of the same tokenizer (another random model), with vLLM
    colocated."""
    from tiny_models import build_model
    from transformers import AutoTokenizer

    teacher = tmp_path / "teacher"
    teacher.mkdir()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.save_pretrained(teacher)
    build_model(teacher, tokenizer, seed=7, heads=2, kv_heads=1)
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(16)])
    return str(write_recipe({
        "model": {"source": str(model_dir), "dtype": "float32"}, "template": {"name": "chatml"}, "method": "distill",
        "teacher": {"source": str(teacher)}, "data": {"sources": [{"path": str(prompts)}]},
        "generation": {"backend": "vllm_colocate"},
        "train": {"max_steps": 3, "learning_rate": 5e-2, "logging_steps": 1, "save_strategy": "no",
                  "gradient_checkpointing": False, "per_device_train_batch_size": 4, "max_completion_length": 8}}))


def test_grpo_generates_with_the_current_policy(cli_fd, write_recipe, vllm_tiny_dir, tmp_path, syncs,
                                                fixed_sequence, empty_inspection_cache):
    from transformers import AutoModelForCausalLM

    recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, "grpo",
                       {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 8})
    launcher_variables = {name: os.environ.get(name) for name in PROCESS_VARIABLES}
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err[-3000:]
    inspections, started = empty_inspection_cache  # the engine's model class inspected in this process
    assert started == [] and cached_model_info(inspections)["modelinfo"]["architecture"] == "LlamaForCausalLM"
    # TRL's colocated engine wrote RANK, WORLD_SIZE, MASTER_PORT...: a process started from this one afterwards
    # (a sweep's next cell) would otherwise take itself for a launched rank and wait on that port.
    assert {name: os.environ.get(name) for name in PROCESS_VARIABLES} == launcher_variables
    start = log_probs(AutoModelForCausalLM.from_pretrained(vllm_tiny_dir).eval(), fixed_sequence)
    assert_engine_follows_the_policy(syncs, start)
    # TRL's correction between the engine's sampling log-probs and the trainer's, on and logged every step
    logged = [m for m in read_metrics(tmp_path / "run") if "loss" in m]
    assert len(logged) == 3
    for entry in logged:
        assert entry["sampling/importance_sampling_ratio/mean"] == pytest.approx(1.0, abs=1e-3)
        assert entry["sampling/sampling_logp_difference/max"] <= TOLERANCE


def test_online_dpo_generates_with_the_current_policy(cli_fd, write_recipe, vllm_tiny_dir, tmp_path, syncs,
                                                      fixed_sequence):
    from transformers import AutoModelForCausalLM

    recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, "online_dpo",
                       {"per_device_train_batch_size": 2, "max_new_tokens": 8, "max_length": 64, "beta": 0.1})
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err[-3000:]
    start = log_probs(AutoModelForCausalLM.from_pretrained(vllm_tiny_dir).eval(), fixed_sequence)
    assert_engine_follows_the_policy(syncs, start)
    assert_checked_by_smolalign(tmp_path / "run")


def test_distillation_samples_with_the_current_student(cli_fd, write_recipe, vllm_tiny_dir, tmp_path, syncs,
                                                        fixed_sequence):
    from transformers import AutoModelForCausalLM

    recipe = distill_recipe(write_recipe, vllm_tiny_dir, tmp_path)
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err[-3000:]
    start = log_probs(AutoModelForCausalLM.from_pretrained(vllm_tiny_dir).eval(), fixed_sequence)
    assert_engine_follows_the_policy(syncs, start)
    assert_checked_by_smolalign(tmp_path / "run")
