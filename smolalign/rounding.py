"""float32 to bfloat16 by stochastic rounding: the one home of the rule, for the bf16 optimizer's updates
(stages.stochastic_rounding) and for LoRA adapters merged into a bf16 base (models.lora_merge)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def round_stochastically(value: "torch.Tensor", generator: "torch.Generator | None" = None) -> "torch.Tensor":
    """float32 `value` to bfloat16, each element rounded up or down at random with the probability that keeps its
    expected value: a bf16 number is a float32 whose low 16 bits are zero, so adding a uniform 16-bit number to the
    bits and truncating them rounds away from zero with probability (dropped bits) / 2^16."""
    import torch

    bits = value.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, device=bits.device, generator=generator)
    return noise.add_(bits).bitwise_and_(-65536).view(torch.float32).to(torch.bfloat16)
