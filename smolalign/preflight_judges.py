"""The preflight check of a recipe's judge rewards: each judge's server (rl rewards, a graded scorer, eval rewards) is
asked once before anything loads, not at every request. Its row in the checks table is in `smolalign.preflight`."""

from smolalign.recipe.schema import Recipe


def check_judges(recipe: Recipe, target) -> str | None:
    """A judge's server (rl rewards, a graded scorer, eval rewards) is asked once, now, not at every request."""
    from rewards.registry import resolve_reward
    from smolalign.errors import USER_ERRORS

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
