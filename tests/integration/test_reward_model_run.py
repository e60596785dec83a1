"""`smolalign po` with `method: reward` end to end on a tiny model: the saved reward model, scored by a direct
forward pass of transformers' own classifier on the rendered conversations, ranks chosen over rejected better than
the same run at learning rate 0, and loads with its head, tokenizer and chat template."""

import json

import pytest
import torch
from tiny_models import pair_rows, write_jsonl


@pytest.fixture
def reward_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(32))

    def make(**train) -> str:
        train = {"max_length": 160, "per_device_train_batch_size": 4, "max_steps": 8, "learning_rate": 1e-3,
                 "logging_steps": 2, "save_strategy": "no", "gradient_checkpointing": False, "seed": 0, **train}
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                 "method": "reward", "data": {"sources": [{"path": str(data)}]}, "train": train},
                                name=f"reward-{train['learning_rate']}.yaml"))

    make.rows = pair_rows(32)
    return make


def scores(model_dir, rows) -> torch.Tensor:
    """(chosen score, rejected score) per pair: the saved classifier on prompt + answer rendered by its own
    tokenizer's chat template, one conversation at a time (no padding)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.no_grad():
        for row in rows:
            pair = []
            for side in ("chosen", "rejected"):
                ids = tokenizer.apply_chat_template(row["prompt"] + row[side], tokenize=True, return_dict=True,
                                                    return_tensors="pt")["input_ids"]
                pair.append(model(input_ids=ids).logits[0, 0].item())
            out.append(pair)
    return torch.tensor(out)


def test_reward_model_ranks_chosen_above_rejected(cli, reward_recipe, tmp_path):
    trained, control = tmp_path / "trained", tmp_path / "control"
    for recipe, run_dir in ((reward_recipe(), trained), (reward_recipe(learning_rate=0.0), control)):
        code, _, err = cli("po", recipe, "-o", run_dir)
        assert code == 0, err
    model_dir = trained / "model"
    config = json.loads((model_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"] and len(config["id2label"]) == 1
    assert (model_dir / "chat_template.jinja").is_file()  # a model: reward renders with the template it learned on

    after, before = scores(model_dir, reward_recipe.rows), scores(control / "model", reward_recipe.rows)
    margin_after = (after[:, 0] - after[:, 1]).mean().item()
    margin_before = (before[:, 0] - before[:, 1]).mean().item()
    accuracy_after = (after[:, 0] > after[:, 1]).float().mean().item()
    accuracy_before = (before[:, 0] > before[:, 1]).float().mean().item()
    assert margin_after > margin_before + 0.5, (margin_before, margin_after)
    assert accuracy_after >= 0.9 and accuracy_after > accuracy_before
