"""Where vLLM's model registry inspects a model class while smolalign builds an engine on a CPU: in this process.

vLLM (`vllm.model_executor.models.registry`) inspects an architecture's class (`_ModelInfo.from_model_cls`) in a fresh
Python it starts for it, to keep CUDA out of the caller, the first time a machine, or an emptied VLLM_CACHE_ROOT, meets
the architecture; the answer is then cached in VLLM_CACHE_ROOT/modelinfos. That Python costs 11 s on 2 cores. A CPU
has no CUDA to keep out, and the engine imports the same module moments later anyway, so `inspected_here` runs the
same call in this process while an engine is built (offline: vllm_engine.offline_engine; colocated with a trainer:
trl_on_cpu). A server smolalign starts still inspects in a process of its own. docs/vllm-cpu.md has the figures.
"""

import contextlib
from collections.abc import Iterator

from smolalign.hardware import Hardware


@contextlib.contextmanager
def inspected_here(hardware: Hardware) -> Iterator[None]:
    """On a CPU, while an engine is built: vLLM's registry inspects a model class (`_ModelInfo.from_model_cls`, the
    same call) in this process, where it would start a Python of its own (`registry._run_in_subprocess`; its result
    is cached in VLLM_CACHE_ROOT/modelinfos either way). Nothing changes on a GPU, where that process keeps CUDA
    uninitialised in this one."""
    if hardware.on_gpu:
        yield
        return
    from vllm.model_executor.models import registry

    original = registry._run_in_subprocess
    registry._run_in_subprocess = _run_here
    try:
        yield
    finally:
        registry._run_in_subprocess = original


def _run_here(fn):
    return fn()
