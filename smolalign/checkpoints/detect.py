"""Which checkpoint format a directory holds, decided from file names and small text files alone (never by
unpickling anything), with `latest` pointers resolved to the step they name.

    smolalign convert path/to/checkpoint out/   # prints the detected format first
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from smolalign.checkpoints.files import read_json_object, read_text
from smolalign.errors import SmolalignError

Format = Literal["hf", "nanotron", "deepspeed", "dcp", "megatron", "megatron_dist"]

HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
CONVERTIBLE = ("nanotron", "deepspeed", "dcp")
MEGATRON_HINT = ("Megatron checkpoints are not converted by smolalign: export them to a transformers directory with "
                 "Megatron-Bridge (pip install megatron-bridge; AutoBridge ... export_hf) or NeMo's HF exporters, then "
                 "use that directory")


@dataclass(frozen=True)
class Detected:
    format: Format
    path: Path
    """The directory that holds the weights: the step folder for nanotron, the folder with `latest` and the
    global_step* tags for DeepSpeed, the folder with `.metadata` for DCP."""
    tag: str | None = None
    """DeepSpeed: the global_step folder to read."""
    notes: tuple[str, ...] = field(default=())
    """How the path was resolved (e.g. `latest.txt -> 4720000`)."""


def detect(location: str | Path) -> Detected:
    """The format of a checkpoint directory; a SmolalignError listing what was found when none matches."""
    path = Path(location).expanduser()
    if not path.is_dir():
        raise SmolalignError(f"checkpoint {location}: no such directory")
    path = path.resolve()
    found = _detect(path)
    if found is None:
        raise SmolalignError(f"checkpoint {location}: not a format smolalign reads (transformers, nanotron, DeepSpeed "
                             f"ZeRO, torch DCP, Megatron); it holds {_listing(path)}")
    return found


def _detect(path: Path) -> Detected | None:
    names = {p.name for p in path.iterdir()}
    if "config.json" in names and (names & set(HF_WEIGHTS) or any(_is_hf_shard(n) for n in names)):
        return Detected("hf", path)  # full weights win over a DeepSpeed tag next to them (HF Trainer checkpoint-N)
    if "adapter_config.json" in names:
        return Detected("hf", path)
    if "checkpoint_metadata.json" in names and (path / "model").is_dir():
        return Detected("nanotron", path)
    if "latest.txt" in names:
        return _nanotron_run(path)
    deepspeed = _deepspeed(path, names)
    if deepspeed is not None:
        return deepspeed
    if "metadata.json" in names and "common.pt" in names:
        return Detected("megatron_dist", path)
    if ".metadata" in names and any(n.endswith(".distcp") for n in names):
        return Detected("dcp", path)
    if "latest_checkpointed_iteration.txt" in names or any(
            n.startswith("iter_") and (path / n).is_dir() for n in names) or any(n.startswith("mp_rank_") for n in names):
        return Detected("megatron", path)
    steps = sorted((int(m.group(1)), n) for n in names if (m := re.fullmatch(r"step-(\d+)", n)) and (path / n).is_dir())
    if steps:  # torchtitan: <dump>/checkpoint/step-N/
        inner = _detect(path / steps[-1][1])
        if inner is not None and inner.format == "dcp":
            return Detected("dcp", inner.path, notes=(f"latest step folder: {steps[-1][1]}",))
    return None


def _is_hf_shard(name: str) -> bool:
    return re.fullmatch(r"(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)", name) is not None


def _nanotron_run(path: Path) -> Detected:
    step = read_text(path / "latest.txt").strip()
    step_dir = path / step
    if not re.fullmatch(r"[\w.-]+", step) or not (step_dir / "checkpoint_metadata.json").is_file():
        raise SmolalignError(f"nanotron run {path}: latest.txt names step {step!r}, which is not a checkpoint "
                             f"folder of it (no {step!r}/checkpoint_metadata.json); point at a step folder instead")
    return Detected("nanotron", step_dir, notes=(f"latest.txt -> step {step}",))


def _deepspeed(path: Path, names: set[str]) -> Detected | None:
    """`latest` + global_stepN/*model_states.pt (DeepSpeed's save_checkpoint, HF Trainer's checkpoint-N), or the
    global_stepN folder itself."""
    if any(n.endswith("model_states.pt") for n in names) and re.fullmatch(r"global_step\d+", path.name):
        return Detected("deepspeed", path.parent, tag=path.name, notes=(f"tag {path.name}",))
    tags = sorted((int(m.group(1)), n) for n in names
                  if (m := re.fullmatch(r"global_step(\d+)", n)) and any((path / n).glob("*model_states.pt")))
    if "latest" in names and (path / "latest").is_file():
        tag = read_text(path / "latest").strip()
        if not re.fullmatch(r"[\w.-]+", tag) or not any((path / tag).glob("*model_states.pt")):
            raise SmolalignError(f"DeepSpeed checkpoint {path}: `latest` names {tag!r}, which holds no "
                                 "*_model_states.pt files")
        return Detected("deepspeed", path, tag=tag, notes=(f"latest -> {tag}",))
    if tags:
        return Detected("deepspeed", path, tag=tags[-1][1], notes=(f"no `latest` file; newest tag {tags[-1][1]}",))
    return None


def _listing(path: Path, limit: int = 12) -> str:
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
    if not entries:
        return "nothing (empty directory)"
    more = f" and {len(entries) - limit} more" if len(entries) > limit else ""
    return ", ".join(entries[:limit]) + more


def nanotron_layout(path: Path) -> dict:
    """TP and PP sizes of a nanotron step folder, from checkpoint_metadata.json and the shard file names."""
    meta = read_json_object(path / "checkpoint_metadata.json")
    pp = {int(m.group(1)) for f in (path / "model").rglob("*.safetensors")
          if (m := re.search(r"_pp-rank-\d+-of-(\d+)_", f.name))}
    tp = meta.get("tp", 1)
    if type(tp) is not int or tp < 1:
        raise SmolalignError(f"{path / 'checkpoint_metadata.json'}: tp must be a positive integer, got {tp!r}")
    return {"version": str(meta.get("version")), "tp": tp, "pp": max(pp, default=1), "dp": meta.get("dp")}


def _has_tokenizer(path: Path) -> bool:
    return path.is_dir() and any((path / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json"))


def bundled_tokenizer(detected: Detected) -> Path | None:
    """A tokenizer directory the checkpoint names or carries: nanotron's config.yaml `tokenizer.tokenizer_name_or_path`
    when it is a local directory; else tokenizer files in the checkpoint folder (HF Trainer's checkpoint-N) or its
    parent (a nanotron run folder)."""
    if detected.format == "nanotron":
        config = detected.path / "config.yaml"
        if config.is_file():
            try:
                name = ((yaml.safe_load(read_text(config)) or {}).get("tokenizer") or {}).get("tokenizer_name_or_path")
            except (yaml.YAMLError, AttributeError, SmolalignError):  # a damaged config.yaml is named when read
                name = None
            if name and _has_tokenizer(Path(name).expanduser()):
                return Path(name).expanduser().resolve()
    for candidate in (detected.path, detected.path.parent):
        if _has_tokenizer(candidate):
            return candidate
    return None
