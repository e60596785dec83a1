"""Prompt rows of rl and distillation recipes honour every documented data key: sources[].weight, eval_split and
seed (row counts computed by hand), and `messages` rows become prompts without their trailing answers."""

import json

from recipe_runs import loaded_run

from smolalign.data.prompts import recipe_prompts


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def rl_recipe(write_recipe, data: dict, method: str = "grpo"):
    extra = {"rewards": [{"name": "math_accuracy"}]} if method == "grpo" else {"teacher": {"source": "teacher"}}
    return loaded_run(str(write_recipe({"model": {"source": "tiny"}, "template": {"name": "smollm3"},
                                         "method": method, "data": data, **extra})), [], "rl")


def sources(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", [{"prompt": f"a{i}?", "solution": str(i)} for i in range(10)])
    b = jsonl(tmp_path / "b.jsonl", [{"prompt": f"b{i}?", "solution": str(i)} for i in range(4)])
    return a, b


def questions(dataset) -> list[str]:
    return [row["prompt"][-1]["content"] for row in dataset]


def test_weights_eval_split_and_seed_apply_to_rl_prompts(tmp_path, write_recipe):
    a, b = sources(tmp_path)
    data = {"sources": [{"path": a, "weight": 0.5}, {"path": b, "weight": 2.0}], "eval_split": 3, "seed": 1}
    rows = recipe_prompts(rl_recipe(write_recipe, data).recipe)
    # a: round(10 × 0.5) = 5 sampled rows; b: 2 × 4 = 8; 13 in all, 9 distinct, 3 distinct held out, and a
    # held-out b row's copy leaves training with it.
    held_out, trained = questions(rows.eval), questions(rows.train)
    assert len(held_out) == len(set(held_out)) == 3 and not set(held_out) & set(trained)
    assert len(set(held_out + trained)) == 9 and sum(q.startswith("a") for q in held_out + trained) == 5
    assert sorted(q for q in trained if q.startswith("b")) == sorted(
        [f"b{i}?" for i in range(4) if f"b{i}?" not in held_out] * 2)
    again = recipe_prompts(rl_recipe(write_recipe, data).recipe)
    assert questions(again.train) == questions(rows.train)
    other = recipe_prompts(rl_recipe(write_recipe, {**data, "seed": 2}).recipe)
    assert questions(other.eval) != questions(rows.eval) or questions(other.train) != questions(rows.train)


def test_distillation_prompts_leave_out_the_held_out_rows(tmp_path, write_recipe):
    from smolalign.stages.distill import load_distill_data

    a, _ = sources(tmp_path)
    recipe = rl_recipe(write_recipe, {"sources": [{"path": a}], "eval_split": 0.2}, method="distill")
    assert len(load_distill_data(recipe)) == 8   # 10 rows, 20% held out


def test_messages_rows_become_prompts(tmp_path, write_recipe):
    rows = [{"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}],
             "solution": "2"}]
    data = {"sources": [{"path": jsonl(tmp_path / "m.jsonl", rows)}]}
    prompts = recipe_prompts(rl_recipe(write_recipe, data).recipe).train
    assert prompts[0]["prompt"] == [{"role": "user", "content": "1+1?"}] and prompts[0]["solution"] == "2"
