"""The sections smolalign owns (model, template, data); `peft:` and `train:` pass through to peft and TRL classes."""

from dataclasses import dataclass, field
from typing import Any, Literal

from rewards.errors import suggest
from smolalign.gpus import gpu_named, parse_size
from smolalign.recipe.data_schema import DataSection, SourceSection
from smolalign.recipe.eval_schema import DEFAULT_MAX_TURNS, EvalSection
from smolalign.recipe.generation_schema import (
    GenerationSection,
    GeneratorSection,
    GradedSection,
    RewardSection,
    VerifierSection,
)

STAGES = ("sft", "po", "rl")


@dataclass(frozen=True)
class ModelSection:
    source: str
    """HF directory, hub id, GGUF file (`path/to/x.gguf`), bundled short name (`smollm2-135m-instruct`), or a
    pretraining checkpoint (nanotron step or run folder, DeepSpeed ZeRO folder, torch DCP folder), converted once into
    the cache."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) for a hub id (refused for a local folder or file: it has no commits)."""
    tokenizer: str | None = None
    """Tokenizer directory for a pretraining checkpoint that carries none (it also trims a padded vocabulary, and
    for DCP its config.json may give the architecture); refused for sources that have their own tokenizer."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """auto follows the hardware (docs/checkpoints.md#precision): bf16 weights updated by AdamW with stochastic
    rounding on a bf16 GPU, float32 masters under fp16 autocast on other GPUs, float32 weights under bf16 autocast on a
    bf16 CPU (from 384 wide), float32 elsewhere."""
    attn_implementation: str | None = None
    """sdpa, eager, flash_attention_2, ...; None lets transformers choose."""
    quantization: Literal["4bit", "8bit"] | None = None
    """Load the base in 4 or 8 bits with bitsandbytes (QLoRA when a `peft:` section is present)."""
    trust_remote_code: bool = False
    """Run the modelling code a hub repository ships (transformers' `trust_remote_code`; also passed to a vLLM server
    smolalign starts and to `launch slurm`'s vLLM node)."""


@dataclass(frozen=True)
class TemplateSection:
    name: str = "smollm3"
    """A shipped template (`smollm3`, `chatml`), a .jinja file, or `model` to keep the tokenizer's own."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Default chat_template_kwargs for every row (e.g. enable_thinking); a row's own column overrides them."""


@dataclass(frozen=True)
class PairsSection:
    """Preference pairs generated from prompts: the strong model's answer is chosen and the weak model's rejected,
    or (`graded:`) one model samples several answers and a scorer picks the chosen and rejected ones."""

    prompts: list[SourceSection]
    """Datasets with a `prompt` column (a string or messages) or `messages` (trailing assistant turns dropped)."""
    strong: GeneratorSection | None = None
    """The model whose answers are chosen (strong-vs-weak pairs; give `weak` with it)."""
    weak: GeneratorSection | None = None
    """The model whose answers are rejected."""
    graded: GradedSection | None = None
    """Instead of strong and weak: one model samples several answers per prompt and a scorer picks the pair."""
    verifier: VerifierSection | None = None
    """Strong-vs-weak pairs only: rewards that check the chosen answer is right and the rejected one wrong."""
    output: str | None = None
    """Where the pairs are written (.jsonl); default: the smolalign cache, keyed by this section."""
    max_prompt_tokens: int | None = None
    """Prompts longer than this (templated, in the policy's tokens) are dropped and counted."""
    max_prompts: int | None = None
    """Use only the first N distinct prompts."""
    seed: int = 0
    """Seeds the generators' sampling (and graded pairs' random pick), so a rerun writes the same pairs."""

    def __post_init__(self) -> None:
        if not self.prompts:
            raise ValueError("prompts must list at least one dataset")
        if self.graded is not None and (self.strong or self.weak):
            raise ValueError("give either strong and weak (strong-vs-weak pairs) or graded (on-policy graded pairs)")
        if self.graded is None and not (self.strong and self.weak):
            raise ValueError("strong and weak are required (or graded: for on-policy graded pairs)")
        if self.verifier is not None and self.graded is not None:
            raise ValueError("verifier checks strong-vs-weak pairs; graded pairs are picked by graded.scorer")
        if self.verifier is not None and self.verifier.strong_samples > 1 and self.strong.temperature == 0:
            raise ValueError(f"verifier.strong_samples: {self.verifier.strong_samples} greedy answers (strong."
                             "temperature 0) are one answer repeated; sample with a temperature > 0, e.g. 1.0")

    @property
    def generators(self) -> dict[str, GeneratorSection]:
        """The models that write answers, by side: strong and weak, or the graded sampler."""
        if self.graded is not None:
            return {"graded": self.graded.sampler}
        return {"strong": self.strong, "weak": self.weak}


@dataclass(frozen=True)
class ReferenceSection:
    """Where a preference method's reference log-probabilities come from."""

    kind: Literal["policy", "source", "adapter", "precomputed", "none"]
    """policy: a frozen copy of the policy's own source; source: another model; adapter: the PEFT base with the
    adapter disabled; precomputed: log-probs of the starting policy computed once before training; none: ORPO."""
    source: str | None = None


@dataclass(frozen=True)
class Method:
    """A preference method: which TRL trainer runs it and with which loss terms and weights."""

    name: str
    """As written in the recipe, e.g. apo_zero or sigmoid+sft."""
    trainer: Literal["dpo", "kto", "orpo", "reward", "grpo", "online_dpo", "distill", "gold", "auto"]
    losses: tuple[str, ...] = ()
    weights: tuple[float, ...] | None = None


@dataclass(frozen=True)
class TeacherSection:
    """The teacher of on-policy distillation: any model source, loaded for inference in its own dtype."""

    source: str
    """Any model source, as `model.source` (HF directory, hub id, GGUF file, converted checkpoint)."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) for a hub id."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """The teacher's own dtype; auto follows the hardware as generation does (bfloat16 on a bf16 GPU, float16 on
    other GPUs, bfloat16 on a bf16 CPU from 384 wide, float32 elsewhere)."""
    trust_remote_code: bool = False
    """Run the modelling code the teacher's hub repository ships."""
    max_memory_gb: float | None = None
    """Refuse a teacher whose weights (parameters × dtype) need more than this."""


BUILTIN_TOOLS = ("python",)
"""Tools smolalign ships: `python` runs the model's code in the code reward's sandbox and returns what it printed."""


@dataclass(frozen=True)
class ToolsSection:
    """Tools the policy calls while it generates (GRPO): the model writes a tool call, the tool runs, its result
    goes back to the model as the next turn and generation goes on, up to `max_turns` calls per answer. Only the
    model's own tokens are trained; a tool's result never carries loss."""

    use: list[str] = field(default_factory=list)
    """`python` (built in), or a team's function as `path/to/file.py:function` or `module:function`: typed
    parameters and a docstring with an `Args:` entry for each (the schema the model is shown is made from them)."""
    environment: str | None = None
    """A stateful environment, `path/to/file.py:Class` or `module:Class` (TRL's `environment_factory`): one instance
    per answer, its `reset()` called first, its public methods the tools."""
    max_turns: int = DEFAULT_MAX_TURNS
    """Tool calls (rounds) per answer at most; an answer still calling a tool then ends there, counted in the logs."""
    timeout: float = 10.0
    """Seconds a call may take: the python tool's CPU limit, a team function's wall-clock limit. A call that takes
    longer returns an error to the model."""
    max_output_chars: int = 2000
    """A tool's result is cut to this many characters (the rest named as cut) before the model reads it."""

    def __post_init__(self):
        if not self.use and self.environment is None:
            raise ValueError("list tools in use (python, or path/to/file.py:function) or give an environment")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive (seconds), got {self.timeout}")
        if self.max_output_chars < 1:
            raise ValueError(f"max_output_chars must be at least 1, got {self.max_output_chars}")
        for index, name in enumerate(self.use):
            if name not in BUILTIN_TOOLS and ":" not in name:
                raise ValueError(f"use.{index}: unknown tool {name!r}{suggest(name, BUILTIN_TOOLS)}; built in: "
                                 f"{', '.join(BUILTIN_TOOLS)}, or path/to/file.py:function, module:function")
        if len(set(self.use)) != len(self.use):
            raise ValueError(f"use lists a tool twice: {self.use}")


@dataclass(frozen=True)
class LaunchSection:
    """How many processes a run uses, and the global batch to keep whatever that number is."""

    preset: str | None = None
    """An accelerate preset (ddp, zero2, zero3, zero3_offload, fsdp2) or config file; --launch overrides it."""
    num_processes: int | None = None
    """Processes to run on; --num-processes overrides it. Unset: one per GPU left for training (1 on a CPU)."""
    global_batch_size: int | None = None
    """Sequences per optimizer step over all processes: gradient accumulation is derived from it, so the batch
    stays the same on 1 or 64 processes."""
    gpu: str | None = None
    """The GPU the plan checks memory and times steps against (H100, A100-40GB, ...); default: this machine's."""
    gpu_memory: str | float | None = None
    """Memory budget per device (80GB, 70GiB, or a number of GB); default: the GPU's memory."""
    utilization: float | None = None
    """Share of the GPU's bf16 peak the step-time estimate assumes (default 0.4)."""
    calibrate: bool = False
    """Time a few steps of a 1- and 2-layer slice of the model on this machine for the plan's time per step."""
    allow_memory_overrun: bool = False
    """Run even when the plan's memory peak is above MEMORY_REFUSED of the device's memory (refused otherwise)."""

    def __post_init__(self) -> None:
        if (self.num_processes is not None and self.num_processes < 1) or (
                self.global_batch_size is not None and self.global_batch_size < 1):
            raise ValueError("num_processes and global_batch_size must be at least 1")

        if self.gpu is not None:
            gpu_named(self.gpu)
        if self.gpu_memory is not None:
            parse_size(self.gpu_memory)
        if self.utilization is not None and not 0 < self.utilization <= 1:
            raise ValueError(f"utilization must be in (0, 1], got {self.utilization}")


@dataclass(frozen=True)
class HubSection:
    """Push the run's final `model/` to the Hugging Face hub when the run ends, with the run's recipe and manifest as
    its model card."""

    repo_id: str
    """owner/name; the repository is created if it does not exist."""
    private: bool = True
    """Visibility of a repository the push creates (an existing one keeps its own)."""
    revision: str | None = None
    """Branch to push to (created from main if missing); default: main."""

    def __post_init__(self) -> None:
        from huggingface_hub.utils import HFValidationError, validate_repo_id

        try:
            validate_repo_id(self.repo_id)
        except HFValidationError as exc:
            raise ValueError(f"repo_id {self.repo_id!r}: {str(exc).splitlines()[0]}") from None
        if "/" not in self.repo_id:
            raise ValueError(f"repo_id {self.repo_id!r}: write it as owner/name (your user or organization)")


@dataclass(frozen=True)
class Recipe:
    """A parsed, type-checked recipe, as written: nothing of the machine it runs on (`smolalign.resolve.Run` holds
    that). Each field documents the recipe section it is built from (the recipe-keys reference page is written from
    these docstrings)."""

    stage: str
    """sft, po or rl: the verb the recipe is for (another verb refuses it). Without it, the train verbs take the
    recipe as theirs, and `launch slurm`, `sweep` and `data preview` read rl from `rewards:`, `generation:` or
    `teacher:`, po from `method:` or `pairs:`, else sft."""
    model: ModelSection
    """Required: the model to train (the policy) and how to load it."""
    template: TemplateSection
    """The chat template every row is rendered with; default: smollm3 with its own defaults."""
    data: DataSection | None
    """The training data (required unless `pairs:` generates it), or an rl recipe's prompts."""
    peft: dict[str, Any] | None
    """Optional: train LoRA adapters; the keys are `peft.LoraConfig` fields (r, lora_alpha, target_modules, ...),
    passed as they are."""
    train: dict[str, Any]
    """The method's TRL config fields (SFTConfig, DPOConfig, GRPOConfig, ...), checked against that dataclass and
    passed as they are; see the method table below."""
    raw: dict[str, Any]
    """The merged recipe mapping after overrides, as written."""
    source: str
    """Where the recipe came from (a path or a shipped name), for messages and the manifest."""
    description: str = ""
    """One line saying what the recipe trains; kept in the run directory's resolved recipe.yaml."""
    method: Method | None = None
    """`po`: a method name (apo_zero, dpo, ipo, kto, orpo, reward, ... any DPO loss term), a list of DPO loss terms
    summed (`[sigmoid, sft]`) or a mapping of terms to weights (`{sigmoid: 1.0, sft: 0.5}`); required. `rl`: grpo
    (default), online_dpo, or on-policy distillation from a teacher: distill, gold or auto."""
    reference: ReferenceSection | None = None
    """`po`: where reference log-probabilities come from: policy (a frozen copy of the policy's source; the default),
    adapter (the base with the LoRA adapter disabled; the default with `peft:`), precomputed (computed once before
    training, no reference weights held) or `{source: MODEL}` (another model with the same tokenizer). orpo and reward
    take none; rl online_dpo always uses the policy's copy (or the adapter disabled)."""
    pairs: PairsSection | None = None
    """`po` only: generate the training pairs first, from a strong and a weak model or graded by a scorer."""
    rewards: tuple[RewardSection, ...] = ()
    """`rl` (grpo, online_dpo) only, required there: the rewards, summed with their weights."""
    generation: GenerationSection | None = None
    """`rl` only: how the policy (or the distilled student) generates."""
    teacher: TeacherSection | None = None
    """`rl` distillation (distill, gold, auto) only, required there: the teacher."""
    tools: ToolsSection | None = None
    """`rl` grpo only: tools the policy calls while it generates (multi-turn tool use)."""
    launch: LaunchSection | None = None
    """Any stage: the processes, the global batch, and the GPU the plan checks memory and time against."""
    hub: HubSection | None = None
    """Any stage: push the final model to the hub when the run ends."""
    evaluation: EvalSection | None = None
    """Any stage: evaluate the saved model (and its input) when the stage ends (the recipe's `eval:` section)."""
