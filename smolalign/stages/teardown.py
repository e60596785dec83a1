"""Freeing a finished stage's training state (model, optimizer, scheduler, reference or teacher model, a colocated
vLLM engine) before its `eval:` section runs: the evaluation loads the saved model again, and a vLLM backend asks
for most of the GPU's memory, which a trainer still holding the policy and its Adam moments would not leave."""

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
