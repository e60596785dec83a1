"""A `reference: policy` copy of a pretraining checkpoint is loaded from the same source as the policy, with the
policy's model.tokenizer (the checkpoint carries none)."""

import pytest
import torch
from nanotron_writer import write_nanotron
from tiny_models import pair_rows, write_jsonl


@pytest.fixture(scope="module")
def nanotron_run(tiny_dir, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    run = tmp_path_factory.mktemp("pretrain") / "tiny-run"
    write_nanotron(model, run, tp=1, step=10)
    return run, model


def test_policy_reference_of_a_checkpoint_keeps_its_tokenizer(write_recipe, nanotron_run, tiny_dir, tmp_path):
    from smolalign.hardware import detect_hardware
    from smolalign.models.load import load_tokenizer
    from smolalign.recipe.validate import load_recipe
    from smolalign.stages.po import load_reference

    run, original = nanotron_run
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(4))
    recipe = load_recipe(str(write_recipe({
        "model": {"source": str(run), "tokenizer": str(tiny_dir)}, "template": {"name": "chatml"},
        "method": "dpo", "reference": "policy", "data": {"sources": [{"path": str(data)}]}})), [], "po")
    tokenizer, _ = load_tokenizer(recipe.model, recipe.template.name)
    reference = load_reference(recipe, "float32", detect_hardware(), tokenizer)
    assert torch.equal(reference.model.norm.weight, original.model.norm.weight)
    assert not any(p.requires_grad for p in reference.parameters())
