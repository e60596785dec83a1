"""What the machine offers (devices, bf16, world size; GPUs counted without starting CUDA) and the precision of each
part of a run that follows from it: the one home of those rules.

Precision is decided from the hardware, not from the recipe, so a recipe written for GPUs runs on a laptop CPU
without edits. `model.dtype: auto` (the default) gives:

| machine | trained weights | training compute | generation, teachers, references |
|---|---|---|---|
| GPU with bf16 | bfloat16 | bf16 | bfloat16 |
| GPU without | float16 | fp16 | float16 |
| CPU with AMX or AVX512-BF16 | float32 (master copy) | bf16 autocast | bfloat16 |
| CPU without | float32 | float32 | float32 |

On a bf16 CPU, matrix products run several times faster in bf16 (benchmarks/RESULTS.md); training keeps float32
master weights and AdamW state, so small updates are not rounded away, and computes under autocast. `model.dtype:
float32` keeps every part float32 anywhere; `bfloat16` on a bf16 CPU trains bf16 weights (on other CPUs it falls back
to float32 with a note). `SMOLALIGN_CPU_BF16=0` (or 1) overrides the CPU's reading. DeepSpeed over gloo on a
CPU stays float32 (stages/trainer_config.py): its bf16 mode converts the weights themselves.
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


def resolve_dtype(requested: str, hardware: Hardware) -> str:
    """The dtype trained weights load in (the module's table): `auto` -> float32 on a CPU, bfloat16 on a GPU with
    bf16, else float16; on a CPU, bfloat16 only where it computes in it, float16 never."""
    if requested == "auto":
        if not hardware.on_gpu:
            return "float32"
        return "bfloat16" if hardware.bf16 else "float16"
    if not hardware.on_gpu and requested in ("bfloat16", "float16"):
        return "bfloat16" if requested == "bfloat16" and hardware.bf16 else "float32"
    return requested


def generation_dtype(requested: str, hardware: Hardware) -> str:
    """The dtype of a model that only generates or scores (eval, pairs, chat, vLLM rollouts, teachers): as trained
    weights, except that `auto` on a bf16 CPU is bfloat16 (nothing is updated, so nothing is rounded away)."""
    if requested == "auto" and not hardware.on_gpu and hardware.bf16:
        return "bfloat16"
    return resolve_dtype(requested, hardware)


def cpu_autocast(requested: str, hardware: Hardware) -> bool:
    """Whether training on this CPU computes under bf16 autocast over float32 master weights (`model.dtype` auto on
    a bf16 CPU)."""
    return not hardware.on_gpu and hardware.bf16 and requested == "auto"


CPU_AUTOCAST_ATTENTION = "smolalign_cpu_autocast"
"""The attention implementation smolalign registers with transformers (smolalign/models/cpu_attention.py)."""


def autocast_attention(requested: str, hardware: Hardware, weights: str) -> str | None:
    """The attention implementation for a model loaded with `weights` dtype when the recipe names none: for float32
    weights that compute under bf16 autocast on a CPU (`cpu_autocast`), smolalign's, which takes eager attention
    for short sequences and SDPA for long ones (smolalign/models/cpu_attention.py has the measurements); None
    (transformers' default, SDPA) everywhere else."""
    return CPU_AUTOCAST_ATTENTION if weights == "float32" and cpu_autocast(requested, hardware) else None


def precision_flags(requested: str, hardware: Hardware) -> dict:
    """TrainingArguments flags for this hardware and `model.dtype`: CPU -> use_cpu, with bf16 autocast where
    `cpu_autocast`; GPU -> bf16/fp16 by the weights' dtype."""
    if not hardware.on_gpu:
        return {"use_cpu": True, "bf16": cpu_autocast(requested, hardware), "fp16": False}
    dtype = resolve_dtype(requested, hardware)
    return {"bf16": dtype == "bfloat16", "fp16": dtype == "float16"}


def precision_description(requested: str, hardware: Hardware) -> str:
    """One line for the plan: each part's precision and why."""
    weights, generation = resolve_dtype(requested, hardware), generation_dtype(requested, hardware)
    if hardware.on_gpu:
        return f"{weights} ({ {'bfloat16': 'bf16', 'float16': 'fp16'}.get(weights, weights) } on GPU)"
    if cpu_autocast(requested, hardware):
        return ("float32 weights, bf16 autocast; generation bfloat16 (the CPU computes in bf16: AMX or "
                "AVX512-BF16)")
    if weights == "bfloat16":
        return "bfloat16 weights and generation (model.dtype bfloat16 on a bf16 CPU)"
    why = {"float32": "model.dtype float32",
           "float16": "float16 is never used on a CPU"}.get(requested, "the CPU has no native bf16")
    return f"{generation} for training and generation ({why})"


def free_accelerator_memory() -> None:
    """Collect what was dropped and hand cached GPU memory back to the device (a no-op without CUDA)."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
