"""nanotron Llama (SmolLM1/2) and Qwen2 (SmolLM3) checkpoints onto transformers' LlamaForCausalLM and
SmolLM3ForCausalLM: the config mapping, the options that have no faithful transformers equivalent (refused), and
the tensor plan (fused qkv and gate_up split on the unsharded tensor, padded vocabulary trimmed, tied lm_head
dropped).

The mapping is nanotron's own (`examples/llama/convert_weights.get_weight_mapping`); SmolLM3 additionally keeps its
NoPE layers (nanotron skips RoPE on layer i when (i+1) % no_rope_layer == 0, which is what transformers'
`no_rope_layer_interval` means), and rope_theta is always read from the checkpoint.
"""

from pathlib import Path

import yaml

from smolalign.checkpoints.files import damaged, read_json_object, read_text
from smolalign.checkpoints.nanotron_shards import Parameter
from smolalign.checkpoints.plan import TensorPlan, slice_rows
from smolalign.errors import SmolalignError

_SIZES = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
_REFUSED = {
    "sliding_window_size": "nanotron applies its sliding window to RoPE layers and skips NoPE layers, transformers' "
                           "SmolLM3 does the opposite: the converted model would attend differently",
    "attention_bias": "nanotron's Qwen2 puts a bias on qkv but not on o_proj, which no transformers class here matches",
    "rope_interleaved": "interleaved (GPT-J style) RoPE needs a q/k permutation that has not been verified against nanotron",
    "rope_seq_len_interpolation_factor": "sequence-length interpolation has no verified transformers rope scaling",
    "moe_config": "mixture-of-experts models are not converted",
}


def read_model_config(step_dir: Path) -> tuple[dict, dict | None]:
    """(model config, the full config.yaml or None): config.yaml's model.model_config, else model_config.json."""
    full = None
    yaml_path = step_dir / "config.yaml"
    if yaml_path.is_file():
        try:
            full = yaml.safe_load(read_text(yaml_path, "YAML file")) or {}
        except yaml.YAMLError as exc:
            raise damaged(yaml_path, f"not valid YAML ({str(exc).splitlines()[0]})") from None
        full = full if isinstance(full, dict) else None  # not a mapping: it carries no model config
        model = (full or {}).get("model")
        model_config = model.get("model_config") if isinstance(model, dict) else None
        if isinstance(model_config, dict):
            return _checked(model_config, f"{yaml_path} (model.model_config)"), full
    json_path = step_dir / "model_config.json"
    if json_path.is_file():
        return _checked(read_json_object(json_path), str(json_path)), full
    raise SmolalignError(f"nanotron checkpoint {step_dir}: neither config.yaml (model.model_config) nor "
                         "model_config.json is there, so the architecture is unknown; copy one of them from the "
                         "training run into the step folder")


def _checked(model_config: dict, where: str) -> dict:
    """The sizes every conversion reads are positive integers (a hand-edited or damaged config fails here)."""
    for key in _SIZES:
        value = model_config.get(key)
        if type(value) is not int or value < 1:
            raise SmolalignError(f"{where}: {key} must be a positive integer, got {value!r}")
    kv = model_config.get("num_key_value_heads")
    if kv is not None and (type(kv) is not int or kv < 1):
        raise SmolalignError(f"{where}: num_key_value_heads must be a positive integer, got {kv!r}")
    if model_config["hidden_size"] % model_config["num_attention_heads"]:
        raise SmolalignError(f"{where}: hidden_size {model_config['hidden_size']} is not a multiple of "
                             f"num_attention_heads {model_config['num_attention_heads']}")
    return model_config


def architecture(model_config: dict, step_dir: Path) -> str:
    """'llama' or 'smollm3', after refusing what cannot be converted faithfully."""
    for key, why in _REFUSED.items():
        value = model_config.get(key)
        if value not in (None, False):
            raise SmolalignError(f"nanotron checkpoint {step_dir}: {key} is {value!r}: {why}")
    if model_config.get("is_moe") or model_config.get("num_experts"):
        raise SmolalignError(f"nanotron checkpoint {step_dir}: {_REFUSED['moe_config']}")
    if model_config.get("is_qwen2_config"):
        return "smollm3"
    if model_config.get("is_llama_config"):
        return "llama"
    raise SmolalignError(f"nanotron checkpoint {step_dir}: the model config is neither a Llama (is_llama_config) nor a "
                         "Qwen2/SmolLM3 (is_qwen2_config) one; other nanotron architectures are not converted")


def hf_config(model_config: dict, arch: str, vocab_size: int, dtype: str):
    """The transformers config: copied fields keep their names; rope settings go into rope_parameters."""
    from transformers import LlamaConfig, SmolLM3Config

    heads = model_config["num_attention_heads"]
    rope = dict(model_config.get("rope_scaling") or {})
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
    rope.setdefault("rope_type", "default")
    rope["rope_theta"] = float(model_config.get("rope_theta", 10000.0))
    common = dict(
        vocab_size=vocab_size, hidden_size=model_config["hidden_size"],
        intermediate_size=model_config["intermediate_size"], num_hidden_layers=model_config["num_hidden_layers"],
        num_attention_heads=heads, num_key_value_heads=model_config.get("num_key_value_heads") or heads,
        hidden_act=model_config.get("hidden_act", "silu"),
        max_position_embeddings=model_config.get("max_position_embeddings", 2048),
        rms_norm_eps=model_config.get("rms_norm_eps", 1e-6), initializer_range=model_config.get("initializer_range", 0.02),
        tie_word_embeddings=bool(model_config.get("tie_word_embeddings", False)), rope_parameters=rope,
        bos_token_id=model_config.get("bos_token_id"), eos_token_id=model_config.get("eos_token_id"),
        pad_token_id=model_config.get("pad_token_id"), attention_bias=False, mlp_bias=False, dtype=dtype,
    )
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if common[key] is not None and not 0 <= common[key] < vocab_size:
            common[key] = None  # an id pointing into trimmed padding rows is meaningless
    if arch == "llama":
        return LlamaConfig(**common)
    interval = model_config.get("no_rope_layer")
    layers = common["num_hidden_layers"]
    if interval:
        return SmolLM3Config(**common, no_rope_layer_interval=int(interval))
    return SmolLM3Config(**common, no_rope_layers=[1] * layers)


def tensor_plan(params: dict[str, Parameter], model_config: dict, vocab_size: int, step_dir: Path) -> list[TensorPlan]:
    """HF name -> how to produce it from the nanotron parameters, in HF order; missing parameters are named."""
    heads = model_config["num_attention_heads"]
    kv_heads = model_config.get("num_key_value_heads") or heads
    head_dim = model_config["hidden_size"] // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    inter = model_config["intermediate_size"]
    tied = bool(model_config.get("tie_word_embeddings", False))
    used: set[str] = set()

    def need(name: str) -> Parameter:
        if name not in params:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: {name} is missing (expected under "
                                 f"model/{name.rsplit('.', 1)[0].replace('.', '/')}/); was a pipeline stage's "
                                 "folder left out of the copy?")
        used.add(name)
        return params[name]

    plan = [slice_rows("model.embed_tokens.weight", need("model.token_position_embeddings.pp_block.token_embedding.weight"),
                       0, vocab_size)]
    for i in range(model_config["num_hidden_layers"]):
        prefix, hf = f"model.decoder.{i}.pp_block", f"model.layers.{i}"
        qkv = need(f"{prefix}.attn.qkv_proj.weight")
        if qkv.shape[0] != q + 2 * kv:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: {qkv.name} has {qkv.shape[0]} rows, expected "
                                 f"{q + 2 * kv} from {heads} heads and {kv_heads} KV heads of {head_dim}")
        gate_up = need(f"{prefix}.mlp.gate_up_proj.weight")
        plan += [
            slice_rows(f"{hf}.input_layernorm.weight", need(f"{prefix}.input_layernorm.weight")),
            slice_rows(f"{hf}.self_attn.q_proj.weight", qkv, 0, q),
            slice_rows(f"{hf}.self_attn.k_proj.weight", qkv, q, q + kv),
            slice_rows(f"{hf}.self_attn.v_proj.weight", qkv, q + kv, q + 2 * kv),
            slice_rows(f"{hf}.self_attn.o_proj.weight", need(f"{prefix}.attn.o_proj.weight")),
            slice_rows(f"{hf}.post_attention_layernorm.weight", need(f"{prefix}.post_attention_layernorm.weight")),
            slice_rows(f"{hf}.mlp.gate_proj.weight", gate_up, 0, inter),
            slice_rows(f"{hf}.mlp.up_proj.weight", gate_up, inter, 2 * inter),
            slice_rows(f"{hf}.mlp.down_proj.weight", need(f"{prefix}.mlp.down_proj.weight")),
        ]
    plan.append(slice_rows("model.norm.weight", need("model.final_layer_norm.pp_block.weight")))
    if not tied:
        plan.append(slice_rows("lm_head.weight", need("model.lm_head.pp_block.weight"), 0, vocab_size))
    leftover = sorted(set(params) - used - {"model.lm_head.pp_block.weight"})
    if leftover:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: parameters with no transformers counterpart: "
                             f"{', '.join(leftover[:5])}{' ...' if len(leftover) > 5 else ''} (more layers than "
                             f"num_hidden_layers {model_config['num_hidden_layers']}, or an architecture variant)")
    return plan


def true_vocab_size(checkpoint_rows: int, tokenizer_size: int | None, full_config: dict | None,
                    tp: int, step_dir: Path) -> int:
    """Rows to keep of the (TP-padded) embedding: the tokenizer's size, checked against nanotron's padding rule
    `ceil(V / (make_vocab_size_divisible_by * tp)) * ...` when config.yaml says what that multiple was."""
    if tokenizer_size is None:
        return checkpoint_rows
    if tokenizer_size > checkpoint_rows:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: the tokenizer has {tokenizer_size} tokens but the "
                             f"embedding only {checkpoint_rows} rows: it is not this model's tokenizer")
    multiple = ((full_config or {}).get("model") or {}).get("make_vocab_size_divisible_by")
    if multiple and tokenizer_size != checkpoint_rows:
        step = int(multiple) * max(1, int(tp or 1))
        padded = -(-tokenizer_size // step) * step
        if padded != checkpoint_rows:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: the tokenizer's {tokenizer_size} tokens pad to "
                                 f"{padded} rows (make_vocab_size_divisible_by {multiple} × tp {tp}), but the "
                                 f"embedding has {checkpoint_rows}: it is not this model's tokenizer")
    return tokenizer_size
