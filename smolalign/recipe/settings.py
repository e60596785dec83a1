"""The effective training settings of a run: every field of the method's TRL config, the recipe's value where it
sets one and the dataclass's own default otherwise, plus the batch arithmetic that follows for the hardware's world
size (gradient accumulation from `launch.global_batch_size`, the optimizer steps TRL will run).

Built once when a recipe is resolved for the machine it runs on (`Run.settings`, `smolalign.resolve`); the plan, the
data layout, the stages and the launcher read it, so no module re-declares a TRL default.
"""

import dataclasses
import math
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from smolalign.errors import SmolalignError


def config_defaults(config_class: type) -> dict[str, Any]:
    """Each field of a TRL config dataclass with its declared default (a factory is called)."""
    out = {}
    for spec in dataclasses.fields(config_class):
        if spec.default is not dataclasses.MISSING:
            out[spec.name] = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            out[spec.name] = spec.default_factory()
    return out


class TrainSettings(Mapping):
    """`settings[key]`: the value TRL will see for `key`. `train` is what the recipe sets (with derived values), the
    keyword arguments of the TRL config."""

    def __init__(self, config_class: type, train: dict[str, Any], world_size: int, prompt_groups: bool = False):
        self.config_class = config_class
        self.train = dict(train)
        self.world_size = world_size
        self.prompt_groups = prompt_groups
        self._values = {**config_defaults(config_class), **self.train}

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def is_set(self, key: str) -> bool:
        """Whether the recipe (or smolalign) sets `key`, rather than TRL's default applying."""
        return key in self.train

    @property
    def per_device_batch(self) -> int:
        return self["per_device_train_batch_size"]

    @property
    def accumulation(self) -> int:
        return self["gradient_accumulation_steps"]

    @property
    def global_batch(self) -> int:
        """Sequences (GRPO: completions) per optimizer step over all processes."""
        return self.per_device_batch * self.accumulation * self.world_size

    def steps_per_epoch(self, rows: int) -> int:
        """Optimizer steps in one pass over `rows` training rows, as transformers' Trainer counts them: the
        dataloader's length per process (its batches dealt round-robin to the processes), over gradient accumulation,
        rounded up."""
        if self.prompt_groups:
            return self._grpo_steps_per_epoch(rows)
        batches = math.ceil(math.ceil(rows / self.per_device_batch) / self.world_size)
        return max(math.ceil(batches / self.accumulation), 1)

    def _grpo_steps_per_epoch(self, rows: int) -> int:
        """GRPOTrainer (TRL 1.16) samples prompts in generation batches of `generation_batch_size / num_generations`
        distinct prompts (an incomplete last one is dropped), repeats each prompt `num_generations` times and each
        generation batch `num_iterations × steps_per_generation` times, and loads `per_device × steps_per_generation`
        rows per micro-step."""
        steps_per_generation, generation_batch = self.generation_batches()
        prompts_per_generation = generation_batch // self["num_generations"]
        sampled = (rows // prompts_per_generation) * prompts_per_generation * self["num_generations"] \
            * self["num_iterations"] * steps_per_generation
        batches = math.ceil(math.ceil(sampled / (self.per_device_batch * steps_per_generation)) / self.world_size)
        return max(math.ceil(batches / self.accumulation), 1)

    def generation_batches(self) -> tuple[int, int]:
        """(steps_per_generation, generation_batch_size) as GRPOConfig derives them from whichever is set."""
        per_step = self.per_device_batch * self.world_size
        steps, batch = self.get("steps_per_generation"), self.get("generation_batch_size")
        if steps is None and batch is None:
            steps = self.accumulation
        if batch is None:
            return steps, per_step * steps
        return batch // per_step, batch

    def optimizer_steps(self, rows: int | None) -> int | None:
        """Steps the trainer will run: `max_steps` when set, else epochs over `rows` (None when rows are unknown)."""
        if self["max_steps"] and self["max_steps"] > 0:
            return self["max_steps"]
        if rows is None:
            return None
        return math.ceil(self["num_train_epochs"] * self.steps_per_epoch(rows))


def accumulation_for(global_batch_size: int, train: dict, per_device: int, world: int) -> int:
    """Gradient accumulation that keeps `launch.global_batch_size` over `world` processes."""
    steps, rest = divmod(global_batch_size, per_device * world)
    if rest or steps < 1:
        raise SmolalignError(f"launch.global_batch_size {global_batch_size} is not a multiple of "
                             f"per-device batch {per_device} × {world} process(es); change one of them")
    if "gradient_accumulation_steps" in train and train["gradient_accumulation_steps"] != steps:
        print(f"note: gradient accumulation {steps} (not train.gradient_accumulation_steps "
              f"{train['gradient_accumulation_steps']}) keeps the global batch of {global_batch_size} over "
              f"{world} process(es)", file=sys.stderr)
    return steps


def train_settings(config_class: type, train: dict, launch, world_size: int,
                   prompt_groups: bool = False) -> TrainSettings:
    """The settings of a run on `world_size` processes; `train` gains the accumulation that `launch.global_batch_size`
    asks for."""
    if launch is not None and launch.global_batch_size is not None:
        per_device = TrainSettings(config_class, train, world_size).per_device_batch
        train = {**train, "gradient_accumulation_steps": accumulation_for(launch.global_batch_size, train, per_device,
                                                                          world_size)}
    return TrainSettings(config_class, train, world_size, prompt_groups)


def lora_settings(peft: Mapping[str, Any]) -> dict[str, Any]:
    """A recipe's `peft:` section over peft's own LoraConfig defaults (rank, target modules, ...)."""
    from peft import LoraConfig

    return {**config_defaults(LoraConfig), **peft}
