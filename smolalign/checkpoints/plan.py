"""A converted model as a plan (name, shape, dtype, how to produce the tensor) written tensor by tensor into
sharded safetensors files plus the index transformers reads.

The safetensors header holds every offset, so it is computed from the plan before any data is read; each tensor is
then produced, written and dropped. Peak memory is one source tensor (a fused qkv, an embedding) plus the piece cut
from it, whatever the model size: `safetensors.torch.save_file` would need a whole shard in memory at once.
"""

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from smolalign.checkpoints.nanotron_shards import load

SAFETENSORS_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
                      "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
                      "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}
DEFAULT_SHARD_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class TensorPlan:
    name: str
    shape: tuple[int, ...]
    dtype: str
    """torch dtype name of the source tensor."""
    produce: Callable[[], object]

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


def slice_rows(name: str, parameter, start: int | None = None, stop: int | None = None) -> TensorPlan:
    """Rows [start:stop) of a nanotron parameter (nanotron_shards.Parameter; all of it when no range is given)."""
    rows = parameter.shape[0]
    start, stop = start or 0, rows if stop is None else stop
    shape = (stop - start, *parameter.shape[1:]) if parameter.shape else ()

    def produce():
        full = _load_last(parameter)
        return full if (start, stop) == (0, rows) else full[start:stop]

    return TensorPlan(name, shape, parameter.dtype, produce)


@functools.lru_cache(maxsize=1)
def _load_last(parameter):
    """The unsharded parameter, kept until the next one is asked for (q, k and v are cut from one qkv)."""
    return load(parameter)


def write_sharded(plan: list[TensorPlan], directory: Path, dtype: str | None = None,
                  max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> int:
    """Write `plan` as model.safetensors or model-0000i-of-0000n.safetensors + index; `dtype` casts every floating
    tensor. Returns the bytes written (tensor data)."""
    import torch

    target = {p.name: (dtype if dtype and p.dtype.startswith(("float", "bfloat")) else p.dtype) for p in plan}
    shards: list[list[TensorPlan]] = [[]]
    size = 0
    for item in plan:
        nbytes = item.numel * ITEMSIZE.get(target[item.name], 1)
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += nbytes
    names = ["model.safetensors"] if len(shards) == 1 else [
        f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    total, weight_map = 0, {}
    try:
        for file_name, items in zip(names, shards, strict=True):
            total += _write_file(directory / file_name, items, target, torch)
            weight_map.update({item.name: file_name for item in items})
    finally:
        _load_last.cache_clear()
    if len(shards) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return total


def _write_file(path: Path, items: list[TensorPlan], target: dict[str, str], torch) -> int:
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for item in items:
        nbytes = item.numel * ITEMSIZE.get(target[item.name], 1)
        header[item.name] = {"dtype": SAFETENSORS_DTYPES[target[item.name]], "shape": list(item.shape),
                             "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as stream:
        stream.write(len(encoded).to_bytes(8, "little"))
        stream.write(encoded)
        for item in items:
            tensor = item.produce()
            want = getattr(torch, target[item.name])
            if tuple(tensor.shape) != item.shape:
                raise RuntimeError(f"{item.name}: produced shape {tuple(tensor.shape)}, planned {item.shape}")
            tensor = tensor.to(want).contiguous()
            stream.write(tensor.reshape(-1).view(torch.uint8).numpy().data)
            del tensor
    return offset
