"""The unit tier's guard (tests/unit/conftest.py) refuses every way of building a model or reading weights, even
from code that catches every Exception, and leaves everything working again once the block ends."""

import pytest
import torch


def swallowing(call):
    """Code under test that hides its failures."""
    try:
        call()
    except Exception:  # noqa: BLE001 - the point: the refusal must get through this
        pass


def ways_in(tiny_dir, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load, load_file, save, save_file
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaForCausalLM

    config = AutoConfig.from_pretrained(tiny_dir)
    torch.save({"w": torch.zeros(2)}, tmp_path / "weights.pt")
    save_file({"w": torch.zeros(2)}, tmp_path / "weights.safetensors")
    raw = save({"w": torch.zeros(2)})
    return {
        "from_pretrained": lambda: AutoModelForCausalLM.from_pretrained(tiny_dir),
        "from_config": lambda: AutoModelForCausalLM.from_config(config),
        "model class": lambda: LlamaForCausalLM(config),
        "load_state_dict": lambda: torch.nn.Linear(2, 2).load_state_dict(torch.nn.Linear(2, 2).state_dict()),
        "torch.load": lambda: torch.load(tmp_path / "weights.pt"),
        "safetensors load_file": lambda: load_file(tmp_path / "weights.safetensors"),
        "safetensors load": lambda: load(raw),
        "safe_open": lambda: safe_open(str(tmp_path / "weights.safetensors"), framework="pt"),
    }


@pytest.mark.parametrize("way", ["from_pretrained", "from_config", "model class", "load_state_dict", "torch.load",
                                 "safetensors load_file", "safetensors load", "safe_open"])
def test_every_way_of_loading_a_model_is_refused(way, model_load_guard, tiny_dir, tmp_path):
    refusing, refusal = model_load_guard
    call = ways_in(tiny_dir, tmp_path)[way]
    with refusing() as attempts:
        with pytest.raises(refusal):
            swallowing(call)
    assert len(attempts) == 1


def test_tokenizers_and_configs_are_allowed(tiny_dir, tiny_tokenizer):
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(tiny_dir).num_hidden_layers == 2
    assert tiny_tokenizer("hello").input_ids


def test_a_model_built_on_the_meta_device_is_allowed(model_load_guard, tiny_dir):
    """Shapes only, no memory and no weights: how a plan sizes a model. Loading real weights stays refused."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    refusing, refusal = model_load_guard
    config = AutoConfig.from_pretrained(tiny_dir)
    with refusing() as attempts:
        with init_empty_weights():
            model = AutoModelForCausalLM.from_config(config)
        with torch.device("meta"):
            AutoModelForCausalLM.from_config(config)
        with pytest.raises(refusal):
            swallowing(lambda: AutoModelForCausalLM.from_config(config))
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert len(attempts) == 1
