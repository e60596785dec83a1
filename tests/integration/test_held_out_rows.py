"""`data.eval_split` keeps rows out of training to evaluate them. When nothing will (train.eval_strategy "no", TRL's
default; the distillation trainers, given no held-out split), the check before loading says so: the rows were lost to
training without a word. With an eval_strategy, the held-out rows are evaluated (eval_loss is logged)."""

import json

from tiny_models import addition_prompts, chat_rows, write_jsonl


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def sft_recipe(write_recipe, tiny_dir, tmp_path, **train):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(12))
    return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                             "data": {"sources": [{"path": str(data)}], "eval_split": 4},
                             "train": {"max_length": 128, "max_steps": 2, "per_device_train_batch_size": 2,
                                       "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False,
                                       **train}}))


def test_held_out_rows_nothing_evaluates_are_warned_about(cli, write_recipe, tiny_dir, tmp_path):
    code, _, err = cli("sft", sft_recipe(write_recipe, tiny_dir, tmp_path), "--dry-run")
    assert code == 0, err
    assert [w for w in warnings(err) if "data.eval_split 4" in w and 'eval_strategy is "no"' in w], err


def test_held_out_rows_are_evaluated_with_an_eval_strategy(cli, write_recipe, tiny_dir, tmp_path):
    recipe = sft_recipe(write_recipe, tiny_dir, tmp_path, eval_strategy="steps", eval_steps=1)
    code, _, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert not [w for w in warnings(err) if "data.eval_split" in w], err
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if line]
    assert [row["step"] for row in rows if "eval_loss" in row] == [1, 2]


def test_a_distillation_recipe_with_held_out_rows_is_warned_about(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(12))
    recipe = write_recipe({"stage": "rl", "method": "distill", "model": {"source": str(tiny_dir)},
                           "teacher": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                           "data": {"sources": [{"path": str(data)}], "eval_split": 4},
                           "train": {"max_completion_length": 8, "max_steps": 1, "per_device_train_batch_size": 2}})
    code, _, err = cli("rl", recipe, "--dry-run")
    assert code == 0, err
    assert [w for w in warnings(err) if "data.eval_split 4" in w and "distillation" in w], err
