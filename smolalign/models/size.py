"""How many parameters a model source holds, read from file headers (safetensors, GGUF) without loading weights:
what the plan needs to say what a reference model costs in memory."""

import functools
from pathlib import Path

from smolalign.checkpoints.files import read_safetensors_header
from smolalign.models.sources import gguf_cache_dir

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def parameter_count(location: str) -> int | None:
    """Parameters in a local model directory or GGUF file; None when they cannot be read without loading."""
    path = Path(location).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _file_count("gguf", path)
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if files:
            return sum(_file_count("safetensors", f) for f in files)
    return None


def _file_count(kind: str, path: Path) -> int | None:
    """One file's parameter count, read once per version of the file: a plan asks for the same reference or teacher
    several times (the memory estimate and each change it tries to make a run fit)."""
    stat = path.stat()
    return _count_of_version(kind, str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _count_of_version(kind: str, path: str, size: int, mtime_ns: int) -> int | None:
    return _gguf_count(Path(path)) if kind == "gguf" else _safetensors_count(Path(path))


def source_parameter_count(source) -> int | None:
    """Parameters of a resolved model source (`ModelSource`; a GGUF source counts its converted copy once there is
    one); None when they cannot be read without loading (a hub id, say)."""
    if source.kind == "gguf":
        converted = gguf_cache_dir(source)
        return parameter_count(str(converted)) if converted.is_dir() else parameter_count(source.location)
    return parameter_count(source.location)


def _safetensors_count(path: Path) -> int:
    header = read_safetensors_header(path)
    total = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in entry["shape"]:
            count *= dim
        total += count
    return total


def _gguf_count(path: Path) -> int | None:
    try:
        from gguf import GGUFReader
    except ImportError:
        return None
    return int(sum(int(t.n_elements) for t in GGUFReader(str(path)).tensors))
