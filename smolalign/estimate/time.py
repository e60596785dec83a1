"""Time per optimizer step (an estimate, labelled as one), generation included for GRPO and distillation: a pure
function of the model's dims, the effective settings and the GPU. Training is FLOPs at a utilisation of the GPU's
peak; decoding is bound by memory bandwidth (the weights and the KV cache read once a token) plus a per-token
overhead that grows with the layers (kernel launches, Python), which dominates at small batches. A measured
calibration (`estimate.calibrate`) replaces the training part when asked for.

Where the rates come from (the constants below): one H200 (issue 52's run, 2026-11-28; benchmarks/RESULTS.md), a random
SmolLM3-3B (3.08 B parameters, 36 layers) in bf16 with gradient checkpointing:
- training with sdpa: plain TRL's SFT ran 4,096-token rows in 0.436 s a step and 16,384-token rows in 2.37-2.6 s,
  25.7% and 22-24% of the bf16 peak in this module's counting (recomputation and causal attention over the whole
  row counted): 0.25. The first-cut 0.4 had the 4k step at 258 ms, 1.7x optimistic.
- decoding with transformers' `generate`: a GRPO step of 32 answers of 256 tokens took 7.5 s at steady state; less
  its training (1.1 s at the rate above) that is 25 ms a token, of which reading the weights at the bandwidth is
  1.3 ms: 0.65 ms a layer a token of overhead. The first cut modelled decoding as bandwidth alone (2.2 s a step).
Not measured: flex attention's rate at equal counting (it skips the blocks between packed documents; 0.4 assumed),
vLLM's decoding (CUDA graphs: bandwidth bound, its overhead assumed a tenth of transformers'), other GPU kinds (the
H200's rates are used for every GPU, and the plan says so)."""

from collections.abc import Mapping
from dataclasses import dataclass

from smolalign.estimate.dims import ModelDims
from smolalign.gpus import Gpu

DEFAULT_UTILIZATION = 0.25
"""Share of the bf16 peak a training step reaches when the recipe states none (launch.utilization): measured with
sdpa on an H200 (the module's docstring)."""

FLEX_UTILIZATION = 0.4
"""The same for flex attention, assumed (not measured at equal counting): it skips the blocks between packed
documents, which this module counts as computed."""

FLEX_FIRST_STEP = "247 s measured on an H200 (3B, 16,384-token rows; loading included)"
"""What flex attention's first step costs, stated in the plan apart from the step time."""

GENERATE_FIRST_STEP = ("30 s measured on an H200, against 7.5 s a step later (3B, transformers' generate, 32 answers of "
                       "256 tokens)")
"""What the first step of a run that generates with transformers costs (its warm-up), stated in the plan apart from
the step time."""

BANDWIDTH_SHARE = 0.9
"""Share of the memory bandwidth a decoding step's reads reach."""


@dataclass(frozen=True)
class DecodeRates:
    per_layer_token: float
    """Seconds of overhead per layer per decoded token (kernel launches, Python), whatever the batch."""
    where: str


TRANSFORMERS_DECODE = DecodeRates(0.65e-3, "measured on an H200: transformers' generate, 3B, 32 answers x 256 tokens")
VLLM_DECODE = DecodeRates(0.065e-3, "assumed: vLLM's CUDA graphs, a tenth of transformers' overhead (not measured)")


def decode_rates(backend: str) -> DecodeRates:
    """The decoding overhead of a `generation.backend` ("" or transformers: transformers' generate; vllm_*)."""
    return VLLM_DECODE if backend.startswith("vllm") else TRANSFORMERS_DECODE


def training_utilization(attention: str | None) -> float:
    """The utilisation a training step reaches with this attention implementation (the recipe's, None: sdpa)."""
    return FLEX_UTILIZATION if attention == "flex_attention" else DEFAULT_UTILIZATION


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
                   weight_bytes: float, *, context: int = 0, rates: DecodeRates = TRANSFORMERS_DECODE) -> float:
    """Generating `new_tokens` for `sequences` at once after a prompt of `context` tokens: each decoding step reads
    the weights and the KV cache once (bandwidth bound) or, for a large batch, is bound by its FLOPs, plus the
    backend's per-layer overhead."""
    kv_bytes_per_token = 2 * dims.layers * dims.kv_heads * dims.head_dim * 2  # keys and values, 16-bit
    mean_context = context + new_tokens / 2
    reads = weight_bytes + sequences * mean_context * kv_bytes_per_token
    per_step = max(reads / (gpu.bandwidth * BANDWIDTH_SHARE),
                   sequences * 2 * matmul_params(dims) / (gpu.bf16_flops * utilization))
    return new_tokens * (per_step + dims.layers * rates.per_layer_token)


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
        completion = int(settings.get("max_completion_length") or 0)
        generation = decode_seconds(dims, gpu, utilization, generated, completion, weight_bytes,
                                    context=max(length - completion, 0),
                                    rates=decode_rates(settings.get("generation_backend", "")))
    return StepTime(train=train, generation=generation, other=other)


def describe_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
