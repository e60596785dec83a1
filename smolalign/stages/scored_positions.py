"""Which positions TRL projects through the vocabulary on a CPU.

TRL 1.16 scores tokens without building the full logits: its fused LM head (`trl.trainer.utils.add_fused_lm_head`:
SFT, DPO, KTO, GRPO, RLOO) and its distillation divergence (`DistillationTrainer`) multiply hidden states by the
vocabulary in chunks. On a Triton device (CUDA, XPU) they take only the positions with a label (a completion token, an
assistant token); anywhere else they take every position of the batch and mask the results afterwards, because on
Neuron a batch-dependent number of rows would recompile the graph. A CPU runs eagerly and recompiles nothing, so there
that choice only costs time: a GRPO batch of 32 answers of 8 tokens after a 97-token prompt projected 3,360 rows
instead of 288, in float32, forward and backward (9.4 of a step's 21 CPU-seconds on the quickstart).

`scored_positions_only` makes both take only the scored positions on a CPU too, as TRL does on a GPU: the same rows
reach the same kernel (TRL's torch tiles), the others are never computed. TRL reads its device test when it scores,
so the change holds while training runs.
"""

import contextlib
import importlib
from collections.abc import Iterator

from smolalign.library_patch import replaced

# The modules whose `_use_triton` decides, per call, whether only the scored positions are projected.
_DECIDING_MODULES = ("trl.trainer.utils", "trl.trainer.distillation_trainer")


def projects_scored_positions_only(use_triton):
    """TRL's device test for the compact path, widened to the CPU (its kernels there are torch's, not Triton's)."""

    def compact(device) -> bool:
        return use_triton(device) or device.type == "cpu"

    return compact


@contextlib.contextmanager
def scored_positions_only(accelerator: str) -> Iterator[None]:
    """While it is open, on a CPU ("cpu"), TRL projects only the positions it scores; on a GPU nothing changes."""
    with contextlib.ExitStack() as patches:
        if accelerator == "cpu":
            for module in map(importlib.import_module, _DECIDING_MODULES):
                patches.enter_context(replaced(module, "_use_triton", projects_scored_positions_only))
        yield
