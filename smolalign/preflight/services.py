"""The preflight checks of the services a run talks to before it starts: the hub it pushes the model to (a token,
and HF_HUB_OFFLINE unset) and each judge reward's server (rl rewards, a graded scorer, eval rewards), asked once
before anything loads, not at every request."""

import os

from rewards.registry import resolve_reward
from smolalign.errors import USER_ERRORS
from smolalign.recipe.schema import Recipe


def check_hub(recipe: Recipe, target) -> str | None:
    if recipe.hub is None:
        return None
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        return f"hub.repo_id {recipe.hub.repo_id}: HF_HUB_OFFLINE is set here; unset it, or remove the hub: section"
    from huggingface_hub import get_token

    if get_token() is None:
        return (f"hub.repo_id {recipe.hub.repo_id}: no hub token (set HF_TOKEN or run `hf auth login`), or remove "
                "the hub: section")
    return None


def check_judges(recipe: Recipe, target) -> str | None:
    """A judge's server (rl rewards, a graded scorer, eval rewards) is asked once, now, not at every request."""
    graded = recipe.pairs.graded.scorer if recipe.pairs is not None and recipe.pairs.graded is not None else []
    entries = [*((f"rewards.{i}", r) for i, r in enumerate(recipe.rewards)),
               *((f"pairs.graded.scorer.{i}", r) for i, r in enumerate(graded)),
               *((f"eval.rewards.{i}", r) for i, r in enumerate(recipe.evaluation.rewards if recipe.evaluation else []))]
    for key, section in entries:
        if section.name == "judge":
            try:
                resolve_reward(section.name, section.params).probe()
            except USER_ERRORS as exc:
                return f"{key}: {exc}"
    return None
