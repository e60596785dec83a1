"""nanotron's weight files read without nanotron: one safetensors file per parameter shard, each carrying the slices
it covers of the unsharded tensor, so any TP/PP layout is rebuilt from the files alone and every element is proven
covered before a tensor is handed on.

File names: `model/<module path>/model_<weight|bias>[_pp-rank-P-of-N_tp-rank-T-of-M[_exp-rank-E-of-K]].safetensors`;
metadata: `version`, `local_global_slices_pairs` ("start,stop,step|...#start,stop,step|...;next pair") and
`unsharded_shape` ("(64, 64)" or, from numpy 2, "(np.int64(128), 64)").
"""

import re
from dataclasses import dataclass
from pathlib import Path

from smolalign.checkpoints.files import damaged, read_safetensors_header
from smolalign.errors import SmolalignError

MIN_VERSION = (1, 2)
_FILE = re.compile(r"model_(?P<leaf>[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*?)"
                   r"(?:_pp-rank-(?P<pp>\d+)-of-(?P<pp_size>\d+)_tp-rank-(?P<tp>\d+)-of-(?P<tp_size>\d+)"
                   r"(?:_exp-rank-(?P<exp>\d+)-of-(?P<exp_size>\d+))?)?\.safetensors")
DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "F8_E4M3": "float8_e4m3fn",
          "F8_E5M2": "float8_e5m2"}


@dataclass(frozen=True)
class Shard:
    path: Path
    pp: int | None
    pp_size: int | None
    tp: int | None
    tp_size: int | None
    exp_size: int | None


@dataclass(frozen=True)
class Parameter:
    name: str
    """nanotron's name, e.g. model.decoder.0.pp_block.attn.qkv_proj.weight."""
    shards: tuple[Shard, ...]
    shape: tuple[int, ...]
    dtype: str
    """torch dtype name (bfloat16, float32, ...)."""

    @property
    def sharded(self) -> bool:
        return self.shards[0].tp_size is not None

    @property
    def nbytes(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count * _itemsize(self.dtype)


def _shard_header(path: Path) -> dict:
    """A nanotron shard's checked safetensors header: one tensor named `data` (slice metadata under `__metadata__`)."""
    header = read_safetensors_header(path)
    if set(header) - {"__metadata__"} != {"data"}:
        raise damaged(path, "a nanotron weight file holds one tensor named 'data', this one holds "
                            f"{sorted(k for k in header if k != '__metadata__')[:3]}")
    return header


def scan(step_dir: Path) -> dict[str, Parameter]:
    """Every parameter of a nanotron step folder, its shards checked for completeness; name -> Parameter."""
    root = step_dir / "model"
    groups: dict[str, list[Shard]] = {}
    for path in sorted(root.rglob("*.safetensors")):
        match = _FILE.fullmatch(path.name)
        if match is None:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: unexpected weight file {path.relative_to(step_dir)}")
        if match["exp_size"] is not None and int(match["exp_size"]) > 1:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: expert-sharded weights ({path.name}) are a "
                                 "mixture-of-experts model, which smolalign does not convert")
        module = ".".join(path.relative_to(root).parent.parts)
        name = f"{module}.{match['leaf']}"
        ints = {k: int(v) if v is not None else None for k, v in match.groupdict().items() if k != "leaf"}
        groups.setdefault(name, []).append(Shard(path, ints["pp"], ints["pp_size"], ints["tp"], ints["tp_size"],
                                                 ints["exp_size"]))
    if not groups:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: no weight files under model/")
    return {name: _parameter(name, shards, step_dir) for name, shards in sorted(groups.items())}


def _parameter(name: str, shards: list[Shard], step_dir: Path) -> Parameter:
    headers = [_shard_header(s.path) for s in shards]
    dtypes = {h["data"]["dtype"] for h in headers}
    if len(dtypes) != 1 or next(iter(dtypes)) not in DTYPES:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: {name} has shards of dtypes {sorted(dtypes)}")
    dtype = DTYPES[dtypes.pop()]
    if shards[0].tp_size is None:
        if len(shards) != 1:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: {name} is stored both whole and sharded")
        return Parameter(name, tuple(shards), tuple(headers[0]["data"]["shape"]), dtype)
    _require_all_ranks(name, shards, step_dir)
    shape = None
    for shard, header in zip(shards, headers, strict=True):
        meta = header.get("__metadata__") or {}
        version = meta.get("version")
        if version is None or "local_global_slices_pairs" not in meta:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: {shard.path.name} of {name} carries no slice "
                                 "metadata: checkpoints older than version 1.2 are not supported (re-save it with a "
                                 "recent nanotron)")
        require_version(version, f"{shard.path.relative_to(step_dir)}", step_dir)
        try:
            this = parse_shape(meta.get("unsharded_shape", ""))
            parse_slice_pairs(meta["local_global_slices_pairs"])
        except ValueError:
            raise damaged(shard.path, "its slice metadata (unsharded_shape, local_global_slices_pairs) is not in "
                                      "nanotron's format") from None
        if shape is not None and this != shape:
            raise SmolalignError(f"nanotron checkpoint {step_dir}: shards of {name} disagree on its shape "
                                 f"({shape} vs {this})")
        shape = this
    _require_coverage(name, shards, headers, shape, step_dir)
    return Parameter(name, tuple(shards), shape, dtype)


def _require_all_ranks(name: str, shards: list[Shard], step_dir: Path) -> None:
    sizes = {(s.tp_size, s.pp_size) for s in shards}
    if len(sizes) != 1:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: shards of {name} come from different layouts {sorted(sizes)}")
    tp_size, pp_size = sizes.pop()
    pp_ranks = {s.pp for s in shards}
    if len(pp_ranks) != 1:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: {name} has shards from several pipeline ranks "
                             f"{sorted(pp_ranks)}")
    present = sorted(s.tp for s in shards)
    missing = sorted(set(range(tp_size)) - set(present))
    if missing or len(present) != tp_size:
        folder = shards[0].path.parent.relative_to(step_dir)
        leaf = name.rsplit(".", 1)[1]
        pp = shards[0].pp
        files = [f"{folder}/model_{leaf}_pp-rank-{pp}-of-{pp_size}_tp-rank-{r}-of-{tp_size}.safetensors" for r in missing]
        raise SmolalignError(f"nanotron checkpoint {step_dir}: {name} is missing tensor-parallel rank(s) "
                             f"{missing} of {tp_size}: {', '.join(files)} not found (was the copy interrupted?)")


def require_version(version: str, where: str, step_dir: Path) -> None:
    try:
        parts = tuple(int(p) for p in str(version).split(".")[:2])
    except ValueError:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: unreadable version {version!r} in {where}") from None
    if parts < MIN_VERSION:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: version {version} ({where}) is older than 1.2, the "
                             "first with per-shard slice metadata; re-save it with a recent nanotron")


def parse_shape(text: str) -> tuple[int, ...]:
    """'(128, 64)' or '(np.int64(128), 64)' -> (128, 64)."""
    dims = []
    for part in text.strip().strip("()").split(","):
        part = part.strip()
        if not part:
            continue
        inner = re.fullmatch(r"np\.u?int\d+\((\d+)\)", part)
        dims.append(int(inner.group(1)) if inner else int(part))
    return tuple(dims)


def parse_slice_pairs(text: str) -> list[tuple[tuple[slice, ...], tuple[slice, ...]]]:
    """nanotron's SlicesPair.tuple_to_str back into (local slices, global slices) pairs."""
    def slices(part: str) -> tuple[slice, ...]:
        out = []
        for triple in part.split("|"):
            start, stop, step = (None if v == "None" else int(v) for v in triple.split(","))
            out.append(slice(start, stop, step))
        return tuple(out)

    pairs = []
    for pair in text.split(";"):
        local, global_ = pair.split("#")
        pairs.append((slices(local), slices(global_)))
    return pairs


def _require_coverage(name, shards, headers, shape, step_dir: Path) -> None:
    """The global slices of all shards tile the tensor exactly: disjoint boxes whose volumes add up to its size."""
    boxes = []
    for shard, header in zip(shards, headers, strict=True):
        local_shape = tuple(header["data"]["shape"])
        for local, global_ in parse_slice_pairs(header["__metadata__"]["local_global_slices_pairs"]):
            g = _box(global_, shape)
            lo = _box(local, local_shape)
            if g is None or lo is None or [b - a for a, b in g] != [b - a for a, b in lo]:
                raise SmolalignError(f"nanotron checkpoint {step_dir}: {shard.path.name} of {name} has slice "
                                     "metadata that does not fit its shape")
            boxes.append(g)
    total = 1
    for dim in shape:
        total *= dim
    covered = sum(_volume(b) for b in boxes)
    overlap = any(_intersects(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    if overlap or covered != total:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: the shards of {name} cover {covered} of its {total} "
                             f"elements{' with overlaps' if overlap else ''}; a shard is missing or damaged")


def _box(slices: tuple[slice, ...], shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    if len(slices) != len(shape):
        return None
    box = []
    for s, size in zip(slices, shape, strict=True):
        if s.step == 0:
            return None
        start, stop, step = s.indices(size)
        if step != 1:
            return None
        box.append((start, max(start, stop)))
    return box


def _volume(box) -> int:
    out = 1
    for a, b in box:
        out *= b - a
    return out


def _intersects(a, b) -> bool:
    return all(max(a0, b0) < min(a1, b1) for (a0, a1), (b0, b1) in zip(a, b, strict=True))


def _itemsize(dtype: str) -> int:
    return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}.get(dtype, 1)


def load(parameter: Parameter):
    """The unsharded tensor: `full[global] = shard[local]` over every shard (one shard in memory at a time)."""
    import torch
    from safetensors import safe_open

    if not parameter.sharded:
        with safe_open(str(parameter.shards[0].path), framework="pt") as stream:
            return stream.get_tensor("data")
    full = torch.empty(parameter.shape, dtype=getattr(torch, parameter.dtype))
    for shard in parameter.shards:
        with safe_open(str(shard.path), framework="pt") as stream:
            pairs = parse_slice_pairs(stream.metadata()["local_global_slices_pairs"])
            data = stream.get_tensor("data")
        for local, global_ in pairs:
            full[global_] = data[local]
        del data
    return full
