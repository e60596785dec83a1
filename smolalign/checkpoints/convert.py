"""A pretraining checkpoint (nanotron, DeepSpeed ZeRO, torch DCP) into a transformers directory: config.json,
generation_config.json, safetensors shards + index and the tokenizer, written into a staging folder next to the
destination and renamed into place only when complete.

    smolalign convert runs/pretrain/checkpoints out/base --tokenizer path/to/tokenizer
"""

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from smolalign.atomic import readable_as_created
from smolalign.checkpoints import nanotron_hf, nanotron_shards
from smolalign.checkpoints.dcp import dcp_plan
from smolalign.checkpoints.deepspeed_zero import deepspeed_plan
from smolalign.checkpoints.detect import (
    CONVERTIBLE,
    MEGATRON_HINT,
    Detected,
    bundled_tokenizer,
    detect,
    nanotron_layout,
)
from smolalign.checkpoints.plan import TensorPlan, write_sharded
from smolalign.errors import SmolalignError
from smolalign.quantities import describe_bytes

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Conversion:
    format: str
    source: Path
    output: Path
    layout: str
    tensors: int
    bytes: int
    seconds: float
    architecture: str
    notes: tuple[str, ...]

    def describe(self) -> str:
        lines = [f"format: {self.format} ({self.source})", f"layout: {self.layout}",
                 f"model: {self.architecture}, {self.tensors} tensors, {describe_bytes(self.bytes)}",
                 *(f"note: {note}" for note in self.notes),
                 f"wrote {self.output} in {self.seconds:.1f} s"]
        return "\n".join(lines)


def convert(source: str | Path, destination: str | Path, *, tokenizer: str | Path | None = None,
            dtype: str | None = None, config: str | Path | None = None, overwrite: bool = False,
            max_shard_bytes: int | None = None) -> Conversion:
    """Convert `source` into a transformers directory at `destination` (atomic; refuses a non-empty destination
    unless `overwrite`)."""
    start = time.perf_counter()
    detected = require_convertible(source)
    if dtype is not None and dtype not in DTYPES:
        raise SmolalignError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    destination = Path(destination).expanduser().resolve()
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())) and not overwrite:
        raise SmolalignError(f"{destination} exists and is not empty; pass --overwrite to replace it")
    tokenizer_dir = resolve_tokenizer(detected, tokenizer)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.staging-"))
    try:
        built = _build(detected, tokenizer_dir, config, dtype)
        hf_config, plan, layout, notes, tokenizer_obj = built
        out_dtype = dtype or _dominant_dtype(plan)
        hf_config.dtype = out_dtype
        hf_config.architectures = [_class_name(hf_config)]
        hf_config.save_pretrained(staging)
        _write_generation_config(hf_config, staging)
        kwargs = {"max_shard_bytes": max_shard_bytes} if max_shard_bytes else {}
        written = write_sharded(plan, staging, dtype, **kwargs)
        if tokenizer_obj is not None:
            tokenizer_obj.save_pretrained(staging)
        else:
            notes = (*notes, "no tokenizer given or found: pass --tokenizer to ship one with the model")
        replace_directory(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Conversion(detected.format, detected.path, destination, layout, len(plan), written,
                      time.perf_counter() - start, _class_name(hf_config), (*detected.notes, *notes))


def require_convertible(source: str | Path) -> Detected:
    detected = detect(source)
    if detected.format == "hf":
        raise SmolalignError(f"{source} is already a transformers directory: use it as it is")
    if detected.format in ("megatron", "megatron_dist"):
        raise SmolalignError(f"{source}: {MEGATRON_HINT}")
    assert detected.format in CONVERTIBLE
    return detected


def resolve_tokenizer(detected: Detected, tokenizer: str | Path | None) -> Path | None:
    """The tokenizer directory: the one given, else one the checkpoint names or carries (see detect.bundled_tokenizer)."""
    if tokenizer is None:
        return bundled_tokenizer(detected)
    path = Path(tokenizer).expanduser()
    if not path.is_dir() or not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise SmolalignError(f"tokenizer {tokenizer}: not a directory holding tokenizer.json or tokenizer_config.json")
    return path.resolve()


def _build(detected: Detected, tokenizer_dir: Path | None, config: str | Path | None, dtype: str | None):
    """(HF config, plan, layout, notes, tokenizer) for the detected format."""
    tokenizer = _load_tokenizer(tokenizer_dir)
    if detected.format == "nanotron":
        return (*_nanotron(detected, tokenizer), tokenizer)
    hf_config = load_hf_config(detected, config, tokenizer_dir)
    expected = expected_weights(hf_config)
    notes: tuple[str, ...] = ()
    if detected.format == "deepspeed":
        plan, layout = deepspeed_plan(detected, bool(hf_config.tie_word_embeddings))
        if dtype is None:
            notes = ("ZeRO keeps float32 master weights, written as float32 (use --dtype bfloat16 to halve the size)",)
    else:
        plan, layout = dcp_plan(detected.path, hf_config, set(expected))
    check_against_architecture(plan, expected, detected.path)
    return hf_config, plan, layout, notes, tokenizer


def _nanotron(detected: Detected, tokenizer):
    step_dir = detected.path
    layout = nanotron_layout(step_dir)
    nanotron_shards.require_version(layout["version"], "checkpoint_metadata.json", step_dir)
    model_config, full_config = nanotron_hf.read_model_config(step_dir)
    arch = nanotron_hf.architecture(model_config, step_dir)
    params = nanotron_shards.scan(step_dir)
    embedding = params.get("model.token_position_embeddings.pp_block.token_embedding.weight")
    if embedding is None:
        raise SmolalignError(f"nanotron checkpoint {step_dir}: no token embedding under model/model/"
                             "token_position_embeddings (was the first pipeline stage left out of the copy?)")
    rows = embedding.shape[0]
    if model_config.get("vocab_size") not in (None, rows):
        raise SmolalignError(f"nanotron checkpoint {step_dir}: the config says vocab_size {model_config['vocab_size']} "
                             f"but the embedding has {rows} rows")
    vocab = nanotron_hf.true_vocab_size(rows, len(tokenizer) if tokenizer is not None else None, full_config,
                                        layout["tp"], step_dir)
    plan = nanotron_hf.tensor_plan(params, model_config, vocab, step_dir)
    hf_config = nanotron_hf.hf_config(model_config, arch, vocab, _dominant_dtype(plan))
    check_against_architecture(plan, expected_weights(hf_config), step_dir)
    notes = (f"vocabulary trimmed from {rows} padded rows to the tokenizer's {vocab}",) if vocab != rows else ()
    text = f"nanotron {layout['version']}, TP {layout['tp']}, PP {layout['pp']} ({len(params)} parameters)"
    return hf_config, plan, text, notes


def _load_tokenizer(tokenizer_dir: Path | None):
    if tokenizer_dir is None:
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(tokenizer_dir))
    except (OSError, ValueError) as exc:
        raise SmolalignError(f"tokenizer {tokenizer_dir}: {str(exc).splitlines()[0]}") from None


def load_hf_config(detected: Detected, config: str | Path | None, tokenizer_dir: Path | None):
    """The architecture of a DeepSpeed or DCP checkpoint, which carry none of their own: --config, else a config.json
    in the checkpoint folder (HF Trainer's checkpoint-N), its parent, or the tokenizer directory."""
    from transformers import AutoConfig

    if config is not None:
        path = Path(config).expanduser()
        path = path / "config.json" if path.is_dir() else path
        if not path.is_file():
            raise SmolalignError(f"--config {config}: no config.json there")
    else:
        candidates = [detected.path / "config.json", detected.path.parent / "config.json"]
        if tokenizer_dir is not None:
            candidates.append(tokenizer_dir / "config.json")
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            kind = "DCP" if detected.format == "dcp" else "DeepSpeed"
            raise SmolalignError(f"{kind} checkpoint {detected.path} carries no model config: pass --config PATH "
                                 "(a transformers config.json, or a directory holding one, of the trained architecture)")
    try:
        return AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise SmolalignError(f"config {path}: {str(exc).splitlines()[0]}") from None


def expected_weights(hf_config) -> dict[str, tuple[int, ...]]:
    """HF name -> shape of every weight the architecture saves (tied lm_head excluded), built on the meta device."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    weights = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if getattr(hf_config, "tie_word_embeddings", False):
        weights.pop("lm_head.weight", None)
    return weights


def check_against_architecture(plan: list[TensorPlan], expected: dict[str, tuple[int, ...]], where: Path) -> None:
    have = {p.name: p.shape for p in plan}
    missing, extra = sorted(set(expected) - set(have)), sorted(set(have) - set(expected))
    wrong = [f"{n} {have[n]} (expected {expected[n]})" for n in sorted(set(have) & set(expected)) if have[n] != expected[n]]
    if missing or extra or wrong:
        parts = [f"missing {', '.join(missing[:4])}" if missing else "", f"unexpected {', '.join(extra[:4])}" if extra else "",
                 f"wrong shapes {', '.join(wrong[:3])}" if wrong else ""]
        raise SmolalignError(f"checkpoint {where}: the weights do not fit the architecture: "
                             f"{'; '.join(p for p in parts if p)}")


def _dominant_dtype(plan: list[TensorPlan]) -> str:
    counts: dict[str, int] = {}
    for item in plan:
        counts[item.dtype] = counts.get(item.dtype, 0) + item.numel
    return max(counts, key=counts.get)


def _class_name(hf_config) -> str:
    return {"llama": "LlamaForCausalLM", "smollm3": "SmolLM3ForCausalLM"}.get(
        hf_config.model_type, (hf_config.architectures or [type(hf_config).__name__])[0])


def _write_generation_config(hf_config, directory: Path) -> None:
    """generation_config.json from the model's special tokens, as save_pretrained writes it (none when it has none)."""
    from transformers import GenerationConfig

    generation = GenerationConfig.from_model_config(hf_config)
    if generation.eos_token_id is not None or generation.bos_token_id is not None:
        generation.save_pretrained(directory)


def replace_directory(staging: Path, destination: Path) -> None:
    """Move the finished staging folder into place; an old destination is removed only after the rename."""
    readable_as_created(staging)  # mkdtemp's folder and safetensors' weights are private to their owner
    old = None
    if destination.exists():
        old = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.old-"))
        os.replace(destination, old / destination.name)
    os.replace(staging, destination)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

