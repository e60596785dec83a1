"""Write a transformers Llama or SmolLM3 model in nanotron's on-disk checkpoint format, without nanotron: one
safetensors file per parameter shard under model/, nanotron's file names, its slice metadata in its string encoding
(including numpy 2's `(np.int64(128), 64)` spelling for fused parameters), fused qkv and gate_up split per chunk
across TP ranks, TP-replicated norms written once without metadata, tied embeddings stored once, a padded
vocabulary, checkpoint_metadata.json, model_config.json, optionally config.yaml, and latest.txt in the run folder.

tests/unit/test_checkpoints_nanotron.py checks that this matches, name for name and header for header, a checkpoint
that nanotron's own save_weights wrote (tests/fixtures/nanotron-smollm3-tp2).
"""

import json
from pathlib import Path

NONE = "None,None,None"


def write_nanotron(model, run_dir: Path, *, tp: int = 1, pp: int = 1, step: int = 10, pad_vocab_to: int = 1,
                   config_yaml: bool = False, tokenizer_dir: Path | None = None, version: str = "1.5",
                   model_config_overrides: dict | None = None, model_config_json: bool = True) -> Path:
    """Save `model` as nanotron's `run_dir/<step>/` with `run_dir/latest.txt`; returns the step folder.
    `pad_vocab_to`: nanotron's make_vocab_size_divisible_by (the vocabulary is padded to a multiple of it × tp)."""
    import torch
    from safetensors.torch import save_file

    config = model.config
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    vocab = config.vocab_size
    multiple = pad_vocab_to * tp
    padded = -(-vocab // multiple) * multiple
    generator = torch.Generator().manual_seed(1234)

    def pad_rows(tensor):
        extra = torch.randn((padded - vocab, *tensor.shape[1:]), generator=generator, dtype=tensor.dtype)
        return torch.cat([tensor, extra]) if padded > vocab else tensor

    step_dir = run_dir / str(step)
    root = step_dir / "model"
    layers = config.num_hidden_layers
    stage_of = [min(pp - 1, i * pp // layers) for i in range(layers)]

    def write(module: str, leaf: str, tensor, split: str | None, chunks: tuple[int, ...] | None, stage: int):
        folder = root.joinpath(*module.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        if split is None:
            save_file({"data": tensor.contiguous()}, str(folder / f"model_{leaf}.safetensors"), metadata={})
            return
        for rank in range(tp):
            local, pairs = _shard(tensor, split, chunks, rank, tp)
            shape = (f"(np.int64({tensor.shape[0]}), {tensor.shape[1]})" if chunks else str(tuple(tensor.shape)))
            metadata = {"version": version, "local_global_slices_pairs": ";".join(pairs), "unsharded_shape": shape}
            name = f"model_{leaf}_pp-rank-{stage}-of-{pp}_tp-rank-{rank}-of-{tp}.safetensors"
            save_file({"data": local.contiguous()}, str(folder / name), metadata=metadata)

    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = config.hidden_size // heads
    write("model.token_position_embeddings.pp_block.token_embedding", "weight",
          pad_rows(state["model.embed_tokens.weight"]), "rows", None, 0)
    for i in range(layers):
        hf, nt = f"model.layers.{i}", f"model.decoder.{i}.pp_block"
        qkv = torch.cat([state[f"{hf}.self_attn.{p}_proj.weight"] for p in "qkv"])
        gate_up = torch.cat([state[f"{hf}.mlp.gate_proj.weight"], state[f"{hf}.mlp.up_proj.weight"]])
        write(f"{nt}.input_layernorm", "weight", state[f"{hf}.input_layernorm.weight"], None, None, stage_of[i])
        write(f"{nt}.attn.qkv_proj", "weight", qkv, "rows", (heads * head_dim, kv_heads * head_dim,
                                                               kv_heads * head_dim), stage_of[i])
        write(f"{nt}.attn.o_proj", "weight", state[f"{hf}.self_attn.o_proj.weight"], "cols", None, stage_of[i])
        write(f"{nt}.post_attention_layernorm", "weight", state[f"{hf}.post_attention_layernorm.weight"], None, None,
              stage_of[i])
        write(f"{nt}.mlp.gate_up_proj", "weight", gate_up, "rows", (config.intermediate_size,) * 2, stage_of[i])
        write(f"{nt}.mlp.down_proj", "weight", state[f"{hf}.mlp.down_proj.weight"], "cols", None, stage_of[i])
    write("model.final_layer_norm.pp_block", "weight", state["model.norm.weight"], None, None, pp - 1)
    if not config.tie_word_embeddings:
        write("model.lm_head.pp_block", "weight", pad_rows(state["lm_head.weight"]), "rows", None, pp - 1)

    model_config = {**nanotron_model_config(config, padded), **(model_config_overrides or {})}
    if model_config_json:
        (step_dir / "model_config.json").write_text(json.dumps(model_config))
    metadata = {"version": version, "tp": tp, "dp": 1, "cp": 1,
                "metas": {"consumed_train_samples": step * 8, "last_train_step": step, "last_stage_idx": 0,
                          "data_stages": [{"name": "stable", "start_training_step": 1,
                                           "consumed_train_samples": step * 8}]}}
    (step_dir / "checkpoint_metadata.json").write_text(json.dumps(metadata, indent=2, sort_keys=True))
    if config_yaml:
        import yaml

        full = {"general": {"project": "tiny", "run": "tiny-run", "step": step},
                "parallelism": {"dp": 1, "tp": tp, "pp": pp, "pp_engine": "1f1b"},
                "model": {"make_vocab_size_divisible_by": pad_vocab_to, "model_config": model_config},
                "tokenizer": {"tokenizer_name_or_path": str(tokenizer_dir) if tokenizer_dir else "HuggingFaceTB/SmolLM3-3B"}}
        (step_dir / "config.yaml").write_text(yaml.safe_dump(full, sort_keys=False))
    (run_dir / "latest.txt").write_text(str(step))
    return step_dir


def _shard(tensor, split: str, chunks: tuple[int, ...] | None, rank: int, tp: int):
    """(local tensor, slice-pair strings) of one TP rank: rows (column-linear, embedding; chunk by chunk when fused)
    or columns (row-linear)."""
    import torch

    if split == "cols":
        width = tensor.shape[1] // tp
        a, b = rank * width, (rank + 1) * width
        return tensor[:, a:b], [f"{NONE}|{NONE}#{NONE}|{a},{b},None"]
    if chunks is None:
        height = tensor.shape[0] // tp
        a, b = rank * height, (rank + 1) * height
        return tensor[a:b], [f"{NONE}|{NONE}#{a},{b},None|{NONE}"]
    pieces, pairs, local_start, global_start = [], [], 0, 0
    for chunk in chunks:
        part = chunk // tp
        a = global_start + rank * part
        pieces.append(tensor[a:a + part])
        pairs.append(f"{local_start},{local_start + part},None|{NONE}#{a},{a + part},None|{NONE}")
        local_start += part
        global_start += chunk
    return torch.cat(pieces), pairs


def nanotron_model_config(config, vocab_size: int) -> dict:
    """nanotron's LlamaConfig / Qwen2Config fields (as asdict() writes them) for a transformers config."""
    rope = config.rope_parameters or {}
    common = {
        "bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id, "hidden_act": config.hidden_act,
        "hidden_size": config.hidden_size, "initializer_range": config.initializer_range,
        "intermediate_size": config.intermediate_size, "max_position_embeddings": config.max_position_embeddings,
        "num_attention_heads": config.num_attention_heads, "num_hidden_layers": config.num_hidden_layers,
        "num_key_value_heads": config.num_key_value_heads, "pad_token_id": config.pad_token_id,
        "pretraining_tp": 1, "rms_norm_eps": config.rms_norm_eps, "rope_scaling": None,
        "rope_theta": float(rope.get("rope_theta", 10000.0)), "rope_interleaved": False,
        "tie_word_embeddings": bool(config.tie_word_embeddings), "use_cache": True, "vocab_size": vocab_size,
    }
    if config.model_type == "llama":
        return {**common, "is_llama_config": True}
    layers = config.num_hidden_layers
    interval = next((n for n in range(1, layers + 1)
                     if list(config.no_rope_layers) == [int((i + 1) % n != 0) for i in range(layers)]), None)
    return {**common, "is_qwen2_config": True, "rope_seq_len_interpolation_factor": None,
            "_attn_implementation": "flash_attention_2", "flex_attention_mask": None, "attention_bias": False,
            "sliding_window_size": None, "z_loss_enabled": False, "z_loss_coefficient": 0.0001,
            "no_rope_layer": interval, "_fused_rotary_emb": False, "_fused_rms_norm": False, "_use_qkv_packed": True,
            "_use_doc_masking": False, "log_attn_probs": True, "ring_attn_heads_k_stride": None, "moe_config": None}
