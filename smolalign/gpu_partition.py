"""The GPUs of a run whose vLLM server smolalign starts on the same node: the server gets `generation.server.gpus`,
else the last `tensor_parallel` visible ones, and training keeps the others. The partition is a value handed to
whoever starts the processes: the training processes get it in their environment (their CUDA_VISIBLE_DEVICES, which
must be set before CUDA starts in them, and SERVER_GPUS), the server its GPUs in its own; the environment of the
process that works it out is never changed."""

import os
from collections.abc import Mapping
from dataclasses import dataclass

from smolalign import hardware
from smolalign.errors import SmolalignError
from smolalign.recipe.generation_schema import VllmServerSection
from smolalign.recipe.schema import Recipe

SERVER_GPUS = "SMOLALIGN_VLLM_SERVER_GPUS"
"""Set in the environment of the training processes smolalign starts on a partition (never in its own): the devices,
in the starting process's numbering, the server gets."""


@dataclass(frozen=True)
class GpuPartition:
    server: tuple[str, ...]
    """The server's devices, as CUDA_VISIBLE_DEVICES entries of the process that made the partition."""
    training: tuple[str, ...]
    """Training's devices, in the same numbering."""

    def training_env(self) -> dict[str, str]:
        """What a training process started on this partition gets in its environment."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.training), SERVER_GPUS: ",".join(self.server)}


def _entries(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def visible_devices(environ: Mapping[str, str] | None = None) -> list[str]:
    """The GPUs a process with `environ` may use, as CUDA_VISIBLE_DEVICES entries (counted without starting CUDA)."""
    environ = os.environ if environ is None else environ  # read at call time: tests replace it
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return list(_entries(listed))

    return [str(i) for i in range(hardware.visible_gpu_count())]


def starts_server_beside_training(generation) -> bool:
    """Whether the run starts its own vLLM server on GPUs of the training node."""
    return generation is not None and generation.backend == "vllm_server" and not generation.server.base_url


def server_device_count(server: VllmServerSection) -> int:
    """GPUs a started server takes from the node: generation.server.gpus, else tensor_parallel."""
    return len(set(server.gpus)) if server.gpus else server.tensor_parallel


def training_device_count(gpus: int, generation) -> int:
    """Of a node's `gpus`, those left for training processes (one each) once a started server has its own."""
    if gpus < 1 or not starts_server_beside_training(generation):
        return max(gpus, 0)
    return max(gpus - server_device_count(generation.server), 0)


def partition(visible: list[str], server: VllmServerSection, processes: int) -> GpuPartition:
    """The server's devices and training's, out of the visible ones."""
    if server.gpus:
        beyond = [g for g in server.gpus if g >= len(visible)]
        if beyond:
            raise SmolalignError(f"generation.server.gpus {server.gpus}: only {len(visible)} GPU(s) are visible "
                                 f"({','.join(visible) or 'none'}); name GPUs that exist")
        chosen = [visible[g] for g in dict.fromkeys(server.gpus)]
    else:
        chosen = visible[max(len(visible) - server.tensor_parallel, 0):]
    training = [d for d in visible if d not in chosen]
    if len(training) < max(processes, 1):
        raise SmolalignError(f"generation.server: {len(visible)} GPU(s) cannot hold the server ({len(chosen)}) and "
                             f"{processes} training process(es); use generation.backend: vllm_colocate, or set "
                             "generation.server.base_url to a server elsewhere")
    return GpuPartition(tuple(chosen), tuple(training))


def handed_partition(environ: Mapping[str, str] | None = None) -> GpuPartition | None:
    """The partition the process that started one with `environ` handed it (`GpuPartition.training_env`), if any."""
    environ = os.environ if environ is None else environ  # read at call time: tests replace it
    if SERVER_GPUS not in environ:
        return None
    return GpuPartition(_entries(environ[SERVER_GPUS]), _entries(environ.get("CUDA_VISIBLE_DEVICES", "")))


def partition_for_children(generation, processes: int, environ: Mapping[str, str] | None = None
                           ) -> GpuPartition | None:
    """The partition a process with `environ` starts `processes` training processes on: None when no server starts
    beside training, when there is no GPU, when it was started on a partition itself (its children inherit it), or
    when the GPUs cannot hold both (the preflight refuses that, naming the recipe's key)."""
    environ = os.environ if environ is None else environ  # read at call time: tests replace it
    if not starts_server_beside_training(generation) or handed_partition(environ) is not None:
        return None
    visible = visible_devices(environ)
    if not visible:
        return None  # no GPU here: the server shares the machine
    try:
        return partition(visible, generation.server, processes)
    except SmolalignError:
        return None


def partition_of_this_process(recipe: Recipe, device_count: int, environ: Mapping[str, str] | None = None
                              ) -> GpuPartition | None:
    """The GPUs of the server a training process starts, and its own: the partition it was started on
    (`smolalign rl` starts training that way), else, for a process another launcher started, worked out from what it
    sees, its rank training on the GPU of its local rank. Refused where training would use a GPU of the server's:
    which GPUs a process sees is fixed by the environment it was started with, and this one was not given the
    partition's."""
    environ = os.environ if environ is None else environ  # read at call time: tests replace it
    generation = recipe.generation
    if not starts_server_beside_training(generation):
        return None
    handed = handed_partition(environ)
    if handed is not None:
        if device_count != len(handed.training):
            raise SmolalignError(f"training sees {device_count} GPUs, not the {len(handed.training)} it was started "
                                 f"with (CUDA_VISIBLE_DEVICES={','.join(handed.training)}); set "
                                 "generation.server.base_url and start the server yourself, or set "
                                 "CUDA_VISIBLE_DEVICES for training")
        return handed
    visible = visible_devices(environ)
    if not visible:
        return None
    processes = int(environ.get("LOCAL_WORLD_SIZE") or 1)
    found = partition(visible, generation.server, processes)
    used = visible[:processes] if "WORLD_SIZE" in environ else visible  # a launcher's rank i trains on device i
    shared = [d for d in used if d in found.server]
    if shared:
        raise SmolalignError(f"generation.server: training would use GPU(s) {','.join(shared)}, the server's; run "
                             f"`smolalign {recipe.stage}`, which starts training on the other GPUs, or start this "
                             f"process with {' '.join(f'{k}={v}' for k, v in found.training_env().items())}")
    return found


def server_devices(server: VllmServerSection, gpus: GpuPartition | None) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for the server smolalign starts: the partition's server devices, else `server.gpus` as
    written (no partition: no GPU counted here), else nothing (the server sees what this process sees)."""
    if gpus is not None:
        return {"CUDA_VISIBLE_DEVICES": ",".join(gpus.server)}
    if server.gpus:
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in server.gpus)}
    return {}
