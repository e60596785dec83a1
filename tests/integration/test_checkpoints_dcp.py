"""torch DCP checkpoints -> transformers: torchtitan Llama 3 names (q/k in Meta's interleaved RoPE layout) and
HF-named FSDP-style states, written with torch.distributed.checkpoint in this process and converted back to the
model they came from, weights and logits bit-identical."""

import json

import pytest
import torch

from smolalign.checkpoints.convert import convert
from smolalign.checkpoints.dcp import unpermute_rope
from smolalign.checkpoints.detect import detect
from smolalign.errors import SmolalignError

HF_TO_TITAN = {
    "model.embed_tokens.weight": "tok_embeddings.weight", "model.norm.weight": "norm.weight",
    "lm_head.weight": "output.weight", "self_attn.q_proj.weight": "attention.wq.weight",
    "self_attn.k_proj.weight": "attention.wk.weight", "self_attn.v_proj.weight": "attention.wv.weight",
    "self_attn.o_proj.weight": "attention.wo.weight", "mlp.gate_proj.weight": "feed_forward.w1.weight",
    "mlp.down_proj.weight": "feed_forward.w2.weight", "mlp.up_proj.weight": "feed_forward.w3.weight",
    "input_layernorm.weight": "attention_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
}


def meta_layout(weight, heads: int):
    """transformers' rotary layout -> Meta's (torchtitan `_reverse_permute`): per head, halves become pairs."""
    rows, cols = weight.shape
    return weight.view(heads, 2, rows // heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def titan_state(model) -> dict:
    config = model.config
    out = {}
    for name, tensor in model.state_dict().items():
        if name.startswith("model.layers."):
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            key = f"layers.{layer}.{HF_TO_TITAN[rest]}"
            if rest == "self_attn.q_proj.weight":
                tensor = meta_layout(tensor, config.num_attention_heads)
            elif rest == "self_attn.k_proj.weight":
                tensor = meta_layout(tensor, config.num_key_value_heads)
        else:
            key = HF_TO_TITAN[name]
        out[key] = tensor.clone()
    return out


def save_dcp(state: dict, directory) -> None:
    from torch.distributed.checkpoint import save

    save(state, checkpoint_id=str(directory), no_dist=True)


@pytest.fixture(scope="module")
def untied(tiny_tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    config = LlamaConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                         max_position_embeddings=128, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    return LlamaForCausalLM(config).eval()


def logits(model):
    ids = torch.arange(16).reshape(2, 8)
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_unpermute_turns_meta_rope_into_transformers_rope():
    """Independent of our own inverse: rotating q with Meta's complex-pair RoPE (weights in Meta's layout) and with
    transformers' rotate_half RoPE (weights unpermuted) gives the same vectors, up to the per-head index map
    (pair i, part p) -> p * head_dim/2 + i."""
    torch.manual_seed(0)
    heads, head_dim, hidden, seq, theta = 4, 16, 64, 7, 10000.0
    meta_weight = torch.randn(heads * head_dim, hidden, dtype=torch.float64)
    x = torch.randn(seq, hidden, dtype=torch.float64)
    freqs = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), freqs)  # (seq, head_dim/2)

    q_meta = (x @ meta_weight.T).view(seq, heads, head_dim // 2, 2)
    rotated = torch.view_as_real(torch.view_as_complex(q_meta.contiguous()) * torch.polar(torch.ones_like(angles),
                                                                                           angles)[:, None, :])
    rotated_meta = rotated.reshape(seq, heads, head_dim)

    q_hf = (x @ unpermute_rope(meta_weight, heads).T).view(seq, heads, head_dim)
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)[:, None, :]
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)[:, None, :]
    half = head_dim // 2
    rotate_half = torch.cat([-q_hf[..., half:], q_hf[..., :half]], dim=-1)
    rotated_hf = q_hf * cos + rotate_half * sin

    order = [2 * i for i in range(half)] + [2 * i + 1 for i in range(half)]
    assert torch.allclose(rotated_hf, rotated_meta[..., order], atol=1e-12)


def test_torchtitan_dcp_converts_to_the_original_model(untied, tmp_path, tiny_dir):
    from transformers import AutoModelForCausalLM

    untied.config.save_pretrained(tmp_path / "config")
    step = tmp_path / "dump" / "checkpoint" / "step-20"
    save_dcp({**titan_state(untied), "optimizer.state.step": torch.tensor(20.0)}, step)
    save_dcp({k: torch.zeros_like(v) for k, v in titan_state(untied).items()}, tmp_path / "dump" / "checkpoint" / "step-10")
    detected = detect(tmp_path / "dump" / "checkpoint")
    assert (detected.format, detected.path.name) == ("dcp", "step-20")
    with pytest.raises(SmolalignError, match="carries no model config: pass --config"):
        convert(tmp_path / "dump" / "checkpoint", tmp_path / "hf")
    report = convert(tmp_path / "dump" / "checkpoint", tmp_path / "hf", config=tmp_path / "config", tokenizer=tiny_dir)
    assert report.layout.startswith("torchtitan names")
    converted = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    for name, tensor in untied.state_dict().items():
        assert torch.equal(tensor, converted.state_dict()[name]), name
    assert torch.equal(logits(untied), logits(converted))


def test_hf_named_dcp_under_a_model_prefix(tiny_dir, tmp_path):
    """FSDP2 of a transformers model saved as {"model": state_dict}: keys `model.model.layers...`, tied lm_head."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    save_dcp({"model": {k: v.clone() for k, v in model.state_dict().items()}, "step": 3}, tmp_path / "dcp")
    (tmp_path / "dcp" / "config.json").write_text((tiny_dir / "config.json").read_text())
    report = convert(tmp_path / "dcp", tmp_path / "hf", tokenizer=tiny_dir, dtype="bfloat16")
    assert report.layout.startswith("transformers names")
    converted = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype="auto")
    assert converted.dtype == torch.bfloat16
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor.to(torch.bfloat16), converted.state_dict()[name]), name
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["tie_word_embeddings"] is True


def test_dcp_of_another_architecture_is_refused(untied, tmp_path, tiny_dir):
    save_dcp(titan_state(untied), tmp_path / "dcp")
    with pytest.raises(SmolalignError, match="has its own output weights .*output.weight. but the config ties them"):
        convert(tmp_path / "dcp", tmp_path / "hf", config=tiny_dir)


def test_dcp_that_does_not_fit_the_config_is_refused(untied, tmp_path):
    save_dcp(titan_state(untied), tmp_path / "dcp")
    deeper = untied.config.to_dict() | {"num_hidden_layers": 3}
    (tmp_path / "config.json").write_text(json.dumps(deeper))
    with pytest.raises(SmolalignError, match=r"do not match the configured architecture .*torchtitan names, 21 of 30 "
                                             r"weights; missing e.g. model.layers.2"):
        convert(tmp_path / "dcp", tmp_path / "hf", config=tmp_path / "config.json")
