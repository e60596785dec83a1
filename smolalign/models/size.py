"""How many parameters a model source holds, read from file headers (safetensors, GGUF) without loading weights:
what the plan needs to say what a reference model costs in memory."""

import json
import struct
from pathlib import Path

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def parameter_count(location: str) -> int | None:
    """Parameters in a local model directory or GGUF file; None when they cannot be read without loading."""
    path = Path(location).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _gguf_count(path)
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if files:
            return sum(_safetensors_count(f) for f in files)
    return None


def source_parameter_count(source) -> int | None:
    """Parameters of a resolved model source (`ModelSource`; a GGUF source counts its converted copy once there is
    one); None when they cannot be read without loading (a hub id, say)."""
    from smolalign.models.sources import gguf_cache_dir

    if source.kind == "gguf":
        converted = gguf_cache_dir(source)
        return parameter_count(str(converted)) if converted.is_dir() else parameter_count(source.location)
    return parameter_count(source.location)


def _safetensors_count(path: Path) -> int:
    with path.open("rb") as stream:
        (size,) = struct.unpack("<Q", stream.read(8))
        header = json.loads(stream.read(size))
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
