"""`recipes import` for the Trainer's hub keys: `push_to_hub` with `hub_model_id` (and open-r1's
`hub_model_revision`) becomes a smolalign `hub:` section, which pushes the final model once the run has ended, with
its fixed template and EOS and the run's recipe as card; TRL's own pushes of the checkpoint folder have no home."""

from smolalign.recipe.upstream import RENAMED

HUB_KEYS = ("push_to_hub", "hub_model_id", "hub_private_repo", "hub_revision", "hub_model_revision", "hub_strategy",
            "hub_always_push", "hub_token")


def import_hub(state) -> None:
    raw = state.raw
    present = [key for key in HUB_KEYS if key in raw]
    if not present:
        return
    if not raw.get("push_to_hub"):
        for key in present:
            state.dropped(key, "push_to_hub is not true: nothing is pushed" if key != "push_to_hub"
                          else "false: nothing is pushed (smolalign pushes only with a hub: section)")
        return
    repo_id = raw.get("hub_model_id")
    if not isinstance(repo_id, str) or "/" not in repo_id:
        for key in present:
            state.dropped(key, f"no owner/name to push to (hub_model_id is {repo_id!r}; TRL would prefix your user "
                               "name): add hub: {repo_id: OWNER/NAME} to push the final model")
        return
    hub: dict = {"repo_id": repo_id}
    state.renamed("push_to_hub", "hub: (the final model/ is pushed once the run has ended)")
    state.renamed("hub_model_id", "hub.repo_id")
    if raw.get("hub_private_repo") is not None:
        hub["private"] = bool(raw["hub_private_repo"])
        state.renamed("hub_private_repo", "hub.private")
    elif "hub_private_repo" in raw:
        state.dropped("hub_private_repo", "null: hub.private keeps smolalign's default (a new repository is private)")
    for key in ("hub_revision", "hub_model_revision"):
        if raw.get(key) not in (None, "main"):
            hub["revision"] = raw[key]
            state.renamed(key, "hub.revision")
        elif key in raw:
            state.dropped(key, "main is hub.revision's default")
    for key in ("hub_strategy", "hub_always_push", "hub_token"):
        if key in raw:
            state.dropped(key, RENAMED[key].removeprefix("nowhere: "))
    state.extra["hub"] = hub
