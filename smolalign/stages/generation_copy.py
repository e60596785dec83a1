"""The bfloat16 copy a trainer generates with, on a CPU that computes in bf16.

There training keeps float32 weights and computes under bf16 autocast (smolalign.hardware), and TRL's trainers that
sample with transformers (GRPO, RLOO, distillation, GOLD, online DPO) call `generate` on the model being trained:
under accelerate's autocast wrapper every decoding step casts every weight to bf16 again, once per new token. A bf16
copy of the policy, refreshed from the trained weights before each generation (one cast of the weights instead of
one per token), samples the same policy faster (the quickstart's GRPO generation: 4.13 s against 2.83 s per step on
2 cores, benchmarks/cpu_training.py).

`bf16_generation_copy` puts that copy in the place of the model TRL unwraps for generation
(`trl.models.utils.unwrap_model_for_generation`, which each trainer module imports by name). It applies only while
generating for a float32 model under bf16 mixed precision on a CPU, with the model whole in this process (not
ZeRO-3, not PEFT); anything else gets TRL's own model. The copy's buffers (rotary frequencies) stay float32, as in a
model loaded in bfloat16. The copy costs the weights once more in bf16 (270 MB for 135M parameters). Its `generate`
reads each distinct prompt once for the rows that repeat it (smolalign/trainers/shared_prefill.py).
"""

import contextlib
import sys
import types
import weakref
from collections.abc import Iterator
from copy import deepcopy

from smolalign.hardware import CPU_AUTOCAST_ATTENTION
from smolalign.trainers.shared_prefill import generate_sharing_prompts


def generation_model(model, accelerator, copies: "weakref.WeakKeyDictionary"):
    """The model to generate with: `model` itself, or its bf16 copy refreshed from its current weights. `copies` maps
    a trained model to its copy (made on its first generation, refreshed before each one)."""
    import torch

    if not _copy_applies(model, accelerator):
        return model
    copy = copies.get(model)
    if copy is None:
        copy = copies[model] = _bf16_copy(model)
    with torch.no_grad():
        for target, source in zip(copy.parameters(), model.parameters(), strict=True):
            target.copy_(source)
    copy.generation_config = model.generation_config
    return copy


def _copy_applies(model, accelerator) -> bool:
    import torch

    if accelerator.device.type != "cpu" or accelerator.mixed_precision != "bf16":
        return False
    if hasattr(model, "peft_config") or getattr(accelerator.state, "deepspeed_plugin", None) is not None:
        return False
    return all(p.dtype == torch.float32 for p in model.parameters())


def _bf16_copy(model):
    import torch

    twin = deepcopy(model)
    for module in twin.modules():
        # accelerate's autocast wrapper and TRL's fused LM head are set on the instance, bound to the trained model
        module.__dict__.pop("forward", None)
    for parameter in twin.parameters():
        # requires_grad stays as it is (TRL generates under no_grad): with a bf16 weight that does not require grad,
        # torch 2.13's CPU matmul does not fold the non-contiguous last-position slice `generate` passes the LM head
        # and takes 2.6 s instead of 8 ms per token (32 x 576 hidden states, 49,152 x 576 weight)
        parameter.data = parameter.data.to(torch.bfloat16)
    if twin.config._attn_implementation in ("eager", CPU_AUTOCAST_ATTENTION):
        # eager is the training default under CPU autocast for short sequences (hardware.autocast_attention);
        # decoding from a KV cache it copies every cached key and value at every token (GRPO's batch: 4.2 of 8.8 s):
        # SDPA decodes
        twin.set_attn_implementation("sdpa")
    twin.generate = types.MethodType(generate_sharing_prompts, twin)  # GRPO's repeated prompts read once
    return twin.eval()


def _generating_with_copy(unwrap):
    """TRL's `unwrap` yielding the bf16 copy where it applies; the copies live as long as the returned function."""
    copies = weakref.WeakKeyDictionary()

    @contextlib.contextmanager
    def unwrap_model_for_generation(model, accelerator, *args, **kwargs):
        with unwrap(model, accelerator, *args, **kwargs) as unwrapped:
            yield generation_model(unwrapped, accelerator, copies)

    return unwrap_model_for_generation


def _trl_modules():
    return [module for name, module in list(sys.modules.items())
            if (name == "trl" or name.startswith("trl.")) and module is not None
            and hasattr(module, "unwrap_model_for_generation")]


@contextlib.contextmanager
def bf16_generation_copy(accelerator: str) -> Iterator[None]:
    """While it is open, on a CPU ("cpu"), TRL's trainers generate with the bf16 copy where it applies (see the module
    docstring); a trainer module imported while it is open gets the same, and every module TRL's function again when
    it closes (`library_patch.replaced` would miss the modules imported meanwhile). On a GPU nothing changes."""
    if accelerator != "cpu":
        yield
        return
    import trl.models.utils as trl_model_utils

    original = trl_model_utils.unwrap_model_for_generation
    wrapped = _generating_with_copy(original)
    for module in _trl_modules():
        if module.unwrap_model_for_generation is original:
            module.unwrap_model_for_generation = wrapped
    try:
        yield
    finally:
        for module in _trl_modules():
            if module.unwrap_model_for_generation is wrapped:
                module.unwrap_model_for_generation = original
