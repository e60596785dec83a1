"""Memory of models held only to generate or to score, read from configs and weight-file headers (nothing loads):
a graded-pairs sampler (weights and KV cache) and `model:` reward models (weights). The po plan's graded-pairs rows
and the rl memory estimate use it (`smolalign po recipes/quickstart/po_graded.yaml --dry-run`)."""

from rewards.reward_model import PREFIX, is_reward_model
from smolalign.estimate.dims import ModelDims
from smolalign.estimate.memory import DTYPE_BYTES
from smolalign.hardware import Hardware
from smolalign.models.size import parameter_count


def kv_cache_bytes(dims: ModelDims, sequences: int, tokens: int, dtype: str) -> int:
    """Keys and values of every layer for `sequences` sequences of `tokens` tokens."""
    return 2 * dims.layers * dims.kv_heads * dims.head_dim * sequences * tokens * DTYPE_BYTES.get(dtype, 4)


def reward_model_bytes(name: str, params: dict, hardware: Hardware) -> int | None:
    """Weights of a `model:PATH` reward in the dtype it will load in (its `dtype` param as rewards/reward_model.py
    reads it, auto: bfloat16 on a GPU, float32 on a CPU); None when its size cannot be read without loading (a hub
    id)."""
    count = parameter_count(name[len(PREFIX):])
    if count is None:
        return None
    requested = params.get("dtype", "auto")
    dtype = ("bfloat16" if hardware.on_gpu else "float32") if requested == "auto" else requested
    return count * DTYPE_BYTES.get(dtype, 4)


def reward_model_parts(sections, hardware: Hardware) -> dict[str, int]:
    """{"reward model NAME": bytes} for every `model:` reward among `sections` (RewardSection) whose size is known."""
    parts = {}
    for section in sections:
        if is_reward_model(section.name):
            size = reward_model_bytes(section.name, section.params, hardware)
            if size is not None:
                parts[f"reward model {section.name}"] = size
    return parts
