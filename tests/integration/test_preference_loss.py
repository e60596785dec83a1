"""The DPO sigmoid and APO-zero losses of one hand-built batch, against values computed here by hand.

The policy is a tiny model whose LM head is zero, so every token has probability 1/V and an answer of n tokens
has log-probability -n·ln V exactly; the reference log-probabilities are given in the batch. The trainer is the one
`smolalign po` builds for the recipe's method.
"""

import math

import pytest
import torch


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def hand_dpo_sigmoid(policy: tuple, reference: tuple, beta: float) -> float:
    (pc, pr), (rc, rr) = policy, reference
    return -math.log(sigmoid(beta * ((pc - rc) - (pr - rr))))


def hand_apo_zero(policy: tuple, reference: tuple, beta: float) -> float:
    """APO-zero (D'Oosterlinck et al. 2024): push the chosen likelihood up and the rejected down, each on its own."""
    (pc, pr), (rc, rr) = policy, reference
    return (1 - sigmoid(beta * (pc - rc))) + sigmoid(beta * (pr - rr))


@pytest.fixture
def uniform_trainer(tiny_dir, tiny_tokenizer, tmp_path, write_recipe):
    from recipe_runs import loaded_run
    from tiny_models import pair_rows, write_jsonl
    from transformers import AutoModelForCausalLM

    from smolalign.data.prepare_preference import prepare_preference_data
    from smolalign.hardware import detect_hardware
    from smolalign.models.load import load_tokenizer
    from smolalign.stages.po import build_trainer, po_config

    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(4))

    def make(method: str, beta: float):
        path = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": method,
                             "reference": "precomputed", "data": {"sources": [{"path": str(data)}]},
                             "train": {"beta": beta, "max_length": 128, "per_device_train_batch_size": 2,
                                       "gradient_checkpointing": False}})
        recipe = loaded_run(str(path), [], "po")
        tokenizer, template = load_tokenizer(recipe.recipe.model, recipe.recipe.template.name)
        model = AutoModelForCausalLM.from_pretrained(tiny_dir)
        with torch.no_grad():
            model.get_output_embeddings().weight.zero_()
        prepared = prepare_preference_data(recipe, tokenizer, template)
        hardware = detect_hardware()
        trainer = build_trainer(recipe.method_spec.trainer(), recipe, model, None, tokenizer, prepared,
                                po_config(recipe, hardware, tmp_path / "run"), tmp_path / "run")
        return trainer, len(tokenizer)

    return make


def rows_with_reference(trainer, reference: list[tuple[float, float]]):
    rows = [dict(trainer.train_dataset[i]) for i in range(len(reference))]
    for row, (rc, rr) in zip(rows, reference, strict=True):
        row["ref_chosen_logps"], row["ref_rejected_logps"] = rc, rr
    return rows


@pytest.mark.parametrize(("method", "expected"), [("dpo", hand_dpo_sigmoid), ("apo_zero", hand_apo_zero)])
def test_loss_of_a_hand_built_batch(uniform_trainer, method, expected):
    beta = 0.25
    trainer, vocab = uniform_trainer(method, beta)
    reference = [(-30.0, -45.0), (-80.0, -20.0)]
    rows = rows_with_reference(trainer, reference)
    batch = trainer.data_collator(rows)
    trainer.model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, batch).item()
    per_row = []
    for row, ref in zip(rows, reference, strict=True):
        policy = (-len(row["chosen_ids"]) * math.log(vocab), -len(row["rejected_ids"]) * math.log(vocab))
        per_row.append(expected(policy, ref, beta))
    assert loss == pytest.approx(sum(per_row) / len(per_row), rel=1e-5)
