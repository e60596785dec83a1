"""torch.distributed.checkpoint (DCP) folders read in one process with no process group, tensor by tensor, with
the key mapping of the framework that wrote them: torchtitan's Llama 3 names (with its q/k RoPE permutation undone,
as torchtitan's own `Llama3StateDictAdapter.to_hf` does), or transformers names (FSDP2 of an HF model), either one
possibly under a `model.` prefix. Optimizer, scheduler and data-loader entries are ignored."""

import re
import warnings
from pathlib import Path

from smolalign.checkpoints.files import read_dcp_metadata
from smolalign.checkpoints.plan import TensorPlan
from smolalign.errors import SmolalignError

TITAN_TO_HF = {
    "tok_embeddings.weight": "model.embed_tokens.weight",
    "layers.{}.attention.wq.weight": "model.layers.{}.self_attn.q_proj.weight",
    "layers.{}.attention.wk.weight": "model.layers.{}.self_attn.k_proj.weight",
    "layers.{}.attention.wv.weight": "model.layers.{}.self_attn.v_proj.weight",
    "layers.{}.attention.wo.weight": "model.layers.{}.self_attn.o_proj.weight",
    "layers.{}.feed_forward.w1.weight": "model.layers.{}.mlp.gate_proj.weight",
    "layers.{}.feed_forward.w2.weight": "model.layers.{}.mlp.down_proj.weight",
    "layers.{}.feed_forward.w3.weight": "model.layers.{}.mlp.up_proj.weight",
    "layers.{}.attention_norm.weight": "model.layers.{}.input_layernorm.weight",
    "layers.{}.ffn_norm.weight": "model.layers.{}.post_attention_layernorm.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def unpermute_rope(weight, heads: int):
    """torchtitan (Meta) rotary layout -> transformers': within each head, the interleaved (even, odd) pairs become
    the two halves. `w.view(h, d/2, 2, in).transpose(1, 2)`, exactly torchtitan's `_permute`."""
    rows, cols = weight.shape
    return weight.view(heads, rows // heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def dcp_plan(path: Path, config, expected: set[str]) -> tuple[list[TensorPlan], str]:
    """(plan, layout) for the model tensors of a DCP folder whose names map onto `expected` (the HF keys)."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = read_dcp_metadata(path)
    tensors = {k: v for k, v in metadata.state_dict_metadata.items() if isinstance(v, TensorStorageMetadata)}
    mapping, style, prefix = _mapping(tensors, expected, path)
    head = prefix + ("output.weight" if style == "torchtitan" else "lm_head.weight")
    if "lm_head.weight" not in mapping and head in tensors:
        embedding = mapping["model.embed_tokens.weight"]
        if not torch_equal(_load(path, head, tensors[head], None), _load(path, embedding, tensors[embedding], None)):
            raise SmolalignError(f"DCP checkpoint {path}: it has its own output weights ({head}) but the config ties "
                                 "them to the embedding; use a config with tie_word_embeddings false")
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    plan = []
    for hf_name, key in mapping.items():
        meta = tensors[key]
        permute = None
        if style == "torchtitan" and hf_name.endswith(("q_proj.weight", "k_proj.weight")):
            permute = heads if hf_name.endswith("q_proj.weight") else kv_heads
        plan.append(TensorPlan(hf_name, tuple(meta.size), str(meta.properties.dtype).removeprefix("torch."),
                               lambda key=key, meta=meta, permute=permute: _load(path, key, meta, permute)))
    files = len(list(path.glob("*.distcp")))
    return plan, f"{style} names, {files} .distcp file(s)"


def _mapping(tensors: dict, expected: set[str], path: Path) -> tuple[dict[str, str], str]:
    """HF name -> DCP key, for the first naming scheme (and prefix) under which every expected weight is found."""
    tried = []
    for prefix in ("", "model.", "module.", "model.module."):
        titan = {}
        for key in tensors:
            if not key.startswith(prefix):
                continue
            inner = key[len(prefix):]
            abstract = re.sub(r"^layers\.(\d+)\.", "layers.{}.", inner)
            if abstract in TITAN_TO_HF:
                layer = re.match(r"^layers\.(\d+)\.", inner)
                titan[TITAN_TO_HF[abstract].format(layer.group(1) if layer else "")] = key
        hf = {key[len(prefix):]: key for key in tensors if key.startswith(prefix) and key[len(prefix):] in expected}
        for style, found in (("torchtitan", titan), ("transformers", hf)):
            if expected <= set(found):
                return {name: found[name] for name in sorted(expected, key=_natural)}, style, prefix
            tried.append((len(expected & set(found)), style, prefix, sorted(expected - set(found))))
    best = max(tried, key=lambda t: t[0])
    sample = ", ".join(list(tensors)[:6])
    raise SmolalignError(f"DCP checkpoint {path}: its tensors do not match the configured architecture (best match: "
                         f"{best[1]} names{' under ' + repr(best[2]) if best[2] else ''}, {best[0]} of "
                         f"{len(expected)} weights; missing e.g. {', '.join(best[3][:3])}). It holds: {sample} ...; "
                         "is --config the model that was trained?")


def torch_equal(a, b) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.equal(a, b))


def _natural(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _load(path: Path, key: str, meta, permute: int | None):
    import torch
    from torch.distributed.checkpoint import FileSystemReader, load

    tensor = torch.empty(tuple(meta.size), dtype=meta.properties.dtype)
    with warnings.catch_warnings():  # "torch.distributed is disabled ... single process": that is the intent
        warnings.simplefilter("ignore", UserWarning)
        try:
            load({key: tensor}, storage_reader=FileSystemReader(str(path)), no_dist=True)
        except Exception as exc:  # noqa: BLE001 - DCP wraps every reader failure in its CheckpointException
            raise SmolalignError(f"DCP checkpoint {path}: {key} cannot be read, a .distcp file is damaged "
                                 f"({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})") from None
    return unpermute_rope(tensor, permute) if permute else tensor
