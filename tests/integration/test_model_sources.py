"""Model sources are classified once, when the recipe is validated, and carried: the stage's checks, its plan and
its loading reuse that result. A `reference: policy` copy of a pretraining checkpoint is loaded from the same source
as the policy, with the policy's model.tokenizer (the checkpoint carries none)."""

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
    from recipe_runs import loaded_run

    from smolalign.hardware import detect_hardware
    from smolalign.models.load import load_tokenizer
    from smolalign.stages.po import load_reference

    run, original = nanotron_run
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(4))
    recipe = loaded_run(str(write_recipe({
        "model": {"source": str(run), "tokenizer": str(tiny_dir)}, "template": {"name": "chatml"},
        "method": "dpo", "reference": "policy", "data": {"sources": [{"path": str(data)}]}})), [], "po")
    tokenizer, _ = load_tokenizer(recipe.recipe.model, recipe.recipe.template.name)
    reference = load_reference(recipe, "float32", detect_hardware(), tokenizer)
    assert torch.equal(reference.model.norm.weight, original.model.norm.weight)
    assert not any(p.requires_grad for p in reference.parameters())


def test_a_source_is_classified_once_from_validation_to_loading(write_recipe, nanotron_run, tiny_dir, tmp_path,
                                                                 monkeypatch):
    from recipe_runs import loaded_run

    import smolalign.checkpoints.detect
    import smolalign.models.sources as sources
    from smolalign.models.load import load_tokenizer, local_dir
    from smolalign.models.sources import resolve_source
    from smolalign.stages import po

    run, _ = nanotron_run
    local_dir(resolve_source(str(run), tokenizer=str(tiny_dir)))  # converted into the cache beforehand
    classified, detected = [], []
    classify, detect = sources._resolve, smolalign.checkpoints.detect.detect
    monkeypatch.setattr(sources, "_resolve", lambda *a: classified.append(a[0]) or classify(*a))
    for module in (smolalign.checkpoints.detect, sources):  # where it is defined and where sources are classified
        monkeypatch.setattr(module, "detect", lambda *a: detected.append(a[0]) or detect(*a))
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(4))
    recipe = loaded_run(str(write_recipe({
        "model": {"source": str(run), "tokenizer": str(tiny_dir)}, "template": {"name": "chatml"},
        "method": "dpo", "reference": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]}})),
        [], "po")
    after_validation = (list(classified), len(detected))
    po.check_before_loading(recipe)
    load_tokenizer(recipe.recipe.model, recipe.recipe.template.name, recipe.source())
    assert sorted(classified) == sorted([str(run), str(tiny_dir)])  # each source once, both at validation
    assert (classified, len(detected)) == after_validation
    assert recipe.source("reference").kind == "dir" and recipe.source().kind == "checkpoint"
