"""The GPUs a plan can target (memory, dense 16-bit tensor FLOP/s, memory bandwidth) and memory sizes written as
text (`80GB`, `70 GiB`): `smolalign sft RECIPE --dry-run --set launch.gpu=H100 --set launch.gpu_memory=70GB`.

Figures are the vendors' dense (no sparsity) bf16 peaks; memory is what torch reports as the device total.
"""

import re
from dataclasses import dataclass

from rewards.errors import suggest
from smolalign.errors import SmolalignError

GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    name: str
    memory: int
    """Bytes torch reports as the device's total memory."""
    bf16_flops: float
    """Dense bf16 tensor-core peak, FLOP/s."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""


GPUS = {gpu.name: gpu for gpu in (
    Gpu("H100", int(79.1 * GIB), 989e12, 3.35e12),
    Gpu("H100-PCIe", int(79.1 * GIB), 756e12, 2.0e12),
    Gpu("H200", int(139.8 * GIB), 989e12, 4.8e12),
    Gpu("B200", int(178.4 * GIB), 2250e12, 8.0e12),
    Gpu("A100-80GB", int(79.2 * GIB), 312e12, 2.0e12),
    Gpu("A100-40GB", int(39.4 * GIB), 312e12, 1.56e12),
    Gpu("L40S", int(44.4 * GIB), 362e12, 0.86e12),
    Gpu("L4", int(22.0 * GIB), 121e12, 0.30e12),
    Gpu("A10", int(22.0 * GIB), 125e12, 0.60e12),
    Gpu("MI300X", int(191.5 * GIB), 1307e12, 5.3e12),
)}
"""Shipped targets; `launch.gpu` names one of them (case and punctuation do not matter)."""

_UNITS = {"": 1e9, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 1024, "mib": 1024**2, "gib": GIB, "tib": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def find_gpu(name: str) -> Gpu | None:
    """The table's GPU for a name as a user or torch writes it (`h100`, `NVIDIA H100 80GB HBM3`), else None."""
    key = _key(name)
    exact = {_key(n): gpu for n, gpu in GPUS.items()}
    if key in exact:
        return exact[key]
    if re.search(r"(^|[^a-z0-9])a100([^a-z0-9]|$)", name.lower()):  # torch: "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe"
        return GPUS["A100-40GB" if "40gb" in key else "A100-80GB"]
    # torch's device names carry the vendor and memory: the longest table name made of whole words of the name
    words = re.findall(r"[a-z0-9]+", name.lower())
    runs = {"".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    contained = sorted((n for n in exact if n in runs), key=len, reverse=True)
    return exact[contained[0]] if contained else None


def gpu_named(name: str, key: str = "launch.gpu") -> Gpu:
    """The table's GPU, or a SmolalignError naming `key` and the known types."""
    gpu = find_gpu(name)
    if gpu is None:
        raise SmolalignError(f"{key}: unknown GPU type {name!r}{suggest(name, GPUS)}; known: {', '.join(GPUS)} "
                             "(or state the memory with launch.gpu_memory)")
    return gpu


def parse_size(value: str | float | int, key: str = "launch.gpu_memory") -> int:
    """Bytes for `80GB`, `70 GiB`, `512MiB` or a plain number of GB; a SmolalignError naming `key` otherwise."""
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, int | float):
        if value <= 0:
            raise SmolalignError(f"{key}: {value!r} is not a memory size; write e.g. 80GB or 70GiB")
        return int(value * 1e9)
    match = _SIZE.match(str(value))
    if not match or match.group(2).lower() not in _UNITS or float(match.group(1)) <= 0:
        raise SmolalignError(f"{key}: {value!r} is not a memory size; write e.g. 80GB or 70GiB")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
