"""Memory per device of a training step, by part, as a pure function of the model's dims, the effective training
settings (a plain mapping), the launch setup and the extra models: `smolalign sft RECIPE --dry-run` prints it.

DeepSpeed's own estimators give the ZeRO model states (`estimate_zero2/3_model_states_mem_needs`); the rest is
computed here: DDP/FSDP/LoRA/QLoRA states, activations at the recipe's tokens per micro-batch (what autograd keeps
per decoder layer in transformers' Llama-style blocks, with or without gradient checkpointing), the logits and
loss, a reference or teacher model and vLLM's colocated share. Every term is counted from what the code allocates
(no constant is fitted to a measurement); checked against the real high-water mark of SFT steps on shapes it was
not written for in tests/integration/test_estimate_accuracy.py (CPU) and benchmarks/estimate.py (GPU).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from smolalign.estimate.dims import ModelDims
from smolalign.hardware import adapter_dtype, compensates_updates
from smolalign.recipe.settings import lora_settings

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CUDA_CONTEXT = 600 * 1024**2
"""CUDA context, cuBLAS/NCCL workspaces: held by the process, outside torch's allocator."""


def keeps_float32_masters(sharding: str) -> bool:
    """Whether a run sharded this way (a Setup's `sharding`) trains float32 master weights whatever the weights load
    in: DeepSpeed's ZeRO stages and FSDP under mixed precision do; DDP and one process do not."""
    return sharding in ("zero1", "zero2", "zero3", "fsdp")


@dataclass(frozen=True)
class Setup:
    """How the run is spread and what it trains: the launcher's sharding, PEFT and quantization, the dtype."""

    processes: int = 1
    per_node: int | None = None
    """Processes per node (DeepSpeed's estimators split CPU memory per node); default: all on one node."""
    sharding: str = "none"
    """none (one process), ddp, zero1, zero2, zero3 or fsdp."""
    offload_optimizer: bool = False
    offload_params: bool = False
    dtype: str = "bfloat16"
    """The weights' dtype as loaded (activations follow it)."""
    frozen_dtype: str | None = None
    """A frozen copy's (a reference model's) dtype as loaded; None: `dtype`."""
    gpu: bool = True
    peft: Mapping | None = None
    quantization: str | None = None
    zero_buckets: Mapping | None = None
    """Under ZeRO: the DeepSpeed config's bucket settings (reduce_bucket_size, stage3_prefetch_bucket_size,
    stage3_param_persistence_threshold), each a number of elements or "auto", one that is missing being DeepSpeed's
    default; None: the config `--launch` runs (all "auto")."""


@dataclass
class MemoryEstimate:
    parts: dict[str, int] = field(default_factory=dict)
    """Bytes per device, by part."""
    peak: int = 0
    """Bytes per device at the step's peak (parts that coexist)."""
    cpu: int = 0
    """Bytes of CPU memory per node for offloaded states."""


def optimizer_state_bytes(optim: str, state_dtype_bytes: int) -> float:
    """Bytes of optimizer state per trainable parameter for a `train.optim` name."""
    optim = optim.lower()
    if "8bit" in optim:
        return 1 if "lion" in optim else 2
    if "adafactor" in optim:
        return 0  # factored second moment: a row and a column per matrix
    if optim.startswith("sgd"):
        return 0
    if "lion" in optim or optim in ("adagrad", "rmsprop"):
        return state_dtype_bytes
    return 2 * state_dtype_bytes  # AdamW and its kin: first and second moments


def layer_activation_bytes(dims: ModelDims, b: int) -> int:
    """Bytes autograd keeps per token for one decoder layer with `b`-byte activations: two RMSNorms (an fp32 copy of
    their input and the normalised output), the q/k/v input, q, k and v as attention saves them (k and v repeated to
    every head), attention's output and its contiguous copy for o_proj, the MLP's input, gate, activation, up and
    product."""
    q = dims.heads * dims.head_dim
    norms = 2 * (4 + b) * dims.hidden  # in fp32 the copy is the input itself: 4 + 4 bytes all the same
    return norms + b * (2 * dims.hidden + 3 * q + 2 * q) + 4 * b * dims.intermediate


TOKEN_TILE, VOCAB_TILE = 4096, 32768
"""Tile of TRL's chunked log-prob kernel (trl.kernels.chunked_logprob, used by the SFT, DPO, KTO and GRPO
trainers): the logits are computed tile by tile, never whole."""
CPU_TILE_TEMPORARIES = 9 + 1 / 4
"""Tile-sized tensors alive at the worst point of the backward of the kernel's torch fallback (no Triton: CPUs),
counted from trl.kernels.chunked_logprob's code, in units of one fp32 tile: nine fp32 tensors (the tile, its fp32
copy, the scaled logits, log-probs, probs, the gradient and three temporaries of the gradient update) and a one-byte
target mask (a quarter of an fp32 tile). A count, not a fit: the accuracy test's held-out shapes check it."""


def activation_bytes(dims: ModelDims, tokens: int, b: int, checkpointing: bool, triton: bool = True
                     ) -> dict[str, int]:
    """Activations and the loss head for one micro-batch of `tokens` tokens."""
    per_layer = layer_activation_bytes(dims, b)
    if checkpointing:  # each layer's input is kept; one layer is recomputed at a time in the backward pass
        layers = tokens * (dims.layers * b * dims.hidden + per_layer)
    else:
        layers = tokens * dims.layers * per_layer
    tile = min(tokens, TOKEN_TILE) * min(dims.vocab, VOCAB_TILE)
    # the tiles, then the gradients of the head's weight and input, accumulated in fp32 and cast back
    head = (tile * b if triton else int(tile * 4 * CPU_TILE_TEMPORARIES)) \
        + (4 + (b if b != 4 else 0)) * dims.vocab * dims.hidden + (4 + 2 * b) * tokens * dims.hidden
    final_norm = tokens * (4 + b) * dims.hidden
    return {"activations": layers + final_norm, "logits and loss (chunked)": head}


def _lora(dims: ModelDims, setup: Setup) -> int:
    lora = lora_settings(setup.peft or {})
    return dims.lora_params(int(lora["r"]), lora["target_modules"])


def _base_weight_bytes(dims: ModelDims, setup: Setup, b: int) -> float:
    if setup.quantization is None:
        return dims.params * b
    linear = sum(i * o * n for i, o, n in dims.linears.values())
    per_param = {"4bit": 0.5 + 0.5 / 64 * 1.03, "8bit": 1.0}[setup.quantization]  # nf4 + double-quantised absmax
    return linear * per_param + (dims.params - linear) * b


def model_states(dims: ModelDims, settings: Mapping, setup: Setup) -> MemoryEstimate:
    """Weights, gradients and optimizer states per device (and CPU memory for offloaded ones)."""
    b = DTYPE_BYTES.get(setup.dtype, 4)
    optim = str(settings.get("optim") or "adamw_torch")
    n = max(setup.processes, 1)
    est = MemoryEstimate()
    parts = est.parts
    if setup.peft is not None:
        lora = _lora(dims, setup)
        base = _base_weight_bytes(dims, setup, b)
        if setup.sharding == "zero3":
            base = base / n + 4 * dims.largest_layer
        # peft keeps adapters float32 whatever the base's dtype; over a quantized base TRL casts them to bf16, where
        # AdamW keeps float32 moments (stages/low_precision_updates.py) and a launcher float32 masters
        adapter = adapter_dtype(quantized=bool(setup.quantization))
        sharded = keeps_float32_masters(setup.sharding)
        a = 4 if sharded else DTYPE_BYTES[adapter]
        parts["weights"] = int(base + a * lora)
        parts["gradients"] = a * lora
        state_bytes = 4 if sharded or compensates_updates(adapter, False, optim) else a
        parts["optimizer states"] = int(optimizer_state_bytes(optim, state_bytes) * lora)
        return est
    if setup.sharding in ("zero1", "zero2", "zero3"):
        return _deepspeed_states(dims, optim, setup)
    if setup.sharding == "fsdp":
        # accelerate upcasts the sharded parameters to fp32 under mixed precision; one block (and the root module
        # with the embeddings) is gathered in 16 bits at a time
        gathered = 2 * (dims.params - dims.layers * dims.layer_params) + 2 * 2 * dims.layer_params
        parts["weights"] = 4 * dims.params // n + gathered
        parts["gradients"] = 4 * dims.params // n
        parts["optimizer states"] = int(optimizer_state_bytes(optim, 4) * dims.params / n)
        return est
    parts["weights"] = dims.params * b
    parts["gradients"] = dims.params * b
    # bf16 weights train with AdamW that rounds stochastically, its moments float32 (stages/low_precision_updates.py)
    state_bytes = 4 if compensates_updates(setup.dtype, False, optim) else b
    parts["optimizer states"] = int(optimizer_state_bytes(optim, state_bytes) * dims.params)
    if setup.sharding == "ddp" and n > 1:
        parts["DDP gradient buckets"] = dims.params * b
    return est


def _deepspeed_states(dims: ModelDims, optim: str, setup: Setup) -> MemoryEstimate:
    """DeepSpeed's estimate of ZeRO model states (16-bit weights and gradients, fp32 master weights, gradients and
    Adam moments), its 8 bytes of Adam moments swapped for the recipe's optimizer."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    total, per_node = max(setup.processes, 1), setup.per_node or max(setup.processes, 1)
    nodes = max(total // per_node, 1)
    extra_states = (optimizer_state_bytes(optim, 4) - 8) * dims.params
    est = MemoryEstimate()
    if setup.sharding == "zero3":
        cpu, gpu, gathered = estimate_zero3_model_states_mem_needs(
            dims.params, dims.largest_layer, per_node, nodes, cpu_offload=setup.offload_optimizer,
            cpu_offload_params=setup.offload_params, zero_init=True, additional_buffer_factor=1.0)
        est.parts["gathered layer buffers"] = gathered
        sharded = gpu - gathered
        if not setup.offload_optimizer:
            sharded += int(extra_states / total)
        est.parts["weights, gradients and optimizer states (ZeRO-3 shards)"] = sharded
    else:
        cpu, gpu = estimate_zero2_model_states_mem_needs(dims.params, per_node, nodes,
                                                         cpu_offload=setup.offload_optimizer,
                                                         additional_buffer_factor=1.0)
        est.parts["weights (16-bit, replicated)"] = 2 * dims.params
        sharded = gpu - 2 * dims.params + (0 if setup.offload_optimizer else int(extra_states / total))
        if setup.sharding == "zero1":  # ZeRO-1 keeps whole 16-bit gradients on every rank
            sharded += 2 * dims.params - 2 * dims.params // total
        label = "gradients and optimizer states" + (f" (ZeRO-{setup.sharding[-1]} shards)" if total > 1 else "")
        est.parts[label] = sharded
    if setup.offload_optimizer:
        est.cpu = int(cpu + extra_states / nodes)
    est.parts["ZeRO buckets"] = zero_bucket_bytes(dims, setup, DTYPE_BYTES.get(setup.dtype, 4))
    return est


def zero_bucket_bytes(dims: ModelDims, setup: Setup, b: int) -> int:
    """Bytes DeepSpeed holds beside the model states under ZeRO, in the weights' dtype: the gradient reduce bucket
    (one: smolalign's configs leave overlap_comm off) and, under ZeRO-3, the prefetched parameters and the ones under
    the persistence threshold, which stay whole on every rank (the norms' weights in a Llama-style model). "auto" is
    what transformers fills in (HfTrainerDeepSpeedConfig.trainer_config_finalize): hidden², 0.9·hidden², 10·hidden."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    fields = {"reduce_bucket_size": "reduce_bucket_size", "stage3_prefetch_bucket_size": "prefetch_bucket_size",
              "stage3_param_persistence_threshold": "param_persistence_threshold"}  # DeepSpeed's names for them
    auto = {"reduce_bucket_size": dims.hidden ** 2, "stage3_prefetch_bucket_size": int(0.9 * dims.hidden ** 2),
            "stage3_param_persistence_threshold": 10 * dims.hidden}
    stated = dict.fromkeys(fields, "auto") if setup.zero_buckets is None else dict(setup.zero_buckets)

    def size(key: str) -> int:
        value = stated.get(key, int(DeepSpeedZeroConfig.model_fields[fields[key]].default))
        return auto[key] if value == "auto" else int(value)

    elements = size("reduce_bucket_size")
    if setup.sharding == "zero3":
        norms = (2 * dims.layers + 1) * dims.hidden  # two per decoder layer and the final one
        persistent = norms if dims.hidden <= size("stage3_param_persistence_threshold") else 0
        elements += size("stage3_prefetch_bucket_size") + persistent
    return elements * b


def estimate_memory(dims: ModelDims, settings: Mapping, setup: Setup, *, extra: Mapping[str, int] | None = None
                    ) -> MemoryEstimate:
    """Memory per device by part and at the peak. `settings` holds the effective training settings
    (`tokens_per_micro_batch`, `gradient_checkpointing`, `gradient_accumulation_steps`, `optim`, `score_head`);
    `extra` adds parts held for the whole step (a reference or teacher model, vLLM's share)."""
    est = model_states(dims, settings, setup)
    b = DTYPE_BYTES.get(setup.dtype, 4)
    tokens = int(settings.get("tokens_per_micro_batch") or 0)
    transient = activation_bytes(dims, tokens, b, bool(settings.get("gradient_checkpointing")), triton=setup.gpu)
    if settings.get("score_head"):  # a reward model reads one score per sequence: no vocabulary logits
        del transient["logits and loss (chunked)"]
    est.parts.update(transient)
    est.parts.update(extra or {})
    if setup.gpu:
        est.parts["CUDA context and workspaces"] = CUDA_CONTEXT
    held = sum(v for k, v in est.parts.items() if k not in transient and k != "gradients")
    activations = sum(transient.values())
    gradients = est.parts.get("gradients", 0)
    if int(settings.get("gradient_accumulation_steps") or 1) > 1:
        est.peak = held + gradients + activations  # gradients accumulate while the next micro-batch runs
    else:
        est.peak = held + max(gradients, activations)  # freed after each step, allocated as activations go
    return est
