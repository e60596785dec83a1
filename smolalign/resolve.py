"""Parse, resolve, run: a parsed `Recipe` and the machine it will run on become, once, one typed and frozen `Run`
that the plan, the preflight, the stages and the launchers receive: the effective TRL settings for that machine's
processes (`train:` and `peft:` checked against TRL's and peft's config classes here, where they are first
imported), the model sources classified, the method's entry in the method table, the data the run trains on and
every reward the recipe names, built. `smolalign sft RECIPE --dry-run` prints what it holds.

Nothing here loads weights or data: classifying a model source reads a directory's file names at most, the
generated pairs' file is named by a hash of what they depend on, and a reward is built without scoring anything (a
reward model's config is read; a sandbox's workers start on first use).
"""

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rewards.registry import resolve_reward
from smolalign.errors import USER_ERRORS, SmolalignError
from smolalign.hardware import Hardware, detect_hardware
from smolalign.inputs.pairs_file import pairs_path
from smolalign.models.sources import ModelSource, resolve_model, resolve_source
from smolalign.recipe.data_schema import DataSection, SourceSection
from smolalign.recipe.method_table import MethodSpec, method_spec
from smolalign.recipe.resolved import recipe_to_dict
from smolalign.recipe.schema import Recipe
from smolalign.recipe.settings import TrainSettings, train_settings
from smolalign.recipe.typecheck import check_config_section
from smolalign.recipe.validate import load_recipe
from smolalign.target import Target, this_machine

Role = Literal["model", "reference", "teacher"]
"""The models a recipe names: the policy (`model:`), a preference method's `reference: {source: ...}`, the
distillation `teacher:`."""


@dataclass(frozen=True)
class Rewards:
    """Every reward a recipe names, each built once (`build_rewards`), in its section's order. A step that closes one
    (a scorer's sandbox) is the last to use it in the process."""

    training: tuple = ()
    """`rewards:` (GRPO, online DPO)."""
    scorer: tuple = ()
    """`pairs.graded.scorer`."""
    verifier: tuple = ()
    """`pairs.verifier.rewards`."""
    evaluation: tuple = ()
    """`eval.rewards`."""


@dataclass(frozen=True)
class Run:
    """A recipe resolved for the machine it runs on: everything the stages read that is not a recipe key."""

    recipe: Recipe
    """The parsed, type-checked recipe, as written (after `extends:` and `--set`)."""
    hardware: Hardware
    """What the run's processes compute on (this machine, or a Slurm job's GPUs): dtype, precision, world size."""
    target: Target
    """Where the run is checked for: this machine, or another one whose caches and hub access this one cannot see
    (a Slurm job's nodes, the machine `recipes validate --for` describes)."""
    method_spec: MethodSpec
    """The method's entry in the method table: its TRL config class, the data and reference it trains on."""
    settings: TrainSettings
    """The effective TRL settings: `train:` over the config class's own defaults, with the gradient accumulation
    that `launch.global_batch_size` asks for over `hardware.world_size` processes."""
    data: DataSection
    """The data the run trains on: `data:`, and for a `pairs:` section the generated pairs' file as one more source
    (the only one when the recipe has no `data:`)."""
    sources: dict[Role, ModelSource] = field(default_factory=dict)
    """The model sources by role, classified once here. A source that does not resolve yet (the output of an earlier
    stage, say) is left out; `source` resolves it when a stage needs it, or names what is missing."""
    rewards: Rewards = Rewards()
    """The recipe's rewards, built."""

    def source(self, role: Role = "model") -> ModelSource:
        """The model source of `role` (a SmolalignError naming it when it does not resolve)."""
        if role in self.sources:
            return self.sources[role]
        recipe = self.recipe
        if role == "model":
            return resolve_model(recipe.model)
        if role == "reference":
            if recipe.reference is None or recipe.reference.kind != "source":
                raise SmolalignError("reference: this recipe names no reference source")
            return resolve_source(recipe.reference.source)
        if recipe.teacher is None:
            raise SmolalignError("teacher: this recipe names no teacher")
        return resolve_source(recipe.teacher.source, recipe.teacher.revision, revision_key="teacher.revision")

    def resolved_recipe(self) -> dict:
        """The recipe as a run directory keeps it and a dry run prints it: smolalign's sections with defaults filled
        in, and `train:` with the values smolalign derived."""
        return recipe_to_dict(self.recipe, self.settings.train)


def resolve(recipe: Recipe, hardware: Hardware | None = None, target: Target | None = None) -> Run:
    """The run of `recipe` on `hardware`, checked for `target` (this machine's when None)."""
    hardware, target = hardware or detect_hardware(), target or this_machine()
    spec = method_spec(recipe.stage, recipe.method)
    config_class = spec.config_class()
    check_config_section(config_class, recipe.train, "train")
    if recipe.peft is not None:
        check_config_section(lora_config_class(), recipe.peft, "peft")
        task = recipe.peft.get("task_type")
        if task is not None and str(task).upper() != spec.peft_task_type:  # the model's head decides it
            raise SmolalignError(f"peft.task_type {task!r}: this method's adapters are {spec.peft_task_type}, which "
                                 "smolalign sets (SEQ_CLS for a reward model, whose score head then trains in full); "
                                 "remove it")
    settings = train_settings(config_class, recipe.train, recipe.launch, hardware.world_size, spec.prompt_groups)
    return Run(recipe=recipe, hardware=hardware, target=target, method_spec=spec, settings=settings,
               data=data_plan(recipe), sources=model_sources(recipe), rewards=build_rewards(recipe))


def load_run(name_or_path: str, overrides: list[str], stage: str, hardware: Hardware | None = None,
             target: Target | None = None) -> Run:
    """Read a recipe (name or path), apply `--set` overrides, parse it for `stage` and resolve it for `hardware`
    and `target` (this machine's when None)."""
    return resolve(load_recipe(name_or_path, overrides, stage), hardware, target)


def lora_config_class() -> type:
    from peft import LoraConfig

    return LoraConfig


REWARD_KEYS = {"training": "rewards", "scorer": "pairs.graded.scorer", "verifier": "pairs.verifier.rewards",
               "evaluation": "eval.rewards"}
"""Each field of `Rewards`, and the recipe key of the sections it is built from."""


def reward_sections(recipe: Recipe) -> dict[str, tuple]:
    """The recipe's reward sections, by field of `Rewards`."""
    pairs = recipe.pairs
    return {"training": tuple(recipe.rewards),
            "scorer": tuple(pairs.graded.scorer) if pairs is not None and pairs.graded is not None else (),
            "verifier": tuple(pairs.verifier.rewards) if pairs is not None and pairs.verifier is not None else (),
            "evaluation": tuple(recipe.evaluation.rewards) if recipe.evaluation is not None else ()}


def build_rewards(recipe: Recipe) -> Rewards:
    """Each reward section of the recipe built by the rewards registry: an unknown name, a bad parameter, a team's
    file that does not load or a reward model without a score head is refused (exit 2, named by its recipe key)
    before anything loads."""
    return Rewards(**{part: reward_functions(sections, REWARD_KEYS[part])
                      for part, sections in reward_sections(recipe).items()})


def each_reward(run: Run) -> Iterator[tuple[str, object, Callable]]:
    """(its recipe key, as `rewards.0`; its section; the built reward) for every reward of `run`."""
    for part, sections in reward_sections(run.recipe).items():
        for index, (section, function) in enumerate(zip(sections, getattr(run.rewards, part), strict=True)):
            yield f"{REWARD_KEYS[part]}.{index}", section, function


def reward_functions(sections, where: str) -> tuple:
    """Each reward section (`name` and `params`) built by the rewards registry; a problem is refused as
    `where.INDEX`."""
    built = []
    for index, section in enumerate(sections):
        try:
            built.append(resolve_reward(section.name, section.params))
        except USER_ERRORS as exc:
            raise SmolalignError(f"{where}.{index}: {exc}") from None
    return tuple(built)


def data_plan(recipe: Recipe) -> DataSection:
    """`data:`, with the generated pairs' file added for a `pairs:` section."""
    if recipe.pairs is None:
        return recipe.data
    generated = SourceSection(path=str(pairs_path(recipe)))
    if recipe.data is None:
        return DataSection(sources=[generated])
    return dataclasses.replace(recipe.data, sources=[*recipe.data.sources, generated])


def model_sources(recipe: Recipe) -> dict[Role, ModelSource]:
    """The model sources a recipe names, by role. A local directory, or a model with model.tokenizer, must resolve
    now; another source that does not resolve yet is left out (`Run.source` reports it when it is needed)."""
    model, reference, teacher = recipe.model, recipe.reference, recipe.teacher
    sources: dict[Role, ModelSource] = {}
    if Path(model.source).expanduser().is_dir() or model.tokenizer is not None:
        sources["model"] = resolve_model(model)
    wanted: dict[Role, tuple[str, str | None]] = {} if "model" in sources else {"model": (model.source,
                                                                                          model.revision)}
    if reference is not None and reference.kind == "source":
        wanted["reference"] = (reference.source, None)
    if teacher is not None:
        wanted["teacher"] = (teacher.source, teacher.revision)
    for role, (spec, revision) in wanted.items():
        try:
            sources[role] = resolve_source(spec, revision)
        except SmolalignError:
            continue
    return sources
