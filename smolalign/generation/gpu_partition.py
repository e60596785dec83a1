"""The GPUs of a run whose vLLM server smolalign starts on the same node: the server gets `generation.server.gpus`,
else the last `tensor_parallel` visible ones, and training keeps the others (each process's CUDA_VISIBLE_DEVICES,
set before CUDA starts in it)."""

import os

from smolalign.errors import SmolalignError
from smolalign.recipe.generation_schema import VllmServerSection
from smolalign.recipe.schema import Recipe

SERVER_GPUS = "SMOLALIGN_VLLM_SERVER_GPUS"
"""Set by the GPU partition for this process: the devices (in the launcher's numbering) the server gets."""


def visible_devices() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (counted without starting CUDA)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    from smolalign.hardware import visible_gpu_count

    return [str(i) for i in range(visible_gpu_count())]


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


def partition(visible: list[str], server: VllmServerSection, processes: int) -> tuple[list[str], list[str]]:
    """(the server's devices, training's devices) out of the visible ones."""
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
    return chosen, training


def claim_training_gpus(recipe: Recipe) -> None:
    """Before CUDA starts in this process: hide the GPUs a started server will use from training."""
    generation = recipe.generation
    if not starts_server_beside_training(generation):
        return
    if SERVER_GPUS in os.environ:
        return
    visible = visible_devices()
    if not visible:
        return  # no GPU here: the preflight refused this recipe already
    processes = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    server_devices, training = partition(visible, generation.server, processes)
    os.environ[SERVER_GPUS] = ",".join(server_devices)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(training)


def check_claim(device_count: int) -> None:
    """After CUDA started: training must see only its own GPUs, or it would share one with the server."""
    if SERVER_GPUS not in os.environ or "CUDA_VISIBLE_DEVICES" not in os.environ:
        return
    training = [d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d]
    if device_count != len(training):
        raise SmolalignError(f"training sees {device_count} GPUs, not its {len(training)} (CUDA started before the "
                             "vLLM server's GPUs could be hidden); set generation.server.base_url and start the "
                             "server yourself, or set CUDA_VISIBLE_DEVICES for training")


