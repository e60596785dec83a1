"""The resolved recipe as written to a run directory and printed by a dry run: smolalign's sections with defaults
filled in, `train:` with the values smolalign derived (gradient accumulation from launch.global_batch_size)."""

import dataclasses
from typing import Any

from smolalign.recipe.method_table import method_spec
from smolalign.recipe.schema import Recipe


def recipe_to_dict(recipe: Recipe, train: dict[str, Any]) -> dict:
    """The resolved recipe as written to a run directory: smolalign's sections with defaults filled in, and `train`
    (the effective settings' `train:`, with what smolalign derived) in place of `train:`."""
    out: dict[str, Any] = {"stage": recipe.stage}
    if recipe.description:
        out["description"] = recipe.description
    out["model"] = dataclasses.asdict(recipe.model)
    out["template"] = dataclasses.asdict(recipe.template)
    if recipe.data is not None:  # a pairs: section's generated file is the run's data plan, not a recipe key
        out["data"] = dataclasses.asdict(recipe.data)
    if recipe.peft is not None:
        out["peft"] = recipe.peft
    if recipe.launch is not None:
        out["launch"] = dataclasses.asdict(recipe.launch)
    if recipe.method is not None:
        out["method"] = recipe.raw.get("method", recipe.method.name)  # as written: a name, a list or a mapping
    reference = recipe.reference
    if reference is not None and not method_spec(recipe.stage, recipe.method).policy_reference:  # TRL's own: no key
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
    if recipe.tools is not None:
        out["tools"] = dataclasses.asdict(recipe.tools)
    if recipe.pairs is not None:
        out["pairs"] = dataclasses.asdict(recipe.pairs)
    out["train"] = train
    if recipe.evaluation is not None:
        out["eval"] = dataclasses.asdict(recipe.evaluation)
    return out
