"""`smolalign convert ADAPTER DIR`: a saved LoRA adapter (a QLoRA run's model/, a LoRA run's checkpoint) merged into
its base as a run merges its own (models.lora_merge), with the special tokens its tokenizer has, for the next stage
to train on."""

import shutil
import tempfile
import time
from pathlib import Path

from smolalign.checkpoints.convert import DTYPES, replace_directory
from smolalign.checkpoints.files import read_json_object
from smolalign.errors import SmolalignError
from smolalign.models.load import sync_special_tokens
from smolalign.models.lora_merge import ADAPTER_CONFIG, adapter_base, merge_adapters


def merge_adapter_folder(source: Path, destination: Path, *, dtype: str | None = None, tokenizer: Path | None = None,
                         overwrite: bool = False) -> str:
    """`smolalign convert ADAPTER DIR`: the adapter (a QLoRA run's model/, a LoRA run's checkpoint) merged into its
    base, loaded whole in `dtype` (default: the base's own), as `merge_adapters` merges; written atomically, with the
    adapter's tokenizer (or `tokenizer`, or the base's). Returns what was done, in lines."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    start = time.perf_counter()
    base = adapter_base(source)
    if not base:
        raise SmolalignError(f"{source}: {ADAPTER_CONFIG} names no base model (base_model_name_or_path)")
    if dtype is not None and dtype not in DTYPES:
        raise SmolalignError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())) and not overwrite:
        raise SmolalignError(f"{destination} exists and is not empty; pass --overwrite to replace it")
    scorer = read_json_object(source / ADAPTER_CONFIG).get("task_type") == "SEQ_CLS"
    words = AutoTokenizer.from_pretrained(str(tokenizer or (source if (source / "tokenizer_config.json").is_file()
                                                            else base)))
    load = {"dtype": getattr(torch, dtype) if dtype else "auto"}
    if scorer:  # a reward model's head: one score, read at the last token that is not padding
        load.update(num_labels=1, pad_token_id=words.pad_token_id)
    try:
        model = (AutoModelForSequenceClassification if scorer else AutoModelForCausalLM).from_pretrained(base, **load)
    except OSError as exc:
        raise SmolalignError(f"{source}: its base model {base} does not load ({str(exc).splitlines()[0]})") from None
    merged = merge_adapters(PeftModel.from_pretrained(model, str(source)))
    sync_special_tokens(merged, words)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.staging-"))
    try:
        merged.save_pretrained(staging)
        words.save_pretrained(staging)
        replace_directory(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    weights = next(iter(merged.parameters())).dtype
    return "\n".join([f"format: LoRA adapter ({source}) over {base}",
                      f"model: {type(merged).__name__}, merged in {str(weights).removeprefix('torch.')}"
                      f"{' (rounded stochastically)' if weights == torch.bfloat16 else ''}",
                      f"wrote {destination} in {time.perf_counter() - start:.1f} s"])
