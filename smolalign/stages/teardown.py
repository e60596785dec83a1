"""Freeing a finished stage's training state (model, optimizer, scheduler, reference or teacher model, a colocated
vLLM engine) before its `eval:` section runs: the evaluation loads the saved model again, and a vLLM backend asks
for most of the GPU's memory, which a trainer still holding the policy and its Adam moments would not leave; and
leaving the process group once the process's part of the run is done."""

from smolalign.generation.vllm_engine import leave_vllm_groups
from smolalign.hardware import free_accelerator_memory


def release_training_state(trainer) -> None:
    """Drop every reference the trainer (its accelerator and callbacks included) keeps to models, optimizers,
    schedulers and generation engines, then give the memory back to the device."""
    import torch
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    held = (torch.nn.Module, Optimizer, LRScheduler)
    engines = ("vllm_generation", "llm")
    for owner in (trainer, getattr(trainer, "callback_handler", None)):
        if owner is None:
            continue
        for name, value in list(vars(owner).items()):
            if isinstance(value, held) or (name in engines and value is not None):
                setattr(owner, name, None)
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None:
        accelerator.free_memory()  # its lists of prepared models, optimizers, schedulers and the DeepSpeed engine
    free_accelerator_memory()


def leave_process_group() -> None:
    """Close this process's distributed group once its part of the run is done. Left to interpreter exit, the
    communication threads are torn down in no particular order, and a process whose run succeeded can still abort
    ("terminate called without an active exception"), failing the whole launch."""
    import torch.distributed as dist

    leave_vllm_groups()  # a colocated engine's handles on the group go first
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

