"""TRL's DistillationTrainer with its loss under the run's mixed precision.

TRL 1.16 computes the distillation loss through `_ForwardRedirection`: it replaces the student's `forward` for one
call so that DDP and FSDP wrappers see a forward, and runs the backbone, the vocabulary projection and the divergence
inside it. Accelerate installs mixed precision in exactly that attribute (`model.forward`, wrapped in autocast, when
the weights train in float32 under `mixed_precision: bf16` or `fp16`), so the redirection sets it aside and the
student's forward and backward ran in float32 while the run said bf16: on the quickstart's distillation, each
student forward and backward took the float32 matmul path (2-3x slower on an AMX CPU) and on a GPU it would hold float32
activations. The teacher's forward, inside the same call, is back under autocast too.

With bfloat16 weights (DeepSpeed, a recipe's `model.dtype: bfloat16`) autocast is off and nothing changes.
"""

from trl import DistillationTrainer


class MixedPrecisionDistillationTrainer(DistillationTrainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # accelerator.autocast() is a no-op unless accelerate runs native mixed precision
        with self.accelerator.autocast():
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
