"""The GRPO plan's step count is the number of optimizer steps GRPOTrainer really runs: each step draws prompt
groups of num_generations completions, generation batches span steps_per_generation steps and are reused
num_iterations times, and an incomplete last generation batch is dropped. Each case runs `smolalign rl` on a tiny
model and compares the settings' count with the trainer's own global_step (and with the count worked out by hand)."""

import json

import pytest
from tiny_models import write_jsonl

from smolalign.runs.rundir import MANIFEST_FILE

PROMPTS = 7

CASES = [
    # 2 prompts per step (2 per device × 2 accumulation / 2 generations): 7 prompts -> 3 steps, 2 epochs -> 6
    ({"num_generations": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2,
      "num_train_epochs": 2}, 6),
    # generation batches of 8 completions (2 prompts × 4) feed 4 steps each: 3 batches -> 12 steps
    ({"num_generations": 4, "per_device_train_batch_size": 2, "steps_per_generation": 4, "num_train_epochs": 1}, 12),
    # one prompt per step, each generation batch used twice: 7 × 2 = 14 steps
    ({"num_generations": 2, "per_device_train_batch_size": 2, "num_iterations": 2, "num_train_epochs": 1}, 14),
    # half an epoch of case 1: ceil(0.5 × 3) = 2
    ({"num_generations": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2,
      "num_train_epochs": 0.5}, 2),
    # max_steps wins over epochs
    ({"num_generations": 2, "per_device_train_batch_size": 2, "max_steps": 3, "num_train_epochs": 5}, 3),
]


@pytest.mark.parametrize(("train", "by_hand"), CASES)
def test_planned_grpo_steps_are_the_steps_trl_runs(cli, write_recipe, tiny_dir, tmp_path, train, by_hand):
    from recipe_runs import loaded_run

    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus 1"} for i in range(PROMPTS)])
    recipe = str(write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "grpo",
        "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "think_format"}],
        "train": {"max_completion_length": 4, "save_strategy": "no", "logging_steps": 1,
                  "gradient_checkpointing": False, **train}}))
    planned = loaded_run(recipe, [], "rl").settings.optimizer_steps(PROMPTS)
    run_dir = tmp_path / "run"
    code, _, err = cli("rl", recipe, "-o", run_dir)
    assert code == 0, err
    ran = json.loads((run_dir / MANIFEST_FILE).read_text())["result"]["global_step"]
    assert ran == by_hand
    assert planned == ran
