"""What the check before loading says about sequence lengths the recipe allows but the model or the loss would
treat silently: past the positions the model was built for (max_position_embeddings: attention extrapolates without
an error), and, for online DPO, prompts whose start is cut for the loss though the policy answered all of them."""

import json
import shutil

import pytest
from tiny_models import addition_prompts, grpo_recipe, write_jsonl

POSITIONS = 64
"""max_position_embeddings of the copy of the tiny model these tests train."""


@pytest.fixture
def short_model(tiny_dir, tmp_path):
    """The tiny model with a config that says it was built for POSITIONS positions."""
    directory = tmp_path / "short"
    shutil.copytree(tiny_dir, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "max_position_embeddings": POSITIONS}))
    return directory


def chatml_prompt_lengths(tiny_dir, prompts: list[str]) -> list[int]:
    """The prompts rendered by hand in ChatML, with the generation prompt, in the tiny tokenizer's tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    return [len(tokenizer(f"<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
                ["input_ids"]) for p in prompts]


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def test_a_max_length_past_the_models_positions_is_warned_about(cli, write_recipe, short_model, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", [{"messages": [{"role": "user", "content": "hi"},
                                                               {"role": "assistant", "content": "hello"}]}] * 4)
    recipe = str(write_recipe({"model": {"source": str(short_model)}, "template": {"name": "chatml"},
                               "data": {"sources": [{"path": str(data)}]}, "train": {"max_length": POSITIONS + 1}}))
    code, _, err = cli("sft", recipe, "--dry-run")
    assert code == 0, err
    assert warnings(err) == [f"warning: train.max_length {POSITIONS + 1} is beyond the {POSITIONS} positions the model "
                             "was built for (max_position_embeddings): positions past them were never trained, and "
                             "attention extrapolates to them without an error; lower it, or extend the model's "
                             "context first (rope_scaling in its config)"]
    code, _, err = cli("sft", recipe, "--dry-run", "--set", f"train.max_length={POSITIONS}")
    assert code == 0 and warnings(err) == [], err


def test_grpo_prompts_and_answers_past_the_models_positions_are_warned_about(cli, write_recipe, short_model,
                                                                             tiny_dir, tmp_path):
    rows = addition_prompts(4)
    longest = max(chatml_prompt_lengths(tiny_dir, [row["prompt"] for row in rows]))
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    answer = POSITIONS - longest + 1
    recipe = str(write_recipe(grpo_recipe(short_model, data, "chatml", max_completion_length=answer)))
    code, _, err = cli("rl", recipe, "--dry-run")
    assert code == 0, err
    assert warnings(err) == [f"warning: the longest checked prompt ({longest} tokens) + train.max_completion_length "
                             f"{answer} is beyond the {POSITIONS} positions the model was built for "
                             "(max_position_embeddings): positions past them were never trained, and attention "
                             "extrapolates to them without an error; lower it, or extend the model's context first "
                             "(rope_scaling in its config)"]
    code, _, err = cli("rl", recipe, "--dry-run", "--set", f"train.max_completion_length={answer - 1}")
    assert code == 0 and warnings(err) == [], err


def test_online_dpo_prompts_cut_for_the_loss_are_warned_about(cli, write_recipe, tiny_dir, tmp_path):
    rows = addition_prompts(4)
    longest = max(chatml_prompt_lengths(tiny_dir, [row["prompt"] for row in rows]))
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    raw = {"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "online_dpo",
           "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
           "train": {"max_new_tokens": 8, "max_length": longest + 7, "per_device_train_batch_size": 2,
                     "max_steps": 1}}
    recipe = str(write_recipe(raw))
    code, _, err = cli("rl", recipe, "--dry-run")
    assert code == 0, err
    assert warnings(err) == [f"warning: the longest checked prompt ({longest} tokens) + train.max_new_tokens 8 is over "
                             f"train.max_length {longest + 7}: a prompt that long has its start cut for the loss (up "
                             "to 1 token(s)), though the policy answered the whole of it; raise train.max_length"]
    code, _, err = cli("rl", recipe, "--dry-run", "--set", f"train.max_length={longest + 8}")
    assert code == 0 and warnings(err) == [], err
