"""Where a `pairs:` section's generated pairs are: `pairs.output`, or a file in smolalign's cache named by a key of
what they depend on (the section, the prompt files, the generators' models and the scorer's or verifier's reward models). Below `resolve`, which
adds that file to the run's data."""

import dataclasses
import hashlib
import json
from pathlib import Path

from rewards.reward_model import PREFIX, is_reward_model
from smolalign.inputs.data_sources import fingerprint_of
from smolalign.models.sources import cache_root
from smolalign.recipe.schema import PairsSection

GRADING_KEYS = ("scorer", "margin", "pick", "unpaired", "threshold")
"""Graded-pairs options that decide only how candidates are scored and picked, not which are generated."""


def config_key(pairs: PairsSection, generation_only: bool = False) -> str:
    """What the generated pairs depend on: the section (output aside), the prompt files, the generators' files and
    the scorer's reward models; `generation_only`: what the generated answers alone depend on (the work log's key,
    so that re-scoring graded candidates reuses them)."""
    # A section left unset is left out, so that a new optional key does not re-key every cached pairs file.
    section = {k: v for k, v in dataclasses.asdict(pairs).items()
               if k != "output" and not (k == "verifier" and v is None)}
    models = [_model_fingerprint(g.source) for g in pairs.generators.values()]
    if pairs.graded is not None and generation_only:
        section["graded"] = {k: v for k, v in section["graded"].items() if k not in GRADING_KEYS}
    elif pairs.graded is not None:
        models += [_model_fingerprint(r.name[len(PREFIX):]) for r in pairs.graded.scorer if is_reward_model(r.name)]
    if pairs.verifier is not None:
        models += [_model_fingerprint(r.name[len(PREFIX):]) for r in pairs.verifier.rewards if is_reward_model(r.name)]
    parts = {"section": section, "prompts": [fingerprint_of(source) for source in pairs.prompts], "models": models}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _model_fingerprint(source: str) -> str:
    """A local model directory by its files' sizes and times (a retrained model gets new pairs); others by name."""
    path = Path(source).expanduser()
    if path.is_dir():
        return ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in sorted(path.iterdir())
                        if p.is_file())
    if path.is_file():
        return f"{path.resolve()}:{path.stat().st_size}:{path.stat().st_mtime_ns}"
    return source


def pairs_path(pairs: PairsSection) -> Path:
    """`pairs.output`, or a file in the smolalign cache named by the configuration's key."""
    if pairs.output:
        return Path(pairs.output).expanduser().resolve()

    return cache_root() / "pairs" / config_key(pairs) / "pairs.jsonl"
