"""From a merged recipe mapping to a typed `Recipe`: every section checked, `train:` against the stage's TRL config.

Checking `train:` and `peft:` imports trl and peft (seconds), so this runs for validate, dry-run and training,
never for `--help`.
"""

import dataclasses
import sys
from typing import Any

from smolalign.errors import USER_ERRORS, SmolalignError
from smolalign.recipe.schema import (
    STAGES,
    DataSection,
    EvalSection,
    GenerationSection,
    LaunchSection,
    ModelSection,
    PairsSection,
    Recipe,
    RewardSection,
    TeacherSection,
    TemplateSection,
)
from smolalign.recipe.typecheck import build, check_config_section, reject_unknown
from smolalign.recipe.upstream import reject_owned_train_keys

SECTIONS = ("description", "stage", "model", "template", "data", "peft", "train", "launch", "eval")
STAGE_SECTIONS = {"po": ("method", "reference", "pairs"), "rl": ("method", "rewards", "generation", "teacher")}
RL_METHODS = ("grpo", "distill", "gold", "auto")
DISTILL_METHODS = ("distill", "gold", "auto")
RL_TRAIN_KEYS_OWNED = {
    "reward_weights": "give each reward a weight in rewards:",
    "chat_template_kwargs": "set them in template.kwargs",
    "use_vllm": "choose the backend in generation.backend",
    "vllm_mode": "choose the backend in generation.backend",
}
PACKING_STRATEGIES = ("bfd", "bfd_split", "wrapped")


def trl_config_class(stage: str, method=None) -> type:
    """The TRL dataclass that a stage's `train:` section becomes (for distillation `auto`, GOLD's, a superset of
    what the same-tokenizer trainer takes)."""
    if stage == "sft":
        from trl import SFTConfig

        return SFTConfig
    if stage == "po":
        from smolalign.recipe.method import trainer_config_class

        return trainer_config_class(method)
    if method is not None and method.trainer == "distill":
        from trl import DistillationConfig

        return DistillationConfig
    if method is not None and method.trainer in ("gold", "auto"):
        import os

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        from trl.experimental.gold import GOLDConfig

        return GOLDConfig
    from trl import GRPOConfig

    return GRPOConfig


def lora_config_class() -> type:
    from peft import LoraConfig

    return LoraConfig


def normalize_train(train: dict, stage: str) -> dict:
    """Recipe shorthands onto TRL's fields: `packing: bfd|bfd_split|wrapped|false`, legacy `ffd` -> `bfd`."""
    train = dict(train)
    packing = train.get("packing")
    if isinstance(packing, str):
        train["packing"], train["packing_strategy"] = True, packing
    strategy = train.get("packing_strategy")
    if strategy in ("ffd", "bfd-requeue"):
        replacement = "bfd" if strategy == "ffd" else "bfd_split"
        print(f"warning: train.packing_strategy {strategy!r} is a legacy name, using {replacement!r}", file=sys.stderr)
        train["packing_strategy"] = replacement
    if train.get("packing") and train.get("packing_strategy", "bfd") not in PACKING_STRATEGIES:
        raise SmolalignError(
            f"train.packing must be false or one of {', '.join(PACKING_STRATEGIES)}, got {train['packing_strategy']!r}"
        )
    reject_owned_train_keys(train)
    if stage == "rl":
        for key, hint in RL_TRAIN_KEYS_OWNED.items():
            if key in train:
                raise SmolalignError(f"train.{key} is set by smolalign: {hint}")
    if stage == "po":
        from smolalign.recipe.method import TRAIN_KEYS_OWNED

        for key, hint in TRAIN_KEYS_OWNED.items():
            if key in train:
                raise SmolalignError(f"train.{key} is set by smolalign: {hint}")
        if train.get("packing"):
            raise SmolalignError("train.packing: preference training does not pack pairs; remove it")
    return train


def validate_recipe(raw: dict, stage: str, source: str) -> Recipe:
    """Check every section of a merged recipe for `stage` and build the typed `Recipe`."""
    if stage not in STAGES:
        raise SmolalignError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    reject_unknown(raw, (*SECTIONS, *STAGE_SECTIONS.get(stage, ())), "")
    declared = raw.get("stage")
    if declared is not None and declared != stage:
        raise SmolalignError(f"this recipe is for `smolalign {declared}`, not `smolalign {stage}`")
    if "model" not in raw:
        raise SmolalignError("model is required (model.source: a directory, hub id, .gguf file or bundled name)")
    pairs = build(PairsSection, raw["pairs"], "pairs") if raw.get("pairs") is not None else None
    if "data" not in raw and pairs is None:
        raise SmolalignError("data is required (data.sources: a list of datasets)")
    model = build(ModelSection, raw["model"], "model")
    _check_model_source(model)
    template = build(TemplateSection, raw.get("template"), "template")
    data = build(DataSection, _data_mapping(raw, pairs), "data")
    peft = _section(raw, "peft")
    if peft is not None:
        check_config_section(lora_config_class(), peft, "peft")
    method = reference = generation = teacher = None
    rewards: tuple = ()
    if stage == "rl":
        method, rewards, generation, teacher = _rl_sections(raw)
    if stage == "po":
        from smolalign.recipe.method import parse_method, parse_reference

        method = parse_method(raw.get("method"))
        reference = parse_reference(raw.get("reference"), method, peft is not None)
    train = normalize_train(_section(raw, "train") or {}, stage)
    launch = build(LaunchSection, raw["launch"], "launch") if raw.get("launch") is not None else None
    if launch is not None and launch.global_batch_size is not None:
        train = {**train, "gradient_accumulation_steps": accumulation_for(launch, train)}
    check_config_section(trl_config_class(stage, method), train, "train")
    if model.quantization and peft is None:
        raise SmolalignError("model.quantization needs a peft: section (QLoRA trains adapters on a quantized base)")
    evaluation = eval_section(raw.get("eval"))
    resolved = {**raw, "train": train}
    return Recipe(stage=stage, model=model, template=template, data=data, peft=peft, train=train, raw=resolved,
                  source=source, description=str(raw.get("description") or ""), method=method,
                  reference=reference, pairs=pairs, rewards=rewards, generation=generation, teacher=teacher,
                  launch=launch, evaluation=evaluation)


def eval_section(mapping: Any) -> EvalSection | None:
    """The `eval:` section, its rewards built once so a bad name or parameter fails before anything loads."""
    if mapping is None:
        return None
    from rewards.registry import resolve_reward

    section = build(EvalSection, mapping, "eval")
    for index, reward in enumerate(section.rewards):
        try:
            resolve_reward(reward.name, reward.params)
        except USER_ERRORS as exc:
            raise SmolalignError(f"eval.rewards.{index}: {exc}") from None
    return section


def _check_model_source(model: ModelSection) -> None:
    """A local directory source is classified now (a pretraining checkpoint needs a tokenizer, a Megatron one is
    refused); `model.tokenizer` is only accepted for checkpoints. Hub ids and files are checked by the stages."""
    from pathlib import Path

    from smolalign.models.sources import resolve_model

    if Path(model.source).expanduser().is_dir() or model.tokenizer is not None:
        resolve_model(model)


def accumulation_for(launch, train: dict) -> int:
    """Gradient accumulation that keeps launch.global_batch_size over the processes this run has (WORLD_SIZE when
    launched, else launch.num_processes)."""
    import os

    world = int(os.environ.get("WORLD_SIZE") or launch.num_processes)
    per_device = train.get("per_device_train_batch_size", 8)
    steps, rest = divmod(launch.global_batch_size, per_device * world)
    if rest or steps < 1:
        raise SmolalignError(f"launch.global_batch_size {launch.global_batch_size} is not a multiple of "
                             f"per-device batch {per_device} × {world} process(es); change one of them")
    if "gradient_accumulation_steps" in train and train["gradient_accumulation_steps"] != steps:
        print(f"note: gradient accumulation {steps} (not train.gradient_accumulation_steps "
              f"{train['gradient_accumulation_steps']}) keeps the global batch of {launch.global_batch_size} over "
              f"{world} process(es)", file=sys.stderr)
    return steps


def _rl_sections(raw: dict):
    """(method, rewards, generation, teacher) of an rl recipe; each reward is built once here so a bad name, file or
    parameter fails before anything loads."""
    from rewards.registry import resolve_reward
    from smolalign.recipe.schema import Method
    from smolalign.recipe.typecheck import suggest

    name = raw.get("method", "grpo")
    if name not in RL_METHODS:
        raise SmolalignError(f"method: {name!r} is not an rl method{suggest(str(name), RL_METHODS)}; one of "
                             f"{', '.join(RL_METHODS)}")
    generation = build(GenerationSection, raw.get("generation"), "generation")
    if name in DISTILL_METHODS:
        if raw.get("rewards"):
            raise SmolalignError(f"rewards: method {name} learns from a teacher, not from rewards; remove rewards: "
                                 "(or use method: grpo)")
        if not raw.get("teacher"):
            raise SmolalignError(f"teacher is required for method {name} (teacher.source: a model source)")
        return Method(name, name), (), generation, build(TeacherSection, raw["teacher"], "teacher")
    if raw.get("teacher"):
        raise SmolalignError("teacher: method grpo learns from rewards; use method: distill, gold or auto")
    listed = raw.get("rewards")
    if not isinstance(listed, list) or not listed:
        raise SmolalignError("rewards: an rl recipe needs a list of rewards, e.g. [{name: math_accuracy}]")
    rewards = tuple(build(RewardSection, item, f"rewards.{i}") for i, item in enumerate(listed))
    for index, reward in enumerate(rewards):
        try:
            resolve_reward(reward.name, reward.params)
        except USER_ERRORS as exc:
            raise SmolalignError(f"rewards.{index}: {exc}") from None
    return Method(name, "grpo"), rewards, generation, None


def _data_mapping(raw: dict, pairs: PairsSection | None) -> dict:
    """`data:` as written; with `pairs:`, the generated pairs file is one more source (the only one if none)."""
    data = raw.get("data")
    if pairs is None:
        return data
    from smolalign.pairs.output import pairs_path

    if data is not None and not isinstance(data, dict):
        raise SmolalignError(f"data must be a mapping, got {data!r}")
    data = dict(data or {})
    data["sources"] = [*(data.get("sources") or []), {"path": str(pairs_path(pairs))}]
    return data


def _section(raw: dict, name: str) -> dict[str, Any] | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SmolalignError(f"{name} must be a mapping, got {value!r}")
    return value


def recipe_to_dict(recipe: Recipe) -> dict:
    """The resolved recipe as written to a run directory: smolalign's sections with defaults filled in."""
    out: dict[str, Any] = {"stage": recipe.stage}
    if recipe.description:
        out["description"] = recipe.description
    out["model"] = dataclasses.asdict(recipe.model)
    out["template"] = dataclasses.asdict(recipe.template)
    out["data"] = dataclasses.asdict(recipe.data)
    if recipe.peft is not None:
        out["peft"] = recipe.peft
    if recipe.launch is not None:
        out["launch"] = dataclasses.asdict(recipe.launch)
    if recipe.method is not None and recipe.stage == "rl":
        out["method"] = recipe.method.name
    elif recipe.method is not None:
        out["method"] = recipe.raw.get("method")
        reference = recipe.reference
        if reference.kind == "source":
            out["reference"] = {"source": reference.source}
        elif reference.kind != "none":
            out["reference"] = reference.kind
    if recipe.rewards:
        out["rewards"] = [dataclasses.asdict(r) for r in recipe.rewards]
    if recipe.generation is not None:
        out["generation"] = dataclasses.asdict(recipe.generation)
    if recipe.teacher is not None:
        out["teacher"] = dataclasses.asdict(recipe.teacher)
    if recipe.pairs is not None:
        from smolalign.pairs.output import pairs_path

        out["pairs"] = dataclasses.asdict(recipe.pairs)
        # The generated pairs are added to data.sources when the recipe is read; written back, they would be twice.
        generated = str(pairs_path(recipe.pairs))
        out["data"]["sources"] = [s for s in out["data"]["sources"] if s["path"] != generated]
    out["train"] = recipe.train
    if recipe.evaluation is not None:
        out["eval"] = dataclasses.asdict(recipe.evaluation)
    return out


def recipe_stage(name_or_path: str, overrides: list[str]) -> str:
    """The stage a recipe is for: its `stage:` key, else po when it names a method or pairs, else sft."""
    from smolalign.recipe.load import apply_overrides, read_recipe, recipe_path

    raw = apply_overrides(read_recipe(recipe_path(name_or_path)), overrides)
    declared = raw.get("stage")
    if declared:
        return str(declared)
    if "rewards" in raw or "generation" in raw or "teacher" in raw:
        return "rl"
    return "po" if "method" in raw or "pairs" in raw else "sft"


def load_recipe(name_or_path: str, overrides: list[str], stage: str) -> Recipe:
    """Read a recipe (name or path), apply `--set` overrides and validate it for `stage`."""
    from smolalign.recipe.load import apply_overrides, read_recipe, recipe_path

    path = recipe_path(name_or_path)
    raw = apply_overrides(read_recipe(path), overrides)
    return validate_recipe(raw, stage, str(path))
