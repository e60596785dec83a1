"""Time per optimizer step from FLOPs and a stated utilisation of the GPU's peak (an estimate, labelled as one),
generation included for GRPO and distillation: a pure function of the model's dims, the effective settings and
the GPU. A measured calibration (`estimate.calibrate`) replaces the training part when asked for."""

from collections.abc import Mapping
from dataclasses import dataclass

from smolalign.estimate.dims import ModelDims
from smolalign.gpus import Gpu

DEFAULT_UTILIZATION = 0.4
"""Model FLOPs utilisation assumed when the recipe states none (launch.utilization): typical of a well-fed
bf16 run on H100s; decoding reaches a similar share of the memory bandwidth."""


@dataclass(frozen=True)
class StepTime:
    train: float
    """Seconds of forward and backward passes per optimizer step, per device."""
    generation: float = 0.0
    """Seconds of generating completions per optimizer step (GRPO, distillation)."""
    other: float = 0.0
    """Seconds of extra forward passes (a reference model, a teacher)."""

    @property
    def total(self) -> float:
        return self.train + self.generation + self.other


def matmul_params(dims: ModelDims) -> int:
    """Parameters that take part in a matrix multiply per token: all but the input embedding lookup (which, tied,
    is also the output projection)."""
    untied = dims.params - dims.vocab * dims.hidden
    return untied if untied > dims.layers * dims.layer_params else dims.params


def train_flops_per_token(dims: ModelDims, sequence: int, *, checkpointing: bool, lora: bool) -> float:
    """Forward 2N plus backward 4N (2N with frozen weights: input gradients only), plus causal attention; gradient
    checkpointing repeats the forward."""
    n = matmul_params(dims)
    attention = 2 * dims.layers * dims.heads * dims.head_dim * sequence  # QK^T and AV, causal half of 4·L·d·s
    forward = 2 * n + attention
    backward = 2 * forward if not lora else forward
    return forward + backward + (forward if checkpointing else 0)


def forward_flops_per_token(dims: ModelDims, sequence: int) -> float:
    return 2 * matmul_params(dims) + 2 * dims.layers * dims.heads * dims.head_dim * sequence


def decode_seconds(dims: ModelDims, gpu: Gpu, utilization: float, sequences: int, new_tokens: int,
                   weight_bytes: float) -> float:
    """Generating `new_tokens` for `sequences` at once: each decoding step reads the weights once (bandwidth bound)
    or, for a large batch, is bound by its FLOPs."""
    per_step = max(weight_bytes / (gpu.bandwidth * utilization),
                   sequences * 2 * matmul_params(dims) / (gpu.bf16_flops * utilization))
    return new_tokens * per_step


def step_time(dims: ModelDims, settings: Mapping, gpu: Gpu, utilization: float = DEFAULT_UTILIZATION, *,
              weight_bytes: float = 0.0, extra_forward_params: int = 0) -> StepTime:
    """Seconds per optimizer step on one device. `settings`: `sequences_per_step` (per device),
    `sequence_length`, `gradient_checkpointing`, `lora`, and for on-policy stages `generated_sequences` and
    `max_completion_length`; `extra_forward_params`: a reference or teacher scored on every sequence."""
    sequences = int(settings.get("sequences_per_step") or 0)
    length = int(settings.get("sequence_length") or 0)
    rate = gpu.bf16_flops * utilization
    flops = train_flops_per_token(dims, length, checkpointing=bool(settings.get("gradient_checkpointing")),
                                  lora=bool(settings.get("lora")))
    train = sequences * length * flops / rate
    other = sequences * length * 2 * extra_forward_params / rate
    generated = int(settings.get("generated_sequences") or 0)
    generation = 0.0
    if generated:
        generation = decode_seconds(dims, gpu, utilization, generated, int(settings.get("max_completion_length") or 0),
                                    weight_bytes)
    return StepTime(train=train, generation=generation, other=other)


def describe_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
