"""The plan of a run, worked out before any weights load: batch arithmetic, steps, tokens per step, loss, packing,
template and dtype. `--dry-run` prints it; a real run prints it too before it starts."""

from dataclasses import dataclass, field

from smolalign.data.check import Checked
from smolalign.data.prepare import Layout
from smolalign.estimate.memory import keeps_float32_masters
from smolalign.estimate.plan_rows import add_memory_and_time_rows
from smolalign.estimate.settings import hardware_planned_for, launch_fields
from smolalign.hardware import autocast_flags, precision_description, resolve_dtype
from smolalign.launch import launched_sharding
from smolalign.models.config import model_width
from smolalign.recipe.settings import lora_settings
from smolalign.resolve import Run
from smolalign.templates.registry import ChatTemplate
from smolalign.templates.render import trained_after_end_of_turn


@dataclass
class Plan:
    rows: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    steps: int | None = None
    """Optimizer steps of the run, when known."""
    step_seconds: float | None = None
    """Estimated or measured seconds per optimizer step (the "time per step" row), when known."""

    def add_data_check(self, checked: Checked, note: str = "") -> None:
        """The "data check" row: what the data check read, rendered and tokenized, with `note` after it."""
        self.rows["data check"] = checked.describe() + note

    def render(self) -> str:
        width = max(len(k) for k in self.rows)
        lines = [f"  {k.ljust(width)}  {v}" for k, v in self.rows.items()]
        lines += [f"  note: {n}" for n in self.notes]
        return "plan:\n" + "\n".join(lines)


def _sharding() -> str | None:
    """How the weights are spread over the processes, from what the launcher handed them."""
    launched = launched_sharding()
    if launched is None:
        return None
    if "fsdp" in launched:
        return f"FSDP (version {launched['fsdp']})"
    zero = launched["zero"]
    offload = [kind for kind in ("param", "optimizer") if (zero.get(f"offload_{kind}") or {}).get("device") not in
               (None, "none")]
    stage = zero.get("stage") or "?"
    return f"DeepSpeed ZeRO-{stage}" + (f", {' and '.join(offload)} offloaded to CPU" if offload else "")


def make_plan(run: Run, template: ChatTemplate | None, train_rows: int | None,
              packed_rows: int | None = None, data_format: str | None = None) -> Plan:
    """Everything derivable from the run (its recipe, settings and hardware); `train_rows` from the data when it was
    read."""
    recipe, hardware, settings = run.recipe, run.hardware, run.settings
    layout = Layout.from_settings(settings)
    per_device, accumulation, world = settings.per_device_batch, settings.accumulation, settings.world_size
    global_batch = settings.global_batch
    plan = Plan()
    rows = plan.rows
    rows["world size"] = f"{world} ({hardware.accelerator}{', ' + hardware.device_name if hardware.on_gpu else ''})"
    sharding = _sharding()
    if sharding:
        rows["sharding"] = sharding
    rows["per-device batch"] = per_device
    rows["gradient accumulation"] = accumulation
    if recipe.launch is not None and recipe.launch.global_batch_size is not None:
        rows["gradient accumulation"] = (f"{accumulation} (keeps launch.global_batch_size "
                                         f"{recipe.launch.global_batch_size} over {world} process(es))")
    rows["global batch"] = global_batch
    sequences = packed_rows if packed_rows is not None else train_rows
    steps = settings.optimizer_steps(sequences)
    if settings.is_set("max_steps") and settings["max_steps"] > 0:
        rows["steps"] = f"{steps} (train.max_steps)"
    elif steps is not None:
        epochs = settings["num_train_epochs"]
        dropping = packed_rows is None and run.data.on_untrained == "drop"  # rows may leave as they are encoded
        exact = packed_rows is not None or not (layout.packing or dropping)
        before = " before packing" if layout.packing else ""
        before += f"{' and' if before else ''} before dropping untrained rows" if dropping else ""
        rows["steps"] = f"{'' if exact else '≤ '}{steps} ({epochs:g} epoch(s) of {sequences} " \
                        f"{'packed ' if packed_rows is not None else ''}rows{'' if exact else before})"
    if layout.max_length:
        bound = "" if layout.packing else "≤ "
        rows["tokens per step"] = f"{bound}{global_batch * layout.max_length:,} ({global_batch} × max_length {layout.max_length})"
    rows["packing"] = layout.packing or "off"
    if layout.packing == "wrapped":
        plan.notes.append("packing: wrapped lets documents attend across boundaries; bfd keeps them apart")
    rows["loss"] = _loss_description(data_format or run.data.format, layout)
    if template is not None:
        markers = "with" if template.has_generation_markers else "without"

        after = trained_after_end_of_turn(template)
        trains = f", trains {after!r} after the end-of-turn token" if after else ""
        rows["template"] = f"{template.name} (sha256 {template.sha256[:12]}, {markers} generation markers{trains})"
        if not template.reads_mode_flags:
            plan.notes.append(f"template {template.name} reads no /think or /no_think: think modes (enable_thinking, "
                              "system flags) do not change how rows render, and rows that ask for a mode of their own "
                              "are refused where a flag would have to be added (rl, distillation, pairs)")
    else:
        rows["template"] = recipe.template.name
        plan.notes.append("template: model (the tokenizer's own) is not checked for think modes: rows that ask for a "
                          "mode of their own are refused where a flag would have to be added (rl, distillation, "
                          "pairs)")
    # The precision of the hardware the plan is for: with launch.gpu on a machine without one, the GPU's, as the
    # memory rows are.
    planned = hardware_planned_for(run)
    dtype = resolve_dtype(recipe.model.dtype, planned, adapters=recipe.peft is not None)
    train = settings.train
    width = model_width(run.source())
    # Whether the run autocasts, where the recipe's own train.bf16/fp16 decide it (on a GPU without bf16,
    # `bf16: false` alone still leaves fp16 autocast on)
    flags = autocast_flags(recipe.model.dtype, planned, width, train)
    asked_autocast = (flags["bf16"] or flags["fp16"]) if {"bf16", "fp16"} & train.keys() else None
    rows["dtype"] = precision_description(
        recipe.model.dtype, planned, width, adapters=bool(recipe.peft),
        quantized=recipe.model.quantization if recipe.peft else None,
        sharded=keeps_float32_masters(launch_fields(recipe, hardware)["sharding"]), autocast=asked_autocast,
        optim=str(train.get("optim") or "adamw_torch"))
    if planned is not hardware:
        rows["dtype"] += f" (on the {planned.device_name} of launch.gpu)"
    if recipe.model.dtype not in ("auto", dtype) and not (recipe.model.dtype == "float16" and planned.on_gpu):
        plan.notes.append(f"model.dtype {recipe.model.dtype} is not available on this hardware; using {dtype}")
    rows["model"] = recipe.model.source + (f" ({recipe.model.quantization} quantized)" if recipe.model.quantization else "")
    if recipe.peft:
        lora = lora_settings(recipe.peft)
        rows["adapters"] = f"LoRA r={lora['r']} on {lora['target_modules'] or 'default modules'}"

    plan.steps = steps
    add_memory_and_time_rows(plan, run, steps=steps)
    return plan


def _loss_description(fmt: str, layout) -> str:
    parts = []
    if fmt in ("auto", "messages"):
        parts.append("assistant tokens only" if layout.loss.assistant_only else "all tokens")
    if fmt in ("auto", "prompt_completion"):
        parts.append("completion only" if layout.loss.completion_only else "prompt and completion")
    return " / ".join(parts) if fmt != "text" else "all tokens"
