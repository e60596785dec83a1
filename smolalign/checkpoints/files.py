"""Reading the small structured parts of checkpoint files without trusting them: safetensors headers, JSON and text
files, torch zip archives and DCP `.metadata`. Each reader checks what it returns against the file (offsets inside it,
sizes that add up) and raises SmolalignError naming the file and what is wrong, so a truncated or damaged checkpoint
is refused before any tensor is read rather than failing in the middle of a conversion or a resumed run."""

import json
import pickle
import zipfile
from pathlib import Path

from smolalign.errors import SmolalignError

MAX_HEADER_BYTES = 100 * 1024 * 1024
"""safetensors' own limit on the JSON header."""
SAFETENSORS_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                        "U16": 2, "U32": 4, "U64": 8, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "C64": 8}
"""Bytes per element; other dtype names (sub-byte ones such as F4) are only checked to lie inside the file."""


def damaged(path: Path, what: str) -> SmolalignError:
    return SmolalignError(f"{path}: {what}; the file is damaged or was cut off while being written (copy or save it "
                          "again)")


def read_text(path: Path, what: str = "text file") -> str:
    """A small UTF-8 text file (a `latest` pointer, a YAML config)."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise damaged(path, f"not a UTF-8 {what} (byte {exc.start})") from None
    except OSError as exc:
        raise SmolalignError(f"{path}: cannot be read ({exc.strerror})") from None


def read_json_object(path: Path) -> dict:
    """A JSON file that must hold an object (a manifest, checkpoint metadata, a model config)."""
    text = read_text(path, "JSON file")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise damaged(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise damaged(path, "not valid JSON (nested too deeply)") from None
    if not isinstance(value, dict):
        raise damaged(path, f"expected a JSON object, found {type(value).__name__}")
    return value


def read_safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file, checked against the file: every tensor's dtype is known, its shape is a
    list of non-negative integers and its byte range has the size the shape needs and lies inside the file."""
    try:
        size = path.stat().st_size
        with path.open("rb") as stream:
            prefix = stream.read(8)
            if len(prefix) < 8:
                raise damaged(path, f"{size} bytes, too short for a safetensors file")
            length = int.from_bytes(prefix, "little")
            if length > min(MAX_HEADER_BYTES, size - 8):
                raise damaged(path, f"its header claims {length} bytes but the file has {size - 8} after the length")
            raw = stream.read(length)
    except OSError as exc:
        raise SmolalignError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise damaged(path, "its safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise damaged(path, "its safetensors header is not a JSON object")
    data_bytes = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            if entry is not None and (not isinstance(entry, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in entry.items())):
                raise damaged(path, "its __metadata__ is not a mapping of strings")
            continue
        _check_entry(path, name, entry, data_bytes)
    return header


def _check_entry(path: Path, name: str, entry, data_bytes: int) -> None:
    if not isinstance(entry, dict):
        raise damaged(path, f"tensor {name!r} has no dtype/shape/data_offsets entry")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or not dtype.replace("_", "").isalnum():
        raise damaged(path, f"tensor {name!r} has an unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise damaged(path, f"tensor {name!r} has a malformed shape {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise damaged(path, f"tensor {name!r} has malformed data_offsets {offsets!r}")
    numel = 1
    for dim in shape:
        numel *= dim
    if dtype in SAFETENSORS_ITEMSIZE and offsets[1] - offsets[0] != numel * SAFETENSORS_ITEMSIZE[dtype]:
        raise damaged(path, f"tensor {name!r} spans {offsets[1] - offsets[0]} bytes but its shape {shape} of "
                            f"{dtype} needs {numel * SAFETENSORS_ITEMSIZE[dtype]}")
    if offsets[1] > data_bytes:
        raise damaged(path, f"tensor {name!r} ends at byte {offsets[1]} of the data but the file holds only "
                            f"{data_bytes} (truncated)")


def check_torch_archive(path: Path) -> None:
    """A file written by torch.save: its zip directory (at the end of the file) is readable and every member lies
    inside the file, which a truncated copy fails. Files in torch's legacy (pickle) format are passed through."""
    try:
        with path.open("rb") as stream:
            magic = stream.read(4)
    except OSError as exc:
        raise SmolalignError(f"{path}: cannot be read ({exc.strerror})") from None
    if magic[:1] == b"\x80":  # torch's pre-1.6 pickle format: nothing to check without unpickling
        return
    if magic != b"PK\x03\x04":
        raise damaged(path, "not a torch.save archive (it does not start with a zip header)")
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise damaged(path, f"its zip directory is unreadable ({_first_line(exc)})") from None
    for member in members:
        if member.header_offset + member.compress_size > size:
            raise damaged(path, f"its member {member.filename} ends past the end of the file (truncated)")


class _MetadataUnpickler(pickle.Unpickler):
    """DCP `.metadata` is a pickle: only the classes torch writes into it may be rebuilt."""

    def find_class(self, module: str, name: str):
        import torch

        allowed = (module.startswith("torch.distributed.checkpoint.")
                   or (module == "torch" and (name == "Size" or isinstance(getattr(torch, name, None), torch.dtype)))
                   or (module == "torch.serialization" and name == "_get_layout")
                   or (module == "pathlib" and name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"))
                   or (module == "collections" and name == "OrderedDict")
                   or (module == "builtins" and name in ("set", "frozenset", "slice")))
        if not allowed:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which DCP metadata never holds")
        return super().find_class(module, name)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def read_dcp_metadata(folder: Path):
    """The `Metadata` of a DCP folder, with every storage entry checked to lie inside an existing .distcp file."""
    from torch.distributed.checkpoint.metadata import Metadata

    path = folder / ".metadata"
    try:
        with path.open("rb") as stream:
            metadata = _MetadataUnpickler(stream).load()
    except OSError as exc:
        raise SmolalignError(f"{path}: cannot be read ({exc.strerror})") from None
    except Exception as exc:  # noqa: BLE001 - unpickling arbitrary bytes can raise nearly anything
        raise damaged(path, f"not torch DCP metadata ({type(exc).__name__}: {_first_line(exc)[:80]})") from None
    if not isinstance(metadata, Metadata) or not isinstance(getattr(metadata, "state_dict_metadata", None), dict):
        raise damaged(path, f"not torch DCP metadata (it holds a {type(metadata).__name__})")
    sizes: dict[str, int | None] = {}
    for index, info in (getattr(metadata, "storage_data", None) or {}).items():
        relative, offset, length = (getattr(info, k, None) for k in ("relative_path", "offset", "length"))
        if not isinstance(relative, str) or type(offset) is not int or type(length) is not int:
            raise damaged(path, f"its storage entry for {getattr(index, 'fqn', index)!r} is malformed")
        if relative not in sizes:
            file = folder / relative
            sizes[relative] = file.stat().st_size if file.is_file() and file.parent == folder else None
        if sizes[relative] is None:
            raise SmolalignError(f"DCP checkpoint {folder}: {relative} is missing (it holds "
                                 f"{getattr(index, 'fqn', index)}); was the copy interrupted?")
        if offset < 0 or length < 0 or offset + length > sizes[relative]:
            raise damaged(folder / relative, f"{getattr(index, 'fqn', index)} is stored at bytes "
                                             f"{offset}-{offset + length} but the file has {sizes[relative]}")
    return metadata
