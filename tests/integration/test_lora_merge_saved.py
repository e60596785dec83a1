"""A LoRA model over a bfloat16 base, saved as a run saves its `model/` (`models.load.save_for_inference`): the merged
weights on disk hold the adapter's update in expectation. The update is a constant c = 1e-5 per weight, below half of
bf16's spacing for every weight above 2.6e-3 in magnitude (most of the tiny model's): rounded to the nearest, as peft
merges, those weights would come back unchanged and the mean shift would be a small part of c."""

import pytest


def test_a_lora_run_over_a_bf16_base_saves_its_small_updates(tiny_dir, tiny_tokenizer, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from smolalign.models.load import save_for_inference

    c = 1e-5
    base = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.bfloat16)
    before = {k: v.float().clone() for k, v in base.state_dict().items() if "q_proj" in k}
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
                module.lora_A["default"].weight.fill_(1.0)
                module.lora_B["default"].weight.fill_(c / (4 * module.scaling["default"]))
    save_for_inference(model, tiny_tokenizer, tmp_path / "model")
    saved = {k: v for f in (tmp_path / "model").glob("*.safetensors") for k, v in load_file(f).items()}
    assert before.keys() <= saved.keys()
    for key, weight in before.items():
        assert saved[key].dtype == torch.bfloat16
        lost = (weight.abs() > 2.6e-3).float().mean().item()
        assert lost > 0.5, lost  # most weights are too large for c to move them by rounding to the nearest
        assert (saved[key].float() - weight).mean().item() == pytest.approx(c, rel=0.1), key
