"""The sections smolalign owns (model, template, data); `peft:` and `train:` pass through to peft and TRL classes."""

from dataclasses import dataclass, field
from typing import Any, Literal

STAGES = ("sft", "po", "rl")


@dataclass(frozen=True)
class ModelSection:
    source: str
    """HF directory, hub id, GGUF file (`path/to/x.gguf`), bundled short name (`smollm2-135m-instruct`), or a
    pretraining checkpoint (nanotron step or run folder, DeepSpeed ZeRO folder, torch DCP folder), converted once into
    the cache."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) for a hub id."""
    tokenizer: str | None = None
    """Tokenizer directory for a pretraining checkpoint that carries none (it also trims a padded vocabulary, and
    for DCP its config.json may give the architecture); refused for sources that have their own tokenizer."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """auto follows the hardware: float32 on CPU, bfloat16 on a GPU that supports it."""
    attn_implementation: str | None = None
    """sdpa, eager, flash_attention_2, ...; None lets transformers choose."""
    quantization: Literal["4bit", "8bit"] | None = None
    """Load the base in 4 or 8 bits with bitsandbytes (QLoRA when a `peft:` section is present)."""
    trust_remote_code: bool = False


@dataclass(frozen=True)
class TemplateSection:
    name: str = "smollm3"
    """A shipped template (`smollm3`, `chatml`), a .jinja file, or `model` to keep the tokenizer's own."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Default chat_template_kwargs for every row (e.g. enable_thinking); a row's own column overrides them."""


@dataclass(frozen=True)
class SourceSection:
    path: str
    """A local .jsonl/.json/.parquet file or folder of them, or a hub dataset id."""
    name: str | None = None
    """Hub dataset configuration name."""
    split: str = "train"
    weight: float = 1.0
    """Share of the source kept: 0.5 keeps a random half, 2.0 repeats it twice, 1.5 once plus a random half."""
    columns: list[str] | dict[str, str] | None = None
    """Columns to keep (a list) or to keep and rename (a mapping source -> canonical name)."""

    def __post_init__(self) -> None:
        if self.weight <= 0:
            raise ValueError(f"weight must be positive, got {self.weight}")


@dataclass(frozen=True)
class DataSection:
    sources: list[SourceSection]
    format: Literal["auto", "messages", "prompt_completion", "text", "preference", "unpaired"] = "auto"
    """auto detects it from the columns: messages, prompt+completion, text, preference (prompt/chosen/rejected)
    or unpaired (prompt/completion/label)."""
    eval_split: float | int = 0
    """Held-out share (0 < x < 1) or number of rows for evaluation; 0 keeps everything for training."""
    seed: int = 0
    """Seed for mixture sampling and the held-out split."""
    on_untrained: Literal["fail", "drop"] = "fail"
    """What to do with an example in which no token is trained: fail the run, or drop it and print the count."""
    system_prompt: str | None = None
    """A system message put first in every row that does not open with one (its conversation, or its prompt)."""

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("sources must list at least one dataset")
        if self.eval_split < 0:
            raise ValueError(f"eval_split must be >= 0, got {self.eval_split}")


@dataclass(frozen=True)
class GeneratorSection:
    """One side of pair generation: a model and how to sample from it."""

    source: str
    """A model source (as model.source) for transformers/vllm; the served model's name for openai."""
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    base_url: str | None = None
    """openai backend: the server's API root, e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str | None = None
    """openai backend: the environment variable holding the API key (none is sent when unset)."""
    template: str | None = None
    """Chat template for transformers/vllm; default: the recipe's template."""
    think: bool | None = None
    """enable_thinking for the template (true: /think, false: /no_think); null leaves the template's default."""
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 512
    batch_size: int = 8
    """Prompts per generate call (transformers, vllm) or concurrent requests (openai)."""
    timeout: float = 300.0
    """openai backend: seconds to wait for one response."""
    tensor_parallel: int = 1
    """vllm backend: GPUs the model is split across (a 32B model in bf16 needs 2 H100s with room for the cache)."""

    def __post_init__(self) -> None:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend openai needs base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.batch_size < 1 or self.max_new_tokens < 1:
            raise ValueError("batch_size and max_new_tokens must be at least 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")


@dataclass(frozen=True)
class PairsSection:
    """Preference pairs generated from prompts: the strong model's answer is chosen, the weak model's rejected."""

    prompts: list[SourceSection]
    """Datasets with a `prompt` column (a string or messages) or `messages` (trailing assistant turns dropped)."""
    strong: GeneratorSection
    weak: GeneratorSection
    output: str | None = None
    """Where the pairs are written (.jsonl); default: the smolalign cache, keyed by this section."""
    max_prompt_tokens: int | None = None
    """Prompts longer than this (templated, in the policy's tokens) are dropped and counted."""
    max_prompts: int | None = None
    """Use only the first N distinct prompts."""
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.prompts:
            raise ValueError("prompts must list at least one dataset")


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
    trainer: Literal["dpo", "kto", "orpo", "grpo", "distill", "gold", "auto"]
    losses: tuple[str, ...] = ()
    weights: tuple[float, ...] | None = None


@dataclass(frozen=True)
class RewardSection:
    """One reward of an `rl` recipe: a built-in name or `path/to/file.py:function`, its parameters and weight."""

    name: str
    weight: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VllmServerSection:
    """A vLLM server for generation: one already running (base_url), or one smolalign starts and stops."""

    base_url: str | None = None
    """A running server (http://host:8000); unset: smolalign starts `trl vllm-serve` itself."""
    gpus: list[int] = field(default_factory=list)
    """GPUs the started server uses (CUDA_VISIBLE_DEVICES); training keeps the others."""
    port: int = 8000
    tensor_parallel: int = 1
    startup_timeout: float = 600.0
    """Seconds to wait for a started server to answer /health/."""


@dataclass(frozen=True)
class GenerationSection:
    """How `rl` generates: transformers `generate`, vLLM in the training process (colocate), or a vLLM server."""

    backend: Literal["transformers", "vllm_colocate", "vllm_server"] = "transformers"
    server: VllmServerSection = field(default_factory=VllmServerSection)
    stall_timeout: float | None = None
    """Fail the run when no training step finishes for this many seconds (a stalled generation or weight sync);
    default: none with transformers, 1800 with vLLM."""


@dataclass(frozen=True)
class TeacherSection:
    """The teacher of on-policy distillation: any model source, loaded for inference in its own dtype."""

    source: str
    revision: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    trust_remote_code: bool = False
    max_memory_gb: float | None = None
    """Refuse a teacher whose weights (parameters × dtype) need more than this."""


@dataclass(frozen=True)
class LaunchSection:
    """How many processes a run uses, and the global batch to keep whatever that number is."""

    preset: str | None = None
    """An accelerate preset (ddp, zero2, zero3, zero3_offload, fsdp2) or config file; --launch overrides it."""
    num_processes: int = 1
    global_batch_size: int | None = None
    """Sequences per optimizer step over all processes: gradient accumulation is derived from it, so the batch
    stays the same on 1 or 64 processes."""

    def __post_init__(self) -> None:
        if self.num_processes < 1 or (self.global_batch_size is not None and self.global_batch_size < 1):
            raise ValueError("num_processes and global_batch_size must be at least 1")


EVAL_MODES = ("think", "no_think")


@dataclass(frozen=True)
class EvalRewardSection:
    """One reward an evaluation scores with: a built-in name or `path/to/file.py:function`, and its parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    threshold: float = 1.0
    """A sample counts as solved (avg@K, pass@K) when its reward is at least this: 1.0 for a 0/1 reward."""


@dataclass(frozen=True)
class EvalSection:
    """`smolalign eval` settings, and the `eval:` section a stage runs on its output when it ends."""

    data: list[SourceSection]
    """Prompts (`prompt`: a string or messages, or `messages`) and the columns the rewards read (e.g. solution)."""
    rewards: list[EvalRewardSection]
    modes: list[str] = field(default_factory=lambda: list(EVAL_MODES))
    """Reasoning modes to generate in: think, no_think (the template's enable_thinking)."""
    samples: int = 1
    """K: answers per prompt and mode (avg@K, pass@K)."""
    max_new_tokens: int = 256
    temperature: float = 0.6
    """SmolLM3's recommended sampling (0.6, top_p 0.95); 0 is greedy (then K > 1 repeats the same answer)."""
    top_p: float = 0.95
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    base_url: str | None = None
    """openai backend: the server's API root (http://127.0.0.1:8000/v1); the models are its served names."""
    batch_size: int = 16
    """Sequences per generate call (transformers, vllm) or requests in flight (openai)."""
    template: str | None = None
    """Chat template the prompts are rendered with; default: the recipe's (smollm3 for `smolalign eval`)."""
    max_prompts: int | None = None
    """Use only the first N prompts."""
    seed: int = 0
    """Seeds the sampling and the bootstrap: a rerun gives the same numbers."""
    before: bool = True
    """In a recipe: also evaluate the stage's input model, as the baseline of the before/after table."""

    def __post_init__(self) -> None:
        if not self.data:
            raise ValueError("data must list at least one dataset")
        if not self.rewards:
            raise ValueError("rewards must list at least one reward, e.g. [{name: math_accuracy}]")
        if not self.modes:
            raise ValueError("modes must list at least one of think, no_think")
        for mode in self.modes:
            if mode not in EVAL_MODES:
                raise ValueError(f"unknown mode {mode!r}; the modes are think and no_think")
        if len(set(self.modes)) != len(self.modes):
            raise ValueError(f"modes lists a mode twice: {', '.join(self.modes)}")
        if self.samples < 1:
            raise ValueError(f"samples (K) must be at least 1, got {self.samples}")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be at least 1")
        if self.max_prompts is not None and self.max_prompts < 1:
            raise ValueError(f"max_prompts must be at least 1, got {self.max_prompts}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")
        if self.backend not in ("transformers", "vllm", "openai"):
            raise ValueError(f"unknown backend {self.backend!r}; one of transformers, vllm, openai")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend openai needs base_url (e.g. http://127.0.0.1:8000/v1)")


@dataclass(frozen=True)
class Recipe:
    """A validated recipe; `raw` is the resolved mapping written to the run directory."""

    stage: str
    model: ModelSection
    template: TemplateSection
    data: DataSection
    peft: dict[str, Any] | None
    train: dict[str, Any]
    raw: dict[str, Any]
    source: str
    """Where the recipe came from (a path or a shipped name), for messages and the manifest."""
    description: str = ""
    method: Method | None = None
    """`po` only: the preference method."""
    reference: ReferenceSection | None = None
    """`po` only: where reference log-probabilities come from."""
    pairs: PairsSection | None = None
    """`po` only: generate the training pairs from a strong and a weak model first."""
    rewards: tuple[RewardSection, ...] = ()
    """`rl` (grpo) only: the rewards, weighted."""
    generation: GenerationSection | None = None
    """`rl` only: the generation backend."""
    teacher: TeacherSection | None = None
    """`rl` distillation (distill, gold, auto) only: the teacher."""
    launch: LaunchSection | None = None
    evaluation: EvalSection | None = None
    """Any stage: evaluate the saved model (and its input) when the stage ends (the recipe's `eval:` section)."""
