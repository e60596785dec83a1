"""The attention a model trains with under bf16 autocast on a CPU (`hardware.autocast_attention`): each call takes
the faster of transformers' two CPU implementations for its length. Up to `LONGEST_EAGER_KEYS` keys, the model's
eager attention (torch's CPU SDPA kernels in bf16 are slow in the backward pass, slower still with a padding mask:
a quickstart GRPO step of 32 rows of 105 tokens trains in 6.0 s eager against 8.8 s with SDPA); above it SDPA, whose
memory and time grow more slowly with the length (the bundled 135M model, forward and backward of two padded rows
under autocast: level at 256 and 512 tokens, SDPA 1.6x faster at 1,024 and 2.4x at 1,536;
benchmarks/cpu_attention.py).

Both take the eager mask (additive, in the computing dtype), which SDPA reads as it reads a boolean one; packed
documents keep their block-diagonal mask (tests/integration/test_cpu_attention.py). The name is registered with
transformers when a model is loaded with it; it is not saved in the model's config.
"""

import sys

from smolalign.hardware import CPU_AUTOCAST_ATTENTION as NAME

LONGEST_EAGER_KEYS = 512
"""The longest key sequence eager attention computes; longer calls go to SDPA (level at 512 on the 135M model)."""


def attention_forward(module, query, key, value, attention_mask, **kwargs):
    """transformers' attention interface: eager for short key sequences (where the model's module has one), SDPA
    for the rest."""
    eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if eager is None or key.shape[-2] > LONGEST_EAGER_KEYS:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    return eager(module, query, key, value, attention_mask, **kwargs)


def register() -> str:
    """Make `NAME` an attention implementation transformers loads models with (idempotent); returns it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(NAME, attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    return NAME
