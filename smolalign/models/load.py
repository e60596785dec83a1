"""Loading tokenizers and models for a recipe, and saving a trained model so that it chats correctly elsewhere.

What is ours here: GGUF conversion into a cached directory, clear errors for missing or unreachable sources, the
chat template installed on the tokenizer, EOS taken from the template's end-of-turn token (a GGUF SmolLM2 reports
`<|im_start|>` as EOS), and the generation config kept in sync with it when saving.
"""

import contextlib
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

from smolalign import hub_access
from smolalign.atomic import readable_as_created
from smolalign.checkpoints.convert import convert
from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware, autocast_attention
from smolalign.models import cpu_attention
from smolalign.models.config import model_width
from smolalign.models.gguf_read import read_once
from smolalign.models.lora_merge import merge_adapters
from smolalign.models.read_errors import damaged, refuse_a_folder_without_tokenizer, source_errors
from smolalign.models.sources import ModelSource, checkpoint_cache_dir, gguf_cache_dir, resolve_model
from smolalign.recipe.schema import ModelSection
from smolalign.target import Target
from smolalign.templates.registry import ChatTemplate, resolve_template
from smolalign.templates.render import render


def local_dir(source: ModelSource) -> str:
    """A path or hub id that `from_pretrained` accepts; GGUF files and pretraining checkpoints are converted once
    into the cache."""
    if source.kind == "checkpoint":
        return _converted_checkpoint(source)
    if source.kind != "gguf":
        return source.location
    target = gguf_cache_dir(source)
    if (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file():
        return str(target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(source.location)
    print(f"converting {gguf.name} to a transformers checkpoint in {target} (once)")
    with source_errors(source), read_once():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype="float32")
    # GGUF tokenizers come with WordPiece-style clean-up on, which mangles BPE output ("a ." -> "a.").
    tokenizer.clean_up_tokenization_spaces = False
    # The weights are already dequantized to float32; only the GGUF marker stops save_pretrained.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    readable_as_created(staging)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return str(target)


def _converted_checkpoint(source: ModelSource) -> str:
    """The checkpoint converted into the cache, once per content (see checkpoints.content_key)."""
    target = checkpoint_cache_dir(source)
    if (target / "config.json").is_file():
        return str(target)
    print(f"converting {source.location} to a transformers checkpoint in {target} (once)")
    conversion = convert(source.location, target, tokenizer=source.tokenizer, overwrite=True)
    print("\n".join("  " + line for line in conversion.describe().splitlines()))
    return str(target)


def end_of_turn_token(template: ChatTemplate, tokenizer) -> str | None:
    """The special token that closes an assistant turn in this template (`<|im_end|>` for ChatML-style ones)."""
    probe = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    text, spans = render(template, probe)
    added = sorted(tokenizer.get_added_vocab(), key=len, reverse=True)
    if spans:  # the token the generated span ends with; None if it ends with plain text (then rows are refused)
        generated = text[spans[0][0]:spans[0][1]].rstrip()
        return next((token for token in added if generated.endswith(token)), None)
    after_answer = text[text.rfind("y") + 1:]  # no markers: the first special token after the answer
    found = [(after_answer.find(token), token) for token in added if token in after_answer]
    return min(found)[1] if found else None


def load_tokenizer(section: ModelSection, template_name: str, source: ModelSource | None = None):
    """The tokenizer with the recipe's chat template installed, EOS set to its end-of-turn token and a pad token;
    `source` is the section's source when it was resolved already."""
    from transformers import AutoTokenizer

    source = source or resolve_model(section)
    refuse_a_folder_without_tokenizer(source)
    with source_errors(source):
        tokenizer = AutoTokenizer.from_pretrained(local_dir(source), revision=source.revision,
                                                  trust_remote_code=section.trust_remote_code)
    return _with_template(tokenizer, section, template_name)


def preflight_tokenizer(section: ModelSection, template_name: str, source: ModelSource, target: Target):
    """(tokenizer, template) as `load_tokenizer` gives them, read without converting or downloading weights (a
    GGUF file's own tokenizer, a checkpoint's tokenizer directory); None for a hub id that is not in the local cache
    (a dry run downloads nothing), refused when the hub cannot be reached (`hub_access`) and `target` is this
    machine, since training could not fetch it either."""
    from transformers import AutoTokenizer

    where, kwargs = local_dir(source) if _converted(source) else source.location, {}
    if source.kind == "hub" and not _in_hub_cache(source):
        # A Slurm job's nodes may reach the hub, or have their own cache: only this machine's is asked.
        if target.here and (offline := hub_access.offline_reason()):
            raise SmolalignError(f"model.source {source.label}: not a local directory and not in the hub cache, and "
                                 f"{offline}; download it first (hf download {source.location}) or point "
                                 "model.source at a directory")
        return None
    if source.kind == "gguf" and not _converted(source):
        where, kwargs = str(Path(source.location).parent), {"gguf_file": Path(source.location).name,
                                                             "clean_up_tokenization_spaces": False}
    elif source.kind == "checkpoint" and not _converted(source):
        where = source.tokenizer
    refuse_a_folder_without_tokenizer(source)
    try:
        with read_once() if kwargs.get("gguf_file") else contextlib.nullcontext():  # gguf imported only for GGUF
            tokenizer = AutoTokenizer.from_pretrained(where, revision=source.revision if source.kind == "hub" else None,
                                                      trust_remote_code=section.trust_remote_code, **kwargs)
    except (OSError, ValueError, struct.error) as exc:
        damage = "a weights file is damaged or cut off: " if damaged(source, exc) else ""
        raise SmolalignError(f"model.source {source.label}: {damage}"
                             f"{' '.join(str(exc).split()) or type(exc).__name__}") from None
    return _with_template(tokenizer, section, template_name)


def _converted(source: ModelSource) -> bool:
    """Whether `local_dir` would answer without converting anything."""
    if source.kind == "gguf":
        target = gguf_cache_dir(source)
        return (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file()
    return source.kind != "checkpoint"  # its tokenizer directory is read as it is (keying the cache reads every file)


def _in_hub_cache(source: ModelSource) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(source.location, "tokenizer_config.json", revision=source.revision)
    return isinstance(found, str)


def _with_template(tokenizer, section: ModelSection, template_name: str):
    """The recipe's chat template installed, EOS set to its end-of-turn token, a pad token."""
    template = resolve_template(template_name, tokenizer.chat_template)
    tokenizer.chat_template = template.text
    eot = end_of_turn_token(template, tokenizer)
    if eot is not None:
        tokenizer.eos_token = eot
    if tokenizer.eos_token is None:
        raise SmolalignError(f"model source {section.source}: the tokenizer has no EOS and the template no end-of-turn token")
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in vocab and eot != "<|endoftext|>" else tokenizer.eos_token
    return tokenizer, template


def load_model(section: ModelSection, dtype: str, hardware: Hardware, tokenizer, source: ModelSource | None = None,
               scorer: bool = False):
    """The causal LM in `dtype` (quantized with bitsandbytes if asked), with EOS and pad synced to the tokenizer;
    `source` is the section's source when it was resolved already. `scorer`: the same backbone with a one-output
    classification head instead (a reward model; a new head starts random)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    source = source or resolve_model(section)
    kwargs: dict = {"dtype": getattr(torch, dtype), "trust_remote_code": section.trust_remote_code}
    attention = section.attn_implementation or autocast_attention(section.dtype, hardware, dtype, model_width(source))
    if attention == "flex_attention" and not hardware.on_gpu:
        # torch's flex attention has no backward pass on a CPU ("FlexAttention does not support backward on CPU") and
        # compiles its forward there for minutes: a GPU recipe smoke-tested on a CPU takes the CPU's attention, which
        # keeps packed rows apart by their position ids as flex attention does.
        attention = autocast_attention(section.dtype, hardware, dtype, model_width(source))
        print(f"note: model.attn_implementation flex_attention runs on a GPU; on this CPU: {attention or 'sdpa'}",
              file=sys.stderr)
    if attention == cpu_attention.NAME:
        cpu_attention.register()
    if attention:
        kwargs["attn_implementation"] = attention
    if source.revision:
        kwargs["revision"] = source.revision
    if section.quantization:
        from transformers import BitsAndBytesConfig

        if section.quantization == "4bit":
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=getattr(torch, dtype),
                bnb_4bit_use_double_quant=True, bnb_4bit_quant_storage=getattr(torch, dtype))
        else:
            kwargs["quantization_config"] = BitsAndBytesConfig(load_in_8bit=True)
        if hardware.on_gpu:
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    auto_class = AutoModelForSequenceClassification if scorer else AutoModelForCausalLM
    if scorer:
        kwargs["num_labels"] = 1
    with source_errors(source):
        model = auto_class.from_pretrained(local_dir(source), **kwargs)
    if source.kind == "hub" and source.revision:
        # TRL builds its colocated vLLM engine from `model.name_or_path` alone, which for a hub id loads `main`: the
        # revision's snapshot folder, where the files just loaded are, names the same files.
        model.name_or_path = model.config.name_or_path = revision_folder(source)
    sync_special_tokens(model, tokenizer)
    report_zero3_sharding(model)
    return model


def revision_folder(source: ModelSource) -> str:
    """The local folder of a hub model's revision (its snapshot in the hub cache), once its files are there."""
    from transformers.utils import cached_file

    return str(Path(cached_file(source.location, "config.json", revision=source.revision)).parent)


def report_zero3_sharding(model) -> None:
    """Under ZeRO-3 the weights are split across processes as they load (never whole on any one of them): say how
    much this process holds, so a run that silently materialised the full model on every rank shows it."""
    sharded = [p for p in model.parameters() if hasattr(p, "ds_tensor")]
    if not sharded:
        return
    held = sum(p.ds_tensor.numel() for p in sharded)
    total = sum(p.ds_numel for p in sharded)
    rank = os.environ.get("RANK", "0")
    print(f"rank {rank}: {model.config.model_type} sharded as it loaded (ZeRO-3): this process holds {held:,} of "
          f"{total:,} parameters")


def sync_special_tokens(model, tokenizer) -> None:
    """Model config and generation config agree with the tokenizer on EOS and pad, so generation stops at a turn end."""
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.eos_token_id = tokenizer.eos_token_id
    if getattr(model, "generation_config", None) is not None:  # a classifier (reward model) generates nothing
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id


def save_for_inference(model, tokenizer, directory: Path, state_dict: dict | None = None) -> None:
    """Weights, tokenizer (with the chat template) and a generation config whose EOS is the template's end of turn.
    `state_dict` is the gathered weights of a sharded (ZeRO-3) model, whose own parameters are empty slices here;
    a LoRA model is then saved as its adapter, since its base cannot be merged slice by slice; otherwise its adapters
    are merged, without losing their small updates on a bf16 base (models.lora_merge)."""
    if state_dict is None and hasattr(model, "merge_and_unload") and not getattr(model, "is_loaded_in_4bit", False) \
            and not getattr(model, "is_loaded_in_8bit", False):
        model = merge_adapters(model)
    sync_special_tokens(model, tokenizer)
    model.config.use_cache = True
    model.save_pretrained(directory, state_dict=state_dict)
    tokenizer.save_pretrained(directory)
    readable_as_created(directory)
