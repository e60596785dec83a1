"""Pushing a finished run's `model/` to the Hugging Face hub (the recipe's `hub:` section): the repository created
if missing, the branch if one is named, and the run's model card (smolalign.runs.card) beside the weights."""

from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.errors import RunFailure
from smolalign.recipe.schema import HubSection
from smolalign.runs.card import CARD_FILE, build_card
from smolalign.runs.manifest import write_manifest


def hub_api():
    from huggingface_hub import HfApi

    return HfApi()


def push_model(run_dir: Path, model_dir: Path, section: HubSection, api=None) -> str:
    """Write the run's model card (smolalign.runs.card, naming the repository) into `model_dir`, push the folder as
    one commit and record it in the manifest; returns the commit's URL. A failure is a RunFailure that says the model
    is saved and how to push it by hand."""
    api = api or hub_api()
    write_atomically(model_dir / CARD_FILE, str(build_card(run_dir, section.repo_id)))
    try:
        api.create_repo(section.repo_id, private=section.private, exist_ok=True)
        if section.revision:
            api.create_branch(section.repo_id, branch=section.revision, exist_ok=True)
        commit = api.upload_folder(repo_id=section.repo_id, folder_path=str(model_dir), revision=section.revision,
                                   commit_message=f"smolalign: {run_dir.name}")
    except Exception as exc:  # huggingface_hub raises HTTP, network and validation errors of many types
        by_hand = f"hf upload {section.repo_id} {model_dir}" + (f" --revision {section.revision}"
                                                                 if section.revision else "")
        raise RunFailure(f"hub: pushing {model_dir} to {section.repo_id} failed ({str(exc).splitlines()[0]}); the "
                         f"model is saved, push it with `{by_hand}`") from exc
    url = getattr(commit, "commit_url", None) or str(commit)
    write_manifest(run_dir, hub={"repo_id": section.repo_id, "revision": section.revision or "main",
                                 "commit": getattr(commit, "oid", None), "url": url})
    return url
