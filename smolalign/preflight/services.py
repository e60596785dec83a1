"""The preflight checks of the services a run talks to before it starts: the hub it pushes the model to (a token,
HF_HUB_OFFLINE unset, the hub answering from this machine) and each judge reward's server (rl rewards, a graded
scorer, eval rewards), asked once before anything loads, not at every request."""

from smolalign import hub_access
from smolalign.errors import USER_ERRORS
from smolalign.resolve import Run, each_reward


def check_hub(run: Run) -> str | None:
    recipe = run.recipe
    if recipe.hub is None:
        return None
    if hub_access.offline_by_setting():
        return f"hub.repo_id {recipe.hub.repo_id}: HF_HUB_OFFLINE is set here; unset it, or remove the hub: section"
    if run.target.here and (unreachable := hub_access.offline_reason()):  # a cluster's nodes are not asked from here
        return (f"hub.repo_id {recipe.hub.repo_id}: {unreachable}, so the model could not be pushed after training; "
                "run where the hub answers, or remove the hub: section")
    from huggingface_hub import get_token

    if get_token() is None:
        return (f"hub.repo_id {recipe.hub.repo_id}: no hub token (set HF_TOKEN or run `hf auth login`), or remove "
                "the hub: section")
    return None


def check_judges(run: Run) -> str | None:
    """A judge's server (rl rewards, a graded scorer, a verifier, eval rewards) is asked once, now, not at every
    request: the run's own judges, built when it was resolved."""
    for key, section, function in each_reward(run):
        if section.name == "judge":
            try:
                function.probe()
            except USER_ERRORS as exc:
                return f"{key}: {exc}"
    return None
