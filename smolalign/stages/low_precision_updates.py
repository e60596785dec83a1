"""The optimizer of a run whose trained weights are bfloat16 (a GPU's default, `model.dtype: bfloat16` on a bf16 CPU):
AdamW that keeps the bits each update loses to bf16's rounding.

An AdamW update is about the learning rate (1e-5 for SFT, 1e-6 for GRPO) while a weight of ~0.02 has a bf16 spacing of
~1.2e-4: adding the update to the weight rounds it away, so plain AdamW on bf16 weights learns several times slower
than on float32 masters, silently (a random SmolLM3-3B on an H200: loss 12.39 -> 10.45 in 10 steps against 6.57 with
float32 masters; a 384-wide Llama on a CPU, 30 steps: 6.376 -> 6.158 against 5.392). optimi's AdamW with Kahan
summation keeps each parameter's lost remainder in a bf16 buffer beside it and adds it back at the next step: the loss
tracks float32 masters (tests/integration/test_update_precision.py) for 2 bytes a parameter more, where float32
masters would cost 8 more (weights and gradients in float32) and run the forward pass under autocast.

Not used where the trained parameters are already float32 (LoRA adapters, which peft keeps in float32; float32
weights under autocast), nor under a launcher that keeps float32 master weights itself (DeepSpeed's ZeRO, FSDP with
mixed precision): compensating there would only cost memory. A recipe's own `train.optim` other than AdamW is kept as
asked, with a note that its updates of bf16 weights are rounded.
"""

import sys

from smolalign.hardware import LOW_PRECISION_DTYPES, compensates_updates
from smolalign.launch import launched_sharding


def low_precision_trainable(model) -> list[str]:
    """Names of the trainable parameters of `model` held in bfloat16 or float16."""
    return [name for name, p in model.named_parameters() if p.requires_grad and str(p.dtype).removeprefix("torch.")
            in LOW_PRECISION_DTYPES]


def kahan_adamw(args) -> tuple[type, dict]:
    """(optimizer class, its arguments but the parameters) for transformers' `optimizer_cls_and_kwargs`: optimi's
    AdamW with Kahan summation, with the run's AdamW settings (optimi's own defaults differ: betas 0.9/0.99, eps
    1e-6). Weight decay comes per parameter group from the trainer, decoupled as torch's AdamW decouples it."""
    from optimi import AdamW

    return AdamW, {"lr": args.learning_rate, "betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_epsilon,
                   "weight_decay": args.weight_decay, "kahan_sum": True}


def keep_low_precision_updates(trainer) -> bool:
    """Before `trainer.train()`: where its model trains bf16/fp16 parameters with AdamW and no launcher keeps float32
    masters, hand the trainer optimi's Kahan-summed AdamW in place of torch's (read when the trainer creates its
    optimizer). Returns whether it did."""
    low = low_precision_trainable(trainer.model)
    if not low or launched_sharding() is not None:
        return False
    optim = str(getattr(trainer.args.optim, "value", trainer.args.optim))
    if not compensates_updates("bfloat16", False, optim):
        print(f"note: train.optim {optim} updates {len(low)} bfloat16 parameter tensors without compensation: "
              "updates below bf16's spacing are rounded away (drop train.optim for AdamW with Kahan summation)",
              file=sys.stderr)
        return False
    if trainer.optimizer is None and trainer.optimizer_cls_and_kwargs is None:
        trainer.optimizer_cls_and_kwargs = kahan_adamw(trainer.args)
        return True
    return False
