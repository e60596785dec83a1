"""Pushing a finished run's `model/` to the Hugging Face hub (the recipe's `hub:` section): the repository created
if missing, the branch if one is named, and a model card made of the run's recipe and manifest."""

import json
from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.errors import RunFailure
from smolalign.recipe.schema import HubSection
from smolalign.runs.manifest import write_manifest
from smolalign.runs.rundir import RECIPE_FILE, read_manifest

CARD_FILE = "README.md"


def hub_api():
    from huggingface_hub import HfApi

    return HfApi()


def model_card(run_dir: Path, section: HubSection) -> str:
    """The hub's README.md: metadata the hub indexes, then the run's result, resolved recipe and manifest verbatim."""
    recipe_text = (run_dir / RECIPE_FILE).read_text()
    manifest = read_manifest(run_dir)
    stage = manifest.get("stage", "")
    result = manifest.get("result") or {}
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation", "tags:", "- smolalign",
             f"- {stage}" if stage else None, "---", "", f"# {section.repo_id.split('/')[-1]}", "",
             f"Trained with [smolalign](https://github.com/smolalign/smolalign) `{stage}` from "
             f"`{(manifest.get('model') or {}).get('source')}`"
             + (f" ({result['global_step']} steps, train loss {result['train_loss']:.4g})." if result.get(
                 "train_loss") is not None else "."),
             "The chat template and end-of-turn token it was trained with are saved with the tokenizer.", "",
             "## Recipe", "", "```yaml", recipe_text.rstrip(), "```", "",
             "## Manifest", "", "```json", json.dumps(manifest, indent=2, default=str), "```", ""]
    return "\n".join(line for line in lines if line is not None)


def push_model(run_dir: Path, model_dir: Path, section: HubSection, api=None) -> str:
    """Write the card into `model_dir`, push the folder as one commit and record it in the manifest; returns the
    commit's URL. A failure is a RunFailure that says the model is saved and how to push it by hand."""
    api = api or hub_api()
    write_atomically(model_dir / CARD_FILE, model_card(run_dir, section))
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
