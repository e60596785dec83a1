"""The optimizer of a run whose trained weights are bfloat16 (a GPU's default, `model.dtype: bfloat16` on a bf16 CPU):
AdamW whose updates reach the weights although most are far below bf16's spacing.

An AdamW update is about the learning rate (1e-5 for SFT, 1e-6 for GRPO) while a weight of ~0.02 has a bf16 spacing of
~1.2e-4: added and rounded to the nearest bf16, the update is lost, so plain AdamW on bf16 weights learns several
times slower than on float32 masters, silently (a random SmolLM3-3B on an H200: loss 12.39 -> 10.45 in 10 steps
against 6.57 with DeepSpeed's float32 masters; benchmarks/RESULTS.md, "GPU"). Here each update is computed in float32 and the new weight is written back to
bf16 by stochastic rounding: up or down with the probabilities that make its expected value the float32 result, so
across the millions of weights of a layer the model moves as a float32 one does.

Chosen by measurement (benchmarks/update_precision.py, RESULTS.md): Kahan summation (optimi's AdamW, a bf16
remainder beside each weight) tracked float32 on a random 384-wide model (1.007x its loss at step 30) but not on
the bundled pretrained SmolLM2-135M, whose larger trained weights hold each update back for many steps until the
remainder reaches half a spacing (loss 0.385 against float32's 0.028 at step 30; three steps on one batch moved
the loss 0.05 where float32 moved it 1.10). Stochastic rounding moved it 1.09 there, and reached 0.027 at step 30. The moments stay float32
(their 0.999 decay is below bf16's resolution: rounded, the second moment never decays), 8 bytes a parameter as
float32 AdamW's, so a bf16 run holds 12 bytes a parameter against float32 masters' 16.

Not used where the trained parameters are already float32 (LoRA adapters, which peft keeps in float32; float32
weights under autocast), nor under a launcher that keeps float32 master weights itself (DeepSpeed's ZeRO, FSDP with
mixed precision): there is nothing to round there. QLoRA's adapters are bf16 (TRL casts them): they take this AdamW,
and under FSDP, which leaves the trainable parameters of a quantized model as they are, they become float32 masters.
torch's AdamW is replaced whichever name the recipe gives it (`hardware.DEFAULT_ADAMW`); another `train.optim` is
kept as asked, with a note that its updates of bf16 weights are rounded to the nearest.

Also here, checked before anything loads: a setting under which TRL itself would turn float32 trained parameters into
16-bit ones (`check_continuous_batching`).
"""

import sys

from smolalign.errors import SmolalignError
from smolalign.estimate.settings import launch_fields
from smolalign.hardware import LOW_PRECISION_DTYPES, autocast_flags, compensates_updates, trained_dtype
from smolalign.launch import launched_sharding
from smolalign.models.config import model_width
from smolalign.resolve import Run


def low_precision_trainable(model) -> list[str]:
    """Names of the trainable parameters of `model` held in bfloat16 or float16."""
    return [name for name, p in model.named_parameters() if p.requires_grad and str(p.dtype).removeprefix("torch.")
            in LOW_PRECISION_DTYPES]


def is_quantized(model) -> bool:
    """Whether `model` (or the model under its adapters) holds 4- or 8-bit weights: TRL's test for QLoRA."""
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False))


def upcast_to_float32(model, names: list[str]) -> None:
    """Make the named trainable parameters float32 master weights. Under FSDP, accelerate does so for 16-bit trainable
    parameters, except over a quantized base (accelerate.utils.fsdp_utils skips it when the model holds 4-bit
    parameters): QLoRA's adapters, which TRL casts to bf16, would then train bf16 with plain AdamW."""
    parameters = dict(model.named_parameters())
    for name in names:
        parameters[name].data = parameters[name].data.float()


def stochastic_rounding_adamw(args) -> tuple[type, dict]:
    """(optimizer class, its arguments but the parameters) for transformers' `optimizer_cls_and_kwargs`, with the
    run's AdamW settings and seed. Weight decay comes per parameter group from the trainer."""
    from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW

    return StochasticRoundingAdamW, {"lr": args.learning_rate, "betas": (args.adam_beta1, args.adam_beta2),
                                     "eps": args.adam_epsilon, "weight_decay": args.weight_decay, "seed": args.seed}


def keep_low_precision_updates(trainer) -> bool:
    """Before `trainer.train()`: where its model trains bf16 parameters with AdamW and no launcher keeps float32
    masters, hand the trainer the stochastic-rounding AdamW in place of torch's (read when the trainer creates its
    optimizer). Returns whether it did."""
    low = low_precision_trainable(trainer.model)
    sharding = launched_sharding()
    if low and sharding is not None and "fsdp" in sharding and is_quantized(trainer.model):
        upcast_to_float32(trainer.model, low)
        return False
    if not low or sharding is not None:
        return False
    optim = str(getattr(trainer.args.optim, "value", trainer.args.optim))
    if not compensates_updates("bfloat16", False, optim):
        print(f"note: train.optim {optim} updates {len(low)} bfloat16 parameter tensors rounded to the nearest: "
              "updates below bf16's spacing are lost (drop train.optim for AdamW with stochastic rounding)",
              file=sys.stderr)
        return False
    if trainer.optimizer is None and trainer.optimizer_cls_and_kwargs is None:
        trainer.optimizer_cls_and_kwargs = stochastic_rounding_adamw(trainer.args)
        return True
    return False


def check_continuous_batching(run: Run) -> None:
    """GRPO's `train.use_transformers_continuous_batching`: TRL casts the whole training model to its autocast dtype
    in place before each generation (GRPOTrainer._generate_single_turn), so float32 trained parameters (master
    weights, LoRA's adapters, FSDP's masters) would go on training as 16-bit ones with 16-bit moments, silently.
    Refused (exit 2) where that happens; kept over bf16 weights (the cast changes nothing), under DeepSpeed (whose
    engine holds 16-bit parameters anyway) and where vLLM generates (TRL then ignores the key)."""
    recipe = run.recipe
    backend = recipe.generation.backend if recipe.generation is not None else ""
    if not run.settings.train.get("use_transformers_continuous_batching") or backend.startswith("vllm"):
        return
    sharding = launch_fields(recipe, run.hardware)["sharding"]
    trained = trained_dtype(recipe.model.dtype, run.hardware, adapters=recipe.peft is not None,
                            quantized=bool(recipe.model.quantization))
    flags = autocast_flags(recipe.model.dtype, run.hardware, model_width(run.source()), run.settings.train)
    cast = "bf16" if flags["bf16"] else "fp16" if flags["fp16"] else None
    if cast is None or sharding.startswith("zero") or not (trained == "float32" or sharding == "fsdp"):
        return
    what = ("FSDP's float32 master weights" if sharding == "fsdp" else "LoRA's float32 adapters" if recipe.peft
            else "the float32 master weights")
    raise SmolalignError(
        f"train.use_transformers_continuous_batching: TRL casts the training model to {cast} in place before it "
        f"generates, so {what} would train as {cast} ones and lose most updates; drop the key (transformers' "
        "generate), or generate with generation.backend vllm_colocate")
