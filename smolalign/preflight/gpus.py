"""The preflight checks of what a recipe needs from the GPUs it runs on: one training process per GPU (beside a
started vLLM server's), GPUs that compute in bfloat16 when it asks for them, and an NVIDIA driver that runs the CUDA
torch is built for. `processes_problem` is the one statement of the process rule: `launch.relaunch` asks it too,
for --num-processes, before it starts anything."""

import re
import subprocess
from pathlib import Path

from smolalign import hardware
from smolalign.gpu_partition import server_device_count, training_device_count
from smolalign.resolve import Run


def processes_problem(processes: int, gpus: int, generation, where: str, option: str) -> str | None:
    """One training process per GPU of the node's `gpus`, the GPUs of a vLLM server the run starts beside training
    (`generation`; None when the server has a node of its own) left out: None, or what is wrong, the process count
    named as `option`."""
    training = training_device_count(gpus, generation)
    if gpus < 1 or processes <= training:
        return None
    if training < gpus:
        server = server_device_count(generation.server)
        return (f"generation.server: the server's {server} GPU(s) and {processes} training process(es) need "
                f"{server + processes} GPUs, {where} has {gpus}; use --num-processes {training}, "
                "generation.backend: vllm_colocate, or set generation.server.base_url")
    return (f"{option} {processes}: {where} has {gpus} GPU(s) for training, one per process; use --num-processes "
            f"{gpus} or fewer")


def check_processes(run: Run) -> str | None:
    """One training process per GPU, beside a started vLLM server's GPUs (unless the server has a node of its own)."""
    recipe, target = run.recipe, run.target
    generation = None if target.server_node else recipe.generation
    return processes_problem(target.processes, target.gpus, generation, target.where, "launch.num_processes")


def check_bf16(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    asks = recipe.model.dtype == "bfloat16" or recipe.train.get("bf16") is True
    if not (asks and target.gpus):
        return None
    bf16 = target.bf16 if target.bf16 is not None or not target.here else hardware.gpu_computes_bf16()
    if bf16 is False:
        key = "model.dtype bfloat16" if recipe.model.dtype == "bfloat16" else "train.bf16"
        return f"{key}: the GPUs of {target.where} do not compute in bfloat16; use float16 (model.dtype, train.fp16)"
    return None


CUDA_DRIVER_MINIMUM = {13: 580, 12: 525, 11: 450}
"""The oldest NVIDIA driver (major version) each CUDA major version runs on with minor-version compatibility
(NVIDIA's CUDA Toolkit release notes): torch's and vLLM's CUDA wheels need it, and an older one leaves torch without a
GPU (`torch.cuda.is_available()` false) while NVML still counts the GPUs."""
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")


def nvidia_driver_version() -> str | None:
    """The loaded NVIDIA kernel driver's version (e.g. 580.65.06), or None where there is none: from the kernel
    module's own line, else nvidia-smi."""
    try:
        text = DRIVER_VERSION_FILE.read_text()
    except OSError:
        text = ""
    if found := re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text):
        return found.group(1)
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.splitlines()[0].strip() if out else ""
    return first if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", first) else None


def check_driver(run: Run) -> str | None:
    """On this machine (a Slurm job's nodes have their own driver): its NVIDIA driver runs the CUDA torch is built
    for."""
    target = run.target
    if not target.here:
        return None
    import torch

    cuda = torch.version.cuda
    driver = nvidia_driver_version() if cuda else None
    if driver is None:
        return None
    needed = CUDA_DRIVER_MINIMUM.get(int(cuda.split(".")[0]))
    if needed is None or int(driver.split(".")[0]) >= needed:
        return None
    return (f"NVIDIA driver {driver}: this torch is built for CUDA {cuda}, which needs driver >= {needed}; update the "
            f"driver to {needed} or later, or install torch (and vLLM) built for a CUDA this driver runs")
