"""The `train:` section before it meets TRL: recipe shorthands mapped onto TRL's fields (packing strategies, one
online DPO beta), the keys smolalign sets from its own sections refused with where to set them instead (the keys come
from the method table), and the range of every numeric value (`RANGES`), so a negative learning rate or a batch of 0
is refused before any weight loads."""

import math
import sys
from dataclasses import dataclass

from smolalign.errors import SmolalignError
from smolalign.recipe.method_table import MethodSpec

PACKING_STRATEGIES = ("bfd", "bfd_split", "wrapped")


@dataclass(frozen=True)
class Range:
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    """The low end itself is refused (`> low`, not `>= low`)."""
    open_high: bool = False
    also: tuple = ()
    """Values accepted outside the range (TRL's `-1` meaning "not set")."""

    def admits(self, value: float) -> bool:
        if value in self.also:
            return True
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return False
        return self.high is None or not (value > self.high or (self.open_high and value == self.high))

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.open_low else '≥'} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.open_high else '≤'} {self.high:g}")
        return " and ".join(parts) + "".join(f" (or {v:g})" for v in self.also)


POSITIVE, AT_LEAST_ONE, NOT_NEGATIVE, FRACTION = Range(0, open_low=True), Range(1), Range(0), Range(0, 1)
RANGES = {
    # 0 is a learning rate: the control run of an ablation (the same run whose weights must not move).
    "learning_rate": NOT_NEGATIVE, "num_train_epochs": POSITIVE, "adam_epsilon": POSITIVE, "temperature": POSITIVE,
    "per_device_train_batch_size": AT_LEAST_ONE, "per_device_eval_batch_size": AT_LEAST_ONE,
    "gradient_accumulation_steps": AT_LEAST_ONE, "max_length": AT_LEAST_ONE, "max_completion_length": AT_LEAST_ONE,
    "max_prompt_length": AT_LEAST_ONE, "num_iterations": AT_LEAST_ONE, "dataset_num_proc": AT_LEAST_ONE,
    "generation_batch_size": AT_LEAST_ONE, "steps_per_generation": AT_LEAST_ONE,
    "save_steps": POSITIVE, "logging_steps": POSITIVE, "eval_steps": POSITIVE,
    "max_steps": Range(1, also=(-1,)), "warmup_steps": NOT_NEGATIVE, "warmup_ratio": FRACTION,
    "weight_decay": NOT_NEGATIVE, "max_grad_norm": NOT_NEGATIVE, "beta": NOT_NEGATIVE, "save_total_limit": NOT_NEGATIVE,
    "dataloader_num_workers": NOT_NEGATIVE, "seed": NOT_NEGATIVE, "top_p": Range(0, 1, open_low=True),
    "adam_beta1": Range(0, 1, open_high=True), "adam_beta2": Range(0, 1, open_high=True),
    "label_smoothing": Range(0, 0.5),
    "num_generations": Range(2),  # GRPO compares the answers of a group
}
"""What TRL accepts for each numeric `train:` key (types are checked against TRL's config; these are the values that
type-check but fail, or silently misbehave, after the model loaded). Every float must also be finite."""


def check_ranges(train: dict) -> None:
    """Every numeric `train:` value within its range (`RANGES`) and finite; else the key, its value and the range."""
    for key, value in train.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isfinite(value):
            raise SmolalignError(f"train.{key} must be a finite number, got {value}")
        allowed = RANGES.get(key)
        if allowed is not None and not allowed.admits(value):
            raise SmolalignError(f"train.{key} must be {allowed.describe()}, got {value:g}")


def refuse_contradictions(train: dict) -> None:
    """Two keys that say different things about one setting, refused with both named (else one would silently win):
    the `packing: STRATEGY` shorthand beside a different `packing_strategy`, bf16 beside fp16."""
    packing, strategy = train.get("packing"), train.get("packing_strategy")
    if isinstance(packing, str) and strategy is not None and strategy != packing:
        raise SmolalignError(f"train.packing {packing!r} and train.packing_strategy {strategy!r} contradict each "
                             "other: keep one (packing: STRATEGY is the shorthand for both)")
    if train.get("bf16") is True and train.get("fp16") is True:
        raise SmolalignError("train.bf16 and train.fp16 are both true: keep at most one")


def normalize_train(train: dict, spec: MethodSpec) -> dict:
    """Recipe shorthands onto TRL's fields: `packing: bfd|bfd_split|wrapped|false`, legacy `ffd` -> `bfd`."""
    train = dict(train)
    refuse_contradictions(train)
    packing = train.get("packing")
    if isinstance(packing, str):
        train["packing"], train["packing_strategy"] = True, packing
    strategy = train.get("packing_strategy")
    if strategy in ("ffd", "bfd-requeue"):
        replacement = "bfd" if strategy == "ffd" else "bfd_split"
        print(f"warning: train.packing_strategy {strategy!r} is a legacy name, using {replacement!r}", file=sys.stderr)
        train["packing_strategy"] = replacement
    if train.get("packing") and train.get("packing_strategy") not in (None, *PACKING_STRATEGIES):
        raise SmolalignError(
            f"train.packing must be false or one of {', '.join(PACKING_STRATEGIES)}, got {train['packing_strategy']!r}"
        )
    beta = train.get("beta")
    if spec.beta_per_epoch and isinstance(beta, (int, float)) and not isinstance(beta, bool):
        train["beta"] = [float(beta)]  # one number is the same for every epoch
    if spec.beta_per_epoch and isinstance(beta, list) and len(beta) != 1:
        raise SmolalignError(f"train.beta {beta}: give one number; TRL 1.16's online DPO reads a per-epoch list at "
                             "the step's fractional epoch and fails after the first step")
    for key, hint in spec.refused.items():
        if key in train:
            raise SmolalignError(f"train.{key} is set by smolalign: {hint}")
    check_ranges(train)
    if spec.preference and train.get("packing"):
        raise SmolalignError("train.packing: preference training does not pack pairs; remove it")
    return train
