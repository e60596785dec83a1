"""What makes a `checkpoint-N` folder complete enough to resume from: the trainer's state (written last, so a save
cut off by a kill or a preemption has none), the weights in one of the forms the trainer saves (full, sharded with
an index, a LoRA adapter, FSDP's files or DCP folders, or DeepSpeed's own folder) with every safetensors header
consistent with its file size, every torch file present (optimizer, scheduler, RNG state, arguments) readable to
the end of its archive, and every DCP folder's byte ranges inside its files.

Checked from headers, archive directories and DCP metadata only (the latter through the allow-list unpickler of
checkpoints.files): no tensor is read."""

from pathlib import Path

from smolalign.checkpoints.files import (
    check_torch_archive,
    read_dcp_metadata,
    read_json_object,
    read_safetensors_header,
    read_text,
)
from smolalign.errors import SmolalignError

TRAINER_STATE = "trainer_state.json"
SINGLE_WEIGHTS = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin", "adapter_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
TORCH_SUFFIXES = (".pt", ".pth", ".bin")


def damage(checkpoint: Path) -> str | None:
    """None when `checkpoint` is complete; otherwise what is wrong with it, naming the file."""
    try:
        _check(checkpoint)
    except SmolalignError as exc:
        return str(exc)
    return None


def _check(checkpoint: Path) -> None:
    state = checkpoint / TRAINER_STATE
    if not state.is_file():
        raise SmolalignError(f"it has no {TRAINER_STATE} (its save was interrupted)")
    if not isinstance(read_json_object(state).get("global_step"), int):
        raise SmolalignError(f"{state}: no integer global_step in it")
    weights = _weight_files(checkpoint)
    if not weights:
        raise SmolalignError(f"it holds no model weights ({', '.join(SINGLE_WEIGHTS[:2])}, an index or a DeepSpeed "
                             "global_step folder)")
    for file in weights:
        if file.suffix == ".safetensors":
            read_safetensors_header(file)
    for file in sorted(checkpoint.rglob("*")):
        if file.is_file() and file.suffix in TORCH_SUFFIXES:
            check_torch_archive(file)
        elif file.name == ".metadata":  # FSDP's sharded model or optimizer state, a DCP folder

            read_dcp_metadata(file.parent)


def _weight_files(checkpoint: Path) -> list[Path]:
    for name in INDEXES:
        index = checkpoint / name
        if index.is_file():
            weight_map = read_json_object(index).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise SmolalignError(f"{index}: no weight_map in it")
            files = sorted({checkpoint / str(f) for f in weight_map.values()})
            missing = [f.name for f in files if not f.is_file()]
            if missing:
                raise SmolalignError(f"{index}: it lists {', '.join(missing[:3])}, which is missing")
            return files
    single = [checkpoint / n for n in SINGLE_WEIGHTS if (checkpoint / n).is_file()]
    if single:
        return single
    fsdp = sorted(checkpoint.glob("pytorch_model_fsdp*"))  # .bin files or DCP folders, both checked in _check
    if fsdp:
        return fsdp
    latest = checkpoint / "latest"  # DeepSpeed: the tag folder holds the (partitioned) weights, checked as torch files
    if latest.is_file():
        tag = checkpoint / read_text(latest).strip()
        if not tag.is_dir() or not any(tag.glob("*model_states.pt")):
            raise SmolalignError(f"{latest}: it names {tag.name!r}, which holds no *model_states.pt")
        return sorted(tag.glob("*model_states.pt"))
    return []
