"""What the estimates need from a recipe, as plain values: the work per micro-batch and per step, the launch setup
(sharding, offload, processes, PEFT) and the target device. `smolalign sft RECIPE --dry-run --set launch.gpu=H100`."""

import json
from pathlib import Path

from smolalign.deepspeed_settings import ZERO_BUCKETS, deepspeed_config
from smolalign.estimate.memory import Setup
from smolalign.gpu_partition import training_device_count
from smolalign.gpus import Gpu, find_gpu, gpu_named, parse_size
from smolalign.hardware import Hardware, frozen_dtype, resolve_dtype
from smolalign.launch import launched_sharding, preset_path, read_preset, under_launcher
from smolalign.recipe.method_table import method_spec
from smolalign.target import launch_plan

ASSUMED_PROMPT = 512
"""Prompt tokens assumed for on-policy stages when train.max_prompt_length is not set."""


def workload(recipe, settings: dict, processes: int) -> dict:
    """Tokens per micro-batch (what activations scale with) and the per-device work of one optimizer step."""
    per_device = int(settings.get("per_device_train_batch_size") or 1)
    accumulation = int(settings.get("gradient_accumulation_steps") or 1)
    work = {"sequences_per_step": per_device * accumulation, "lora": recipe.peft is not None}
    spec = method_spec(recipe.stage, recipe.method)
    if spec.samples_pairs:
        # Two answers per prompt, scored together; max_length bounds prompt + answer.
        completion, length = int(settings["max_new_tokens"]), int(settings["max_length"])
        work.update(sequence_length=length, tokens_per_micro_batch=2 * per_device * length,
                    sequences_per_step=2 * per_device * accumulation,
                    generated_sequences=2 * per_device * accumulation, max_completion_length=completion)
        return work
    if spec.generates:
        completion = int(settings.get("max_completion_length") or 512)
        length = int(settings.get("max_prompt_length") or ASSUMED_PROMPT) + completion
        work.update(sequence_length=length, tokens_per_micro_batch=per_device * length,
                    generated_sequences=per_device * accumulation, max_completion_length=completion)
        if spec.off_policy:  # the student samples only a share lmbda of the sequences
            work["generated_sequences"] = int(round(per_device * accumulation * float(settings["lmbda"])))
        return work
    length = int(settings.get("max_length") or 1024)
    sequences = 2 if spec.pairs else 1  # chosen and rejected together
    work.update(sequence_length=length, tokens_per_micro_batch=sequences * per_device * length,
                sequences_per_step=sequences * per_device * accumulation,
                score_head=spec.scorer)
    return work


def preset_setup(settings: dict, processes: int, per_node: int | None = None) -> dict:
    """Setup fields from an accelerate config (a preset's parsed YAML)."""
    kind = str(settings.get("distributed_type", "NO"))
    if kind == "DEEPSPEED":
        ds = settings.get("deepspeed_config") or {}
        if ds.get("deepspeed_config_file"):
            return _zero_setup(json.loads(Path(ds["deepspeed_config_file"]).expanduser().read_text())
                               .get("zero_optimization", {}), processes, per_node)

        return _zero_setup(deepspeed_config(settings)["zero_optimization"], processes, per_node)  # what it runs
    if kind == "FSDP":
        return {"sharding": "fsdp", "processes": processes, "per_node": per_node}
    return {"sharding": "ddp" if processes > 1 else "none", "processes": processes, "per_node": per_node}


def _zero_setup(zero: dict, processes: int, per_node: int | None) -> dict:
    offloaded = [(zero.get(f"offload_{k}") or {}).get("device") not in (None, "none") for k in ("optimizer", "param")]

    buckets = {k: zero[k] for k in ZERO_BUCKETS[3] if k in zero}
    return {"sharding": f"zero{int(zero.get('stage', 0))}" if int(zero.get("stage", 0)) else "ddp",
            "processes": processes, "per_node": per_node, "offload_optimizer": offloaded[0],
            "offload_params": offloaded[1], "zero_buckets": buckets}


def launch_fields(recipe, hardware: Hardware, preset: Path | None = None) -> dict:
    """Sharding and processes: the launcher's (inside a launched run, whichever launcher started it), else the given
    or the recipe's preset."""
    processes = hardware.world_size
    if preset is None and under_launcher():
        launched = launched_sharding()
        if launched is None:
            return {"sharding": "ddp" if processes > 1 else "none", "processes": processes}
        if "fsdp" in launched:
            return {"sharding": "fsdp", "processes": processes}
        zero = launched["zero"]
        if "stage" in zero and zero["stage"] is None:  # accelerate did not say: its default, ZeRO-2
            zero = {**zero, "stage": 2}
        return _zero_setup(zero, processes, None)
    if preset is None and recipe.launch is not None and recipe.launch.preset:
        preset = preset_path(recipe.launch.preset, "launch.preset")
        if hardware.world_size <= 1:  # not launched yet: the processes the launch will start on this machine
            _, processes = launch_plan(recipe.launch, training_device_count(hardware.device_count, recipe.generation))
    if preset is None:
        return {"sharding": "none", "processes": processes}
    per_node = hardware.device_count if hardware.world_size > hardware.device_count > 0 else None
    return preset_setup(read_preset(preset), processes, per_node)


def target_device(recipe, hardware: Hardware) -> tuple[Gpu | None, int | None]:
    """(the GPU the plan is for, the memory budget per device): launch.gpu and launch.gpu_memory, else this
    machine's GPU. Bad values are SmolalignErrors naming the key."""
    launch = recipe.launch
    gpu = gpu_named(launch.gpu) if launch is not None and launch.gpu else None
    budget = parse_size(launch.gpu_memory) if launch is not None and launch.gpu_memory is not None else None
    if gpu is None and hardware.on_gpu and not hardware.device_name.endswith("under Slurm"):
        import torch

        if torch.cuda.is_available():
            found = find_gpu(torch.cuda.get_device_name(0))
            memory = torch.cuda.get_device_properties(0).total_memory
            gpu = Gpu(found.name if found else torch.cuda.get_device_name(0), memory,
                      found.bf16_flops if found else 0.0, found.bandwidth if found else 0.0)
    if budget is None and gpu is not None:
        budget = gpu.memory
    return gpu, budget


def this_machine_memory() -> int | None:
    """The memory this process may use on this machine, in bytes: /proc/meminfo's MemTotal, or the cgroup's limit
    (a container's, a Slurm job's) where that is lower; None where neither can be read."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max", or v1's "no limit" as a huge number
            limits.append(int(text))
    return min(limits) if limits else None


def planned_hardware(hardware: Hardware, gpu: Gpu | None) -> Hardware:
    """The hardware a plan is for: this machine, or where it has no GPU and the plan targets one (launch.gpu), that
    GPU (every GPU of the table computes in bf16)."""
    if hardware.on_gpu or gpu is None:
        return hardware
    return Hardware("cuda", 1, gpu.name, True, 1, 1)


def hardware_planned_for(run) -> Hardware:
    """The hardware `run`'s plan is for: its launch.gpu where this machine has no GPU, else this machine."""
    return planned_hardware(run.hardware, target_device(run.recipe, run.hardware)[0])


def setup_for(recipe, hardware: Hardware, gpu: Gpu | None, preset: Path | None = None) -> Setup:
    on_gpu = gpu is not None or hardware.on_gpu
    planned = planned_hardware(hardware, gpu)
    return Setup(**launch_fields(recipe, hardware, preset),
                 dtype=resolve_dtype(recipe.model.dtype, planned, adapters=recipe.peft is not None),
                 frozen_dtype=frozen_dtype(recipe.model.dtype, planned), gpu=on_gpu, peft=recipe.peft,
                 quantization=recipe.model.quantization)
