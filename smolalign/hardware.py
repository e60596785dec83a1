"""What the machine offers (devices, bf16, world size; GPUs counted without starting CUDA) and the precision of each
part of a run that follows from it: the one home of those rules.

Precision is decided from the hardware, not from the recipe, so a recipe written for GPUs runs on a laptop CPU
without edits. `model.dtype: auto` (the default) gives:

| machine | trained weights | training compute | generation, teachers, references |
|---|---|---|---|
| GPU with bf16 | bfloat16, AdamW with stochastic rounding | bf16 | bfloat16 |
| GPU without | float32 (master copy) | fp16 autocast | float16 |
| CPU with AMX or AVX512-BF16, model at least 384 wide | float32 (master copy) | bf16 autocast | bfloat16 |
| CPU with AMX or AVX512-BF16, narrower model | float32 | float32 | float32 |
| CPU without | float32 | float32 | float32 |

Trained bf16 weights lose most of AdamW's updates to rounding (an update of ~1e-5 on a weight of ~0.02 is below half of
bf16's spacing there), so wherever they are trained without a launcher that keeps float32 masters (DeepSpeed's ZeRO,
FSDP), AdamW computes each update in float32 and writes the weight back by stochastic rounding, with float32 moments
(`compensates_updates`; stages/low_precision_updates.py has the measurements). `model.dtype: float32` on a GPU trains
float32 masters under bf16 (fp16) autocast; pure float32 only with `train.bf16: false` as well (`train.fp16: false` on
a GPU without bf16). `model.dtype: float16` trains float32 masters under fp16 autocast and keeps what does not train
float16 (generation, LoRA's frozen base, a reference: `frozen_dtype`): float16 weights cannot train at all (torch's
loss scaler refuses float16 gradients, so such a run would stop at its first step). QLoRA's adapters are bfloat16 (TRL
casts them so), and take the stochastic-rounding AdamW like bf16 weights (`trained_dtype`).

On a bf16 CPU, the matrix products of a model as wide as SmolLM2-135M (576) run 1.5-2x faster in bf16
(benchmarks/RESULTS.md); training keeps float32 master weights and AdamW state, so small updates are not rounded
away, and computes under autocast. Below `CPU_BF16_MIN_WIDTH` (the model's hidden size) float32 is the faster
precision there, so it is the one used: oneDNN builds its bf16 kernels anew for each shape (packing makes a new
length most steps) and the casts cost more than such small products save (a 64-wide model trained 4-6x slower
under autocast, benchmarks/precision_width.py). Each model is judged by its own width (a teacher, a pair generator, the
policy); a width that cannot be read offline counts as wide. On a CPU, `model.dtype: float32` keeps every part
float32, and `bfloat16` on a bf16 CPU trains bf16 weights at any width (on other CPUs it falls back to float32 with a
note). `SMOLALIGN_CPU_BF16=0` overrides the CPU's reading; `=1` does too and asks for bf16 at any width (how the
tests run the autocast path on their narrow models). DeepSpeed over gloo on a CPU stays float32
(stages/trainer_config.py): its bf16 mode converts the weights themselves.
"""

import gc
import os
import platform
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    accelerator: str
    """"cuda" or "cpu"."""
    device_count: int
    device_name: str
    bf16: bool
    """Whether the accelerator computes in bfloat16 natively."""
    world_size: int
    """Processes in this run (WORLD_SIZE from the launcher, else 1)."""
    cpu_count: int

    @property
    def on_gpu(self) -> bool:
        return self.accelerator == "cuda"

    def describe(self) -> dict:
        return {"accelerator": self.accelerator, "device_count": self.device_count, "device_name": self.device_name,
                "bf16": self.bf16, "world_size": self.world_size, "cpu_count": self.cpu_count,
                "platform": platform.platform(), "python": platform.python_version()}


def detect_hardware() -> Hardware:
    import torch

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if torch.cuda.is_available():
        return Hardware("cuda", torch.cuda.device_count(), torch.cuda.get_device_name(0),
                        torch.cuda.is_bf16_supported(), world_size, os.cpu_count() or 1)
    return Hardware("cpu", 0, platform.processor() or platform.machine(), cpu_computes_bf16(), world_size,
                    os.cpu_count() or 1)


CPU_BF16_VARIABLE = "SMOLALIGN_CPU_BF16"


def cpu_computes_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AMX tiles or AVX512-BF16, as torch reads them);
    SMOLALIGN_CPU_BF16=0/1 overrides the reading. Elsewhere torch emulates bf16, slower than float32."""
    override = os.environ.get(CPU_BF16_VARIABLE, "").strip()
    if override in ("0", "1"):
        return override == "1"
    import torch

    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def processes_on_this_node() -> int:
    """Training processes the launcher started on this node (LOCAL_WORLD_SIZE, else WORLD_SIZE, else 1)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1)


def visible_gpu_count() -> int:
    """CUDA devices visible to this process, counted without initialising CUDA (NVML; honours CUDA_VISIBLE_DEVICES)."""
    import torch

    return torch.cuda.device_count() if torch.backends.cuda.is_built() else 0


def gpu_computes_bf16() -> bool | None:
    """Asked in a child process: initialising CUDA here would fix this process's visible GPUs too early."""
    probe = "import torch; print(torch.cuda.is_bf16_supported(including_emulation=False))"
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"True": True, "False": False}.get(out.strip())


CPU_BF16_MIN_WIDTH = 384
"""The narrowest model (hidden size) computed in bf16 on a CPU by default. On the 2-core AMX Xeon (three runs of
benchmarks/precision_width.py, RESULTS.md) bfloat16 generation was 0.84-1.23x float32's speed at 256 wide and
1.45-1.49x at 384, autocast training 0.90-0.92x at 256, 0.82-1.03x at 384 and 1.06-1.21x from 448; one threshold
keeps the training and the generation of a run in one precision (a vLLM engine's log-probs match the trainer's)."""


def cpu_bf16_pays(hardware: Hardware, width: int | None) -> bool:
    """Whether a model `width` wide (its hidden size; None: not known) computes faster in bf16 than in float32 on
    this CPU: the CPU computes bf16 natively and the model is at least CPU_BF16_MIN_WIDTH wide (or of unknown width),
    or SMOLALIGN_CPU_BF16=1 asks for bf16 at any width. False on a GPU: its precision follows the weights."""
    if hardware.on_gpu or not hardware.bf16:
        return False
    forced = os.environ.get(CPU_BF16_VARIABLE, "").strip() == "1"
    return forced or width is None or width >= CPU_BF16_MIN_WIDTH


def resolve_dtype(requested: str, hardware: Hardware, *, adapters: bool = False) -> str:
    """The dtype the policy's weights load in (the module's table): `auto` -> bfloat16 on a GPU with bf16, else
    float32 (a float32 master copy under fp16 autocast on an older GPU); `float16` -> float32 master weights where
    the weights train (fp16 autocast on a GPU: float16 weights cannot train), float16 for LoRA's frozen base on a GPU
    (`adapters`); on a CPU, bfloat16 only where it computes in it."""
    if requested == "auto":
        return "bfloat16" if hardware.on_gpu and hardware.bf16 else "float32"
    if requested == "float16":
        return "float16" if adapters and hardware.on_gpu else "float32"
    if not hardware.on_gpu and requested == "bfloat16":
        return "bfloat16" if hardware.bf16 else "float32"
    return requested


def frozen_dtype(requested: str, hardware: Hardware) -> str:
    """The dtype of a frozen copy of the policy trained against (a preference method's reference): the weights' own
    dtype as a frozen base loads it (float16 stays float16: only trained weights need float32 masters)."""
    return resolve_dtype(requested, hardware, adapters=True)


def trained_dtype(requested: str, hardware: Hardware, *, adapters: bool = False, quantized: bool = False) -> str:
    """The dtype of the parameters the optimizer updates: the weights' (`resolve_dtype`), or LoRA's adapters'."""
    return adapter_dtype(quantized=quantized) if adapters else resolve_dtype(requested, hardware)


def adapter_dtype(*, quantized: bool) -> str:
    """LoRA adapters' dtype on every device: float32 (peft's), bfloat16 over a quantized base (QLoRA: TRL's trainers
    cast them so)."""
    return "bfloat16" if quantized else "float32"


def generation_dtype(requested: str, hardware: Hardware, width: int | None) -> str:
    """The dtype of a model `width` wide that only generates or scores (eval, pairs, chat, vLLM rollouts, teachers):
    as frozen weights (`frozen_dtype`), except that `auto` on a bf16 CPU is bfloat16 where bf16 pays at that width
    and on a GPU without bf16 float16 (nothing is updated, so nothing is rounded away)."""
    if requested == "auto" and cpu_bf16_pays(hardware, width):
        return "bfloat16"
    if requested == "auto" and hardware.on_gpu:
        return "bfloat16" if hardware.bf16 else "float16"
    return frozen_dtype(requested, hardware)


def cpu_autocast(requested: str, hardware: Hardware, width: int | None) -> bool:
    """Whether training a model `width` wide on this CPU computes under bf16 autocast over float32 master weights
    (`model.dtype` auto on a bf16 CPU, where bf16 pays at that width)."""
    return requested == "auto" and cpu_bf16_pays(hardware, width)


CPU_AUTOCAST_ATTENTION = "smolalign_cpu_autocast"
"""The attention implementation smolalign registers with transformers (smolalign/models/cpu_attention.py)."""


def autocast_attention(requested: str, hardware: Hardware, weights: str, width: int | None) -> str | None:
    """The attention implementation for a model `width` wide loaded with `weights` dtype when the recipe names none:
    for float32 weights that compute under bf16 autocast on a CPU (`cpu_autocast`), smolalign's, which takes eager
    attention for short sequences and SDPA for long ones (smolalign/models/cpu_attention.py has the measurements);
    None (transformers' default, SDPA) everywhere else."""
    return CPU_AUTOCAST_ATTENTION if weights == "float32" and cpu_autocast(requested, hardware, width) else None


def precision_flags(requested: str, hardware: Hardware, width: int | None) -> dict:
    """TrainingArguments flags for this hardware, `model.dtype` and the trained model's width: CPU -> use_cpu, with
    bf16 autocast where `cpu_autocast`; GPU -> bf16 (fp16 on a GPU without bf16) for 16-bit and float32 weights
    alike: float32 weights are master weights under autocast there, never pure float32 unless the recipe sets
    `train.bf16: false` (a recipe's own flags win on a GPU, stages/trainer_config.py)."""
    if not hardware.on_gpu:
        return {"use_cpu": True, "bf16": cpu_autocast(requested, hardware, width), "fp16": False}
    if requested == "float16":
        return {"bf16": False, "fp16": True}
    return {"bf16": hardware.bf16, "fp16": not hardware.bf16}


def autocast_flags(requested: str, hardware: Hardware, width: int | None, train: dict) -> dict:
    """The bf16/fp16 flags a run's trainer gets: `precision_flags`, with the recipe's own train.bf16/fp16 winning on
    a GPU (on a CPU the machine decides; stages/trainer_config.py notes where it overrules the recipe)."""
    flags = precision_flags(requested, hardware, width)
    if hardware.on_gpu:
        flags = {**flags, **{key: train[key] for key in ("bf16", "fp16") if key in train}}
    return flags


LOW_PRECISION_DTYPES = ("bfloat16", "float16")

DEFAULT_ADAMW = ("adamw_torch", "adamw_torch_fused")
"""transformers' names for torch's AdamW: the default `train.optim` (fused where torch has it)."""


def compensates_updates(weights: str, sharded: bool, optim: str = "adamw_torch") -> bool:
    """Whether the optimizer keeps the updates AdamW's small steps would lose on trained weights of dtype `weights`:
    bfloat16 weights trained with AdamW (`train.optim`; another optimizer is kept as asked) without a launcher that
    keeps float32 master weights itself (`sharded`: DeepSpeed's ZeRO or FSDP under mixed precision). Where it does,
    the run trains with AdamW that rounds stochastically (stages/low_precision_updates.py), its moments float32."""
    return weights == "bfloat16" and not sharded and optim in DEFAULT_ADAMW


def precision_description(requested: str, hardware: Hardware, width: int | None, *, sharded: bool = False,
                          adapters: bool = False, quantized: str | None = None, autocast: bool | None = None,
                          optim: str = "adamw_torch") -> str:
    """One line for the plan: each part's precision and why (for a model `width` wide; `sharded`: launched with
    DeepSpeed's ZeRO or FSDP; `adapters`: LoRA trains adapters; `quantized`: the base's quantization ("4bit", "8bit";
    QLoRA); `autocast`: the recipe's own train.bf16 or train.fp16 on a GPU, None when it sets neither; `optim`:
    train.optim), ending with how the updates of bf16 trained parameters keep their precision."""
    weights = resolve_dtype(requested, hardware, adapters=adapters)
    generation = generation_dtype(requested, hardware, width)
    updates = _updates(trained_dtype(requested, hardware, adapters=adapters, quantized=bool(quantized)), sharded,
                       optim)
    if adapters and (hardware.on_gpu or quantized):
        adapter = "bfloat16 LoRA adapters (TRL casts QLoRA's so)" if quantized else "float32 LoRA adapters (peft)"
        base = f"{quantized} quantized base weights" if quantized else f"{weights} base weights"
        if not hardware.on_gpu:
            compute = ""
        elif autocast is False:
            compute = ", float32 compute (train.bf16/fp16 false)"
        else:
            compute = f", {_gpu_compute(requested, hardware)} compute"
        return f"{base}, {adapter}{compute}{updates}"
    if hardware.on_gpu:
        return _gpu_precision(requested, weights, hardware, autocast=autocast) + updates
    if sharded:  # on a CPU, DeepSpeed over gloo (FSDP presets need GPUs): stages/trainer_config.py turns bf16 off
        return (f"{weights} weights, no autocast (DeepSpeed on a CPU: its bf16 mode would turn the weights themselves "
                f"into bf16){updates}")
    if cpu_autocast(requested, hardware, width):
        return ("float32 weights, bf16 autocast; generation bfloat16 (the CPU computes in bf16: AMX or "
                "AVX512-BF16)")
    if weights == "bfloat16":
        return f"bfloat16 weights and generation (model.dtype bfloat16 on a bf16 CPU){updates}"
    if requested == "auto" and hardware.bf16:
        return (f"float32 for training and generation (the model is {width} wide: below {CPU_BF16_MIN_WIDTH}, "
                "float32 is faster than bf16 on this CPU)")
    why = {"float32": "model.dtype float32",
           "float16": "float16 is never used on a CPU"}.get(requested, "the CPU has no native bf16")
    return f"{generation} for training and generation ({why})"


def _gpu_compute(requested: str, hardware: Hardware) -> str:
    return "fp16" if requested == "float16" or not hardware.bf16 else "bf16"


def _gpu_precision(requested: str, weights: str, hardware: Hardware, *, autocast: bool | None) -> str:
    compute = _gpu_compute(requested, hardware)
    if weights == "float32":
        if autocast is False:
            return "float32 weights and compute (train.bf16/fp16 false: pure float32, as asked)"
        if requested == "float16":
            return ("float32 master weights, fp16 autocast, generation float16 (model.dtype float16: float16 weights "
                    "cannot train, torch's loss scaler refuses their gradients)")
        return f"float32 master weights, {compute} autocast"
    return f"{weights} weights, {compute} compute"


def _updates(trained: str, sharded: bool, optim: str) -> str:
    """How the updates of trained parameters of dtype `trained` keep their precision (nothing to say for float32)."""
    if trained != "bfloat16":
        return ""
    if sharded:
        return "; the launcher keeps float32 master weights (DeepSpeed/FSDP)"
    if compensates_updates(trained, False, optim):
        return "; AdamW rounds each update into them stochastically (float32 moments)"
    return f"; train.optim {optim} rounds each update into them to the nearest: updates below bf16's spacing are lost"


def free_accelerator_memory() -> None:
    """Collect what was dropped and hand cached GPU memory back to the device (a no-op without CUDA)."""
    import torch  # here: `smolalign --help` imports no torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
