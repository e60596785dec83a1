"""The plan's memory and time rows: memory per device by part against the target device, the knobs that would
make a plan that does not fit fit, and time per step and for the run (`smolalign sft RECIPE --dry-run`)."""

import sys
from dataclasses import replace

from smolalign.errors import SmolalignError
from smolalign.estimate.calibrate import calibrate
from smolalign.estimate.dims import ModelDims, read_dims
from smolalign.estimate.inference import reward_model_parts
from smolalign.estimate.memory import DTYPE_BYTES, MemoryEstimate, Setup, estimate_memory
from smolalign.estimate.settings import setup_for, target_device, this_machine_memory, workload
from smolalign.estimate.time import (
    FLEX_FIRST_STEP,
    GENERATE_FIRST_STEP,
    decode_rates,
    describe_seconds,
    step_time,
    training_utilization,
)
from smolalign.gpus import Gpu
from smolalign.hardware import Hardware, generation_dtype
from smolalign.models.config import model_width, read_config
from smolalign.models.size import source_parameter_count
from smolalign.quantities import describe_bytes, describe_count
from smolalign.resolve import Run

MEMORY_REFUSED = 0.95
"""A plan whose memory peak is above this share of the device's memory is refused (launch.allow_memory_overrun runs
it anyway): what the estimate does not count (fragmentation, NCCL's buffers) takes the rest."""

SHARDINGS = {"none": "one process", "ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3",
             "fsdp": "FSDP"}


def extra_parts(run: Run, settings: dict, setup: Setup, dims: ModelDims, budget: int | None, tokens: int
                ) -> tuple[dict[str, int], int]:
    """(parts held besides the policy: a reference or teacher model, reward models, vLLM's share; parameters scored
    per token by them)."""
    recipe = run.recipe
    b = DTYPE_BYTES.get(setup.frozen_dtype or setup.dtype, 4)  # a reference loads as a frozen copy
    shards = setup.processes if setup.sharding == "zero3" else 1
    parts: dict[str, int] = {}
    scored = 0
    reference = None
    if recipe.reference is not None and recipe.reference.kind in ("policy", "source"):  # po, online_dpo
        reference = dims.params if recipe.reference.kind == "policy" else \
            source_parameter_count(run.source("reference"))
    if run.method_spec.beta_reference and settings.get("beta") and recipe.peft is None:
        reference = dims.params
    if reference:
        parts["reference model"] = reference * b // shards
        scored = reference
    if recipe.teacher is not None:
        teacher = source_parameter_count(run.source("teacher"))
        if teacher:
            hardware = Hardware("cuda" if setup.gpu else "cpu", 1, "", setup.gpu, 1, 1)
            teacher_dtype = generation_dtype(recipe.teacher.dtype, hardware, model_width(run.source("teacher")))
            teacher_b = DTYPE_BYTES.get(teacher_dtype, 4)
            parts["teacher model"] = teacher * teacher_b // shards
            parts["teacher logits"] = tokens * dims.vocab * 6  # 16-bit logits and their fp32 softmax, no grad
            scored = teacher
    if recipe.rewards:
        hardware = Hardware("cuda" if setup.gpu else "cpu", 1, "", setup.gpu, 1, 1)
        parts.update(reward_model_parts(recipe.rewards, hardware))
    if recipe.generation is not None and recipe.generation.backend == "vllm_colocate" and budget:
        share = float(settings.get("vllm_gpu_memory_utilization") or 0.3)
        parts[f"vLLM colocated ({share:.0%} of the GPU)"] = int(share * budget)
    return parts, scored


def _estimate(run: Run, settings, setup, dims, budget) -> MemoryEstimate:
    work = workload(run.recipe, settings, setup.processes)
    extra, _ = extra_parts(run, settings, setup, dims, budget, work["tokens_per_micro_batch"])
    return estimate_memory(dims, {**settings, **work}, setup, extra=extra)


def knobs_to_fit(run: Run, settings: dict, setup: Setup, dims: ModelDims, budget: int) -> list[str] | None:
    """The changes, applied in order of what they cost in speed, after which the plan fits; None if none do."""
    ladder: list[tuple[str, dict, dict]] = []
    if not settings.get("gradient_checkpointing"):
        ladder.append(("train.gradient_checkpointing=true", {"gradient_checkpointing": True}, {}))
    # On a CPU the processes share one machine's memory: sharding or offloading to it frees none.
    if setup.gpu and setup.processes > 1 and setup.sharding not in ("zero3", "fsdp"):
        ladder.append((f"--launch zero3 (ZeRO-3 over the {setup.processes} processes)", {}, {"sharding": "zero3", "zero_buckets": None}))
    batch = int(settings.get("per_device_train_batch_size") or 1)
    accumulation = int(settings.get("gradient_accumulation_steps") or 1)
    while batch > 1:
        batch //= 2
        ladder.append((f"train.per_device_train_batch_size={batch} (with gradient_accumulation_steps="
                       f"{accumulation * (int(settings.get('per_device_train_batch_size') or 1) // batch)} for the "
                       "same global batch)", {"per_device_train_batch_size": batch}, {}))
    if setup.gpu and setup.peft is None:
        ladder.append(("--launch zero3_offload (optimizer states and weights in CPU memory)", {},
                       {"sharding": "zero3", "offload_optimizer": True, "offload_params": True,
                        "zero_buckets": None}))
    changes: list[str] = []
    current_settings, current_setup = dict(settings), setup
    for label, new_settings, new_setup in ladder:
        current_settings.update(new_settings)
        current_setup = replace(current_setup, **new_setup)
        if label.startswith("--launch") and changes and changes[-1].startswith("--launch"):
            changes.pop()
        changes.append(label)
        if _estimate(run, current_settings, current_setup, dims, budget).peak <= budget:
            return changes
    for processes in (2, 4, 8, 16, 32, 64) if setup.gpu else ():
        if processes > setup.processes:
            wider = replace(current_setup, processes=processes, sharding="zero3", zero_buckets=None)
            if _estimate(run, current_settings, wider, dims, budget).peak <= budget:
                return [*changes, f"--num-processes {processes} (ZeRO-3 over {processes} GPUs)"]
    return None


def add_memory_and_time_rows(plan, run: Run, *, steps: int | None = None, preset=None) -> None:
    """Memory per device and time per step, added to `plan`; bad launch.gpu / launch.gpu_memory values and a model
    config that is there but unreadable are SmolalignErrors naming the key."""
    recipe, hardware = run.recipe, run.hardware
    gpu, budget = target_device(recipe, hardware)
    dims = read_dims(run.source())
    if dims is None:
        if gpu is not None or budget is not None:
            raise SmolalignError(f"model.source {recipe.model.source}: its config cannot be read without downloading or "
                                 "converting it, so the plan cannot size it for launch.gpu/launch.gpu_memory; "
                                 "point model.source at a local copy or convert it first")
        plan.notes.append(f"memory and time: not estimated ({recipe.model.source} has no config readable offline)")
        return
    settings = run.settings  # the recipe over TRL's own defaults
    setup = setup_for(recipe, hardware, gpu, preset)
    device = f"{gpu.name}" if gpu is not None else ("this machine's RAM" if not setup.gpu else "GPU")
    ram = None
    # Training on this CPU: its memory, shared by the processes on this node. Not for a generating method, whose
    # peak counts every answer at its full max_completion_length (the quickstart's GRPO plans 30 GB and trains in a
    # few): on a CPU, a smoke test, that bound says little.
    if (budget is None and not setup.gpu and run.target.here and recipe.stage != "rl"
            and (ram := this_machine_memory()) is not None):
        sharing = max(setup.per_node or setup.processes, 1)
        budget = ram // sharing
        device += ", per process" if sharing > 1 else ""
    estimate = _estimate(run, settings, setup, dims, budget)
    where = f"of {describe_bytes(budget)} ({device})" if budget else f"({device}, {setup.dtype})"
    shards = SHARDINGS[setup.sharding] + (f" × {setup.processes}" if setup.processes > 1 else "")
    plan.rows["memory per device"] = (f"≈ {describe_bytes(estimate.peak)} at the peak {where}; {shards}, "
                                      f"{describe_count(dims.params)} parameters in {setup.dtype}, estimate")
    tokens = workload(recipe, settings, setup.processes)["tokens_per_micro_batch"]
    checkpointing = "on" if settings.get("gradient_checkpointing") else "off"
    plan.rows["memory by part"] = ", ".join(
        f"{name} {describe_bytes(size)}" for name, size in estimate.parts.items()) + \
        f" (activations at {tokens:,} tokens per micro-batch, gradient checkpointing {checkpointing})"
    if estimate.cpu:
        plan.rows["memory by part"] += f"; {describe_bytes(estimate.cpu)} of CPU memory per node for offloaded states"
    allowed = recipe.launch is not None and recipe.launch.allow_memory_overrun
    # A Slurm job's plan is made twice: first as for this machine's launch, then for the job's preset; the second
    # decides.
    final = preset is not None or run.target.here
    if ram is not None and estimate.peak > MEMORY_REFUSED * budget and not allowed:
        # Warned about, not refused: no bill is run up, and the estimate's error on a CPU is not measured.
        knobs = knobs_to_fit(run, settings, setup, dims, int(MEMORY_REFUSED * budget))
        print(f"warning: memory: the plan's peak ≈ {describe_bytes(estimate.peak)} is above {MEMORY_REFUSED:.0%} of "
              f"the {describe_bytes(budget)} available ({device}); "
              f"{', '.join(knobs) + ' would fit' if knobs else 'use a machine with more memory, or LoRA'}",
              file=sys.stderr)
    elif budget is not None and estimate.peak > MEMORY_REFUSED * budget and final and not allowed:
        knobs = knobs_to_fit(run, settings, setup, dims, int(MEMORY_REFUSED * budget))
        fix = ", ".join(knobs) if knobs else "a larger GPU or LoRA"
        raise SmolalignError(f"memory per device: the plan's peak ≈ {describe_bytes(estimate.peak)} is above "
                             f"{MEMORY_REFUSED:.0%} of the {describe_bytes(budget)} available ({device}); use {fix}, "
                             "or set launch.allow_memory_overrun=true to run anyway")
    if budget is not None and estimate.peak > budget:
        knobs = knobs_to_fit(run, settings, setup, dims, budget)
        fix = ("would fit with: " + ", ".join(knobs)) if knobs else \
            "no combination of checkpointing, micro-batch, ZeRO-3 and offload fits: use a larger GPU or LoRA"
        plan.notes.append(f"DOES NOT FIT: ≈ {describe_bytes(estimate.peak)} per device > {describe_bytes(budget)}; {fix}")
    elif budget is not None and estimate.peak > 0.9 * budget:
        plan.notes.append(f"memory is tight: ≈ {describe_bytes(estimate.peak)} of {describe_bytes(budget)}, within "
                          "the estimate's error of not fitting")
    _time_rows(plan, run, settings, setup, dims, gpu, steps)


def _time_rows(plan, run: Run, settings, setup: Setup, dims: ModelDims, gpu: Gpu | None, steps: int | None) -> None:
    launch = run.recipe.launch
    work = workload(run.recipe, settings, setup.processes)
    if launch is not None and launch.calibrate:
        config = read_config(run.source())
        seconds, how = calibrate(config, dims, settings, work, setup)
        label = f"{describe_seconds(seconds)} measured ({how})"
    elif gpu is not None and gpu.bf16_flops:
        attention = run.recipe.model.attn_implementation
        stated = launch is not None and launch.utilization
        utilization = launch.utilization if stated else training_utilization(attention)
        b = DTYPE_BYTES.get(setup.dtype, 4)
        _, scored = extra_parts(run, settings, setup, dims, None, work["tokens_per_micro_batch"])
        backend = run.recipe.generation.backend if run.recipe.generation is not None else ""
        timing = step_time(dims, {**settings, **work, "generation_backend": backend}, gpu, utilization,
                           weight_bytes=dims.params * b, extra_forward_params=scored)
        seconds = timing.total
        parts = [f"training {describe_seconds(timing.train)}"]
        if timing.generation:
            parts.append(f"generation {describe_seconds(timing.generation)}, decoding by bandwidth plus a per-token "
                         f"overhead {decode_rates(backend).where}")
            if not backend.startswith("vllm"):
                plan.notes.append(f"the first step takes longer than the rest (generation warms up): "
                                  f"{GENERATE_FIRST_STEP}")
        if timing.other:
            parts.append(f"reference/teacher {describe_seconds(timing.other)}")
        source = "launch.utilization" if stated else (
            "assumed for flex attention" if attention == "flex_attention" else "measured with sdpa on an H200")
        label = (f"≈ {describe_seconds(seconds)} ({'; '.join(parts)}; training FLOPs at {utilization:.0%} of the "
                 f"{gpu.name}'s bf16 peak, {source})")
        if attention == "flex_attention":
            plan.notes.append(f"the first step compiles flex attention's block mask and kernels: {FLEX_FIRST_STEP} "
                              "before step 1; later runs reuse what it compiled, kept under SMOLALIGN_CACHE/compile "
                              "(stages/compile_cache.py; how much that cuts on a GPU is not measured yet)")
    else:
        plan.rows["time per step"] = "not estimated (no GPU target: set launch.gpu, or launch.calibrate: true)"
        return
    plan.rows["time per step"] = label
    plan.step_seconds = seconds
    if steps:
        total = seconds * steps
        gpu_hours = total * setup.processes / 3600
        plan.rows["time for the run"] = (f"≈ {describe_seconds(total)} for {steps:,} steps ({gpu_hours:,.1f} "
                                         f"device-hours over {setup.processes})")
