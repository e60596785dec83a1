"""The `data:` section of a recipe: the datasets a run trains on (or an rl recipe's prompts), each a `SourceSection`
also used for pairs' prompts and eval data."""

import math
from dataclasses import dataclass
from typing import Any, Literal

from rewards.reasoning_gym import check_task, task_of


@dataclass(frozen=True)
class SourceSection:
    path: str
    """A local .jsonl/.json/.parquet file or folder of them, or a hub dataset id."""
    name: str | None = None
    """Hub dataset configuration name."""
    split: str = "train"
    """The split to read: of a hub dataset, or of a local folder whose file names make splits (datasets' rules:
    data/train-*.parquet, validation.jsonl); a folder whose files name none is one train split, a single file is read
    whole (its split is train)."""
    revision: str | None = None
    """A hub dataset's revision (a commit sha, a tag or a branch) to read; unpinned, the newest. Either way the
    prepared-data cache and the run's manifest hold the commit that was read."""
    weight: float = 1.0
    """Share of the source kept: 0.5 keeps a random half, 2.0 repeats it twice, 1.5 once plus a random half."""
    columns: list[str] | dict[str, str] | None = None
    """Columns to keep (a list) or to keep and rename (a mapping source -> canonical name)."""
    size: int | None = None
    """`reasoning_gym:TASK` only: how many rows the task generates (default: reasoning-gym's, 500)."""
    seed: int | None = None
    """`reasoning_gym:TASK` only: the task's seed (default 0); entry i is drawn from seed + i, so two seeds closer
    than the size share rows: hold evaluation rows out with a seed at least the training size away."""
    config: dict[str, Any] | None = None
    """`reasoning_gym:TASK` only: the task's config (its dataclass fields, e.g. min_terms for chain_sum)."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.weight) or self.weight <= 0:
            raise ValueError(f"weight must be a positive finite number, got {self.weight}")

        task = task_of(self.path)
        if task is None:
            given = [k for k in ("size", "seed", "config") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{given[0]} is a key of reasoning_gym:TASK sources only, not of {self.path}")
            return
        if self.name is not None:
            raise ValueError("name is a hub dataset's configuration; a reasoning_gym: source takes config:")
        if self.split != "train" or self.revision is not None:
            raise ValueError(f"{'split' if self.split != 'train' else 'revision'} is a hub dataset's; a reasoning_gym: "
                             "source generates its rows (size:, seed:)")
        check_task(task, self.config, self.seed, self.size)


@dataclass(frozen=True)
class DataSection:
    sources: list[SourceSection]
    """The datasets, mixed by their weights (at least one, unless a `pairs:` section generates the data: its pairs
    file is one more source)."""
    format: Literal["auto", "messages", "prompt_completion", "text", "preference", "unpaired"] = "auto"
    """auto detects it from the columns: messages, prompt+completion, text, preference (prompt/chosen/rejected)
    or unpaired (prompt/completion/label)."""
    eval_split: float | int = 0
    """Held-out share (0 < x < 1) or number of rows for evaluation; 0 keeps everything for training."""
    seed: int = 0
    """Seed for mixture sampling and the held-out split."""
    on_untrained: Literal["fail", "drop"] = "fail"
    """What to do with an example in which no token is trained, or with an empty answer (SFT) or an empty or
    identical pair: fail the run naming it, or drop it and print the count."""
    system_prompt: str | None = None
    """A system message put first in every row that does not open with one (its conversation, or its prompt)."""

    def __post_init__(self) -> None:
        if self.eval_split < 0:
            raise ValueError(f"eval_split must be >= 0, got {self.eval_split}")
