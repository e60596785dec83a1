"""Where a `pairs:` section's generated pairs are: `pairs.output`, or a file in smolalign's cache named by a key of
what they depend on (the section, the prompt files, the generators' models, the recipe's template, and the scorer's
or verifier's reward models and files). Below `resolve`, which adds that file to the run's data."""

import dataclasses
import hashlib
import json
from pathlib import Path

from rewards.reward_model import PREFIX, is_reward_model
from smolalign.inputs.data_sources import files_stamp, fingerprint_of
from smolalign.models.sources import cache_root
from smolalign.recipe.schema import Recipe
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template

GRADING_KEYS = ("scorer", "margin", "pick", "unpaired", "threshold")
"""Graded-pairs options that decide only how candidates are scored and picked, not which are generated."""


def config_key(recipe: Recipe, generation_only: bool = False) -> str:
    """What the generated pairs depend on: the section (output aside), the prompt files, the generators' files, the
    template every side without its own renders with (the recipe's: its name, kwargs and text), and the scorer's or
    verifier's reward models and reward files; `generation_only`: what the generated answers alone depend on (the
    work log's key, so that re-scoring graded candidates reuses them)."""
    pairs = recipe.pairs
    # A section left unset is left out, so that a new optional key does not re-key every cached pairs file.
    section = {k: v for k, v in dataclasses.asdict(pairs).items()
               if k != "output" and not (k == "verifier" and v is None)}
    models = [_model_fingerprint(g.source) for g in pairs.generators.values()]
    rewards = [r.name for r in pairs.verifier.rewards] if pairs.verifier is not None else []
    if pairs.graded is not None and generation_only:
        section["graded"] = {k: v for k, v in section["graded"].items() if k not in GRADING_KEYS}
    elif pairs.graded is not None:
        rewards += [r.name for r in pairs.graded.scorer]
    models += [_model_fingerprint(name[len(PREFIX):]) for name in rewards if is_reward_model(name)]
    models += [_model_fingerprint(name.rsplit(":", 1)[0]) for name in rewards if ".py:" in name]  # a team's file
    parts = {"section": section, "prompts": [fingerprint_of(source) for source in pairs.prompts], "models": models,
             "template": _template_fingerprint(recipe)}
    if recipe.data is not None and recipe.data.system_prompt is not None:  # in every prompt without a system message
        parts["system_prompt"] = recipe.data.system_prompt
    sides = [g.template for g in pairs.generators.values() if g.template and g.template != MODEL_TEMPLATE]
    if sides:  # a side's own template: its text too (an edited .jinja file)
        parts["side_templates"] = [resolve_template(name).sha256 for name in sides]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _template_fingerprint(recipe: Recipe) -> dict:
    """The recipe's template as the sides without one of their own render with it: its name, its kwargs, and its
    text (a shipped template smolalign changed, a .jinja file edited); the model's own is in the model's files."""
    name = recipe.template.name
    text = None if name == MODEL_TEMPLATE else resolve_template(name).sha256
    return {"name": name, "kwargs": recipe.template.kwargs, "sha256": text}


def _model_fingerprint(source: str) -> str:
    """A local model directory by its files' sizes and times (a retrained model gets new pairs); others by name."""
    path = Path(source).expanduser()
    if path.is_dir():
        return files_stamp(sorted(p for p in path.iterdir() if p.is_file()), path) or ""
    if path.is_file():
        return f"{path.resolve()}:{path.stat().st_size}:{path.stat().st_mtime_ns}"
    return source


def pairs_path(recipe: Recipe) -> Path:
    """`pairs.output`, or a file in the smolalign cache named by the configuration's key."""
    if recipe.pairs.output:
        return Path(recipe.pairs.output).expanduser().resolve()
    return cache_root() / "pairs" / config_key(recipe) / "pairs.jsonl"
