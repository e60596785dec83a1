"""LoRA adapters merged into a bfloat16 base (`models.lora_merge`): peft adds the update in the base's dtype, rounding
each weight to the nearest bf16, so an update below half of bf16's spacing is lost; merged by stochastic rounding,
the update is kept in expectation. Expectations are hand-computed: an adapter whose update is the same small number c
everywhere (a third of bf16's spacing at the weights' scale) shifts the merged weights by c on average."""

import pytest


def _model(dtype):
    """A 2-layer MLP with LoRA on both layers; every weight 1.0 (bf16 spacing there: 2^-7), the adapters' update a
    constant c = spacing / 3 per weight (lora_A ones, lora_B = c / (r × scaling))."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(256, 256, bias=False), torch.nn.Linear(256, 256, bias=False))
    with torch.no_grad():
        for layer in base:
            layer.weight.fill_(1.0)
    model = get_peft_model(base.to(dtype), LoraConfig(r=4, lora_alpha=8, target_modules=["0", "1"]))
    c = 2.0 ** -7 / 3
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
                module.lora_A["default"].weight.fill_(1.0)
                module.lora_B["default"].weight.fill_(c / (4 * module.scaling["default"]))
    return model, c


def test_a_small_update_survives_the_merge_into_a_bf16_base():
    import torch

    from smolalign.models.lora_merge import merge_adapters

    peft_merged, c = _model(torch.bfloat16)
    rounded = peft_merged.merge_and_unload()
    assert all((layer.weight.float() == 1.0).all() for layer in rounded)  # peft's merge: every update lost

    model, _ = _model(torch.bfloat16)
    merged = merge_adapters(model)
    assert isinstance(merged, torch.nn.Sequential) and all(layer.weight.dtype == torch.bfloat16 for layer in merged)
    for layer in merged:
        shift = layer.weight.float() - 1.0
        assert shift.mean().item() == pytest.approx(c, rel=0.05)  # 65,536 weights: the mean is within 1%
        assert set(shift.unique().tolist()) == {0.0, 2.0 ** -7}  # each weight one of its two bf16 neighbours
    again = merge_adapters(_model(torch.bfloat16)[0])
    assert all(a.weight.equal(b.weight) for a, b in zip(merged, again, strict=True))  # seeded


def test_a_float32_base_merges_as_peft_does():
    import torch

    from smolalign.models.lora_merge import merge_adapters

    model, c = _model(torch.float32)
    merged = merge_adapters(model)
    assert all(torch.allclose(layer.weight, torch.full_like(layer.weight, 1.0 + c)) for layer in merged)


def test_a_lora_bias_is_merged_as_peft_merges_it():
    """LoRA's own bias (lora_bias: true) is merged by peft, into the base layer's bias; those layers are left to it."""
    import torch
    from peft import LoraConfig, get_peft_model

    from smolalign.models.lora_merge import merge_adapters

    def model():
        torch.manual_seed(0)
        base = torch.nn.Sequential(torch.nn.Linear(16, 16)).to(torch.bfloat16)
        adapted = get_peft_model(base, LoraConfig(r=2, target_modules=["0"], lora_bias=True))
        with torch.no_grad():
            for name, parameter in adapted.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(0, 0.5)
        return adapted

    ours, peft_merged = merge_adapters(model()), model().merge_and_unload()
    assert ours[0].bias.equal(peft_merged[0].bias) and ours[0].weight.equal(peft_merged[0].weight)
