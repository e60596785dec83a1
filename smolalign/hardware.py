"""What the machine offers (devices, bf16, world size; GPUs counted without starting CUDA) and the dtype / precision
flags that follow from it.

dtype and precision are decided from the hardware, not from the recipe: a recipe written for GPUs runs on a
laptop CPU in float32 without edits, and a recipe asking for bf16 on a CPU is told so instead of crashing.
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
    return Hardware("cpu", 0, platform.processor() or platform.machine(), False, world_size, os.cpu_count() or 1)


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
    """`auto` -> float32 on CPU, bfloat16 on a GPU with bf16, else float16; half precision on CPU -> float32."""
    if requested == "auto":
        if not hardware.on_gpu:
            return "float32"
        return "bfloat16" if hardware.bf16 else "float16"
    if not hardware.on_gpu and requested in ("bfloat16", "float16"):
        return "float32"
    return requested


def precision_flags(dtype: str, hardware: Hardware) -> dict:
    """TrainingArguments flags for this hardware: CPU -> use_cpu, no mixed precision; GPU -> bf16/fp16 by dtype."""
    if not hardware.on_gpu:
        return {"use_cpu": True, "bf16": False, "fp16": False}
    return {"bf16": dtype == "bfloat16", "fp16": dtype == "float16"}


def free_accelerator_memory() -> None:
    """Collect what was dropped and hand cached GPU memory back to the device (a no-op without CUDA)."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
