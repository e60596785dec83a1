"""The sections smolalign owns (model, template, data); `peft:` and `train:` pass through to peft and TRL classes."""

from dataclasses import dataclass, field
from typing import Any, Literal

STAGES = ("sft", "po", "rl")


@dataclass(frozen=True)
class ModelSection:
    source: str
    """HF directory, hub id, GGUF file (`path/to/x.gguf`), or a bundled short name (`smollm2-135m-instruct`)."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) for a hub id."""
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
    format: Literal["auto", "messages", "prompt_completion", "text"] = "auto"
    """auto detects it from the columns: messages, prompt+completion, or text."""
    eval_split: float | int = 0
    """Held-out share (0 < x < 1) or number of rows for evaluation; 0 keeps everything for training."""
    seed: int = 0
    """Seed for mixture sampling and the held-out split."""
    on_untrained: Literal["fail", "drop"] = "fail"
    """What to do with an example in which no token is trained: fail the run, or drop it and print the count."""

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("sources must list at least one dataset")
        if self.eval_split < 0:
            raise ValueError(f"eval_split must be >= 0, got {self.eval_split}")


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
