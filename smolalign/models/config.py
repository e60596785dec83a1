"""A model's transformers config read without its weights and without a download: what the plan's estimates and
each model's precision on a CPU are decided from."""

import functools
import struct
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.models.gguf_read import read_once
from smolalign.models.lora_merge import adapter_base
from smolalign.models.read_errors import damaged
from smolalign.models.sources import checkpoint_cache_dir, gguf_cache_dir


def read_config(source, key: str = "model.source"):
    """The transformers config of a resolved model source (`models.sources.ModelSource`), without weights; None when
    it cannot be had without a download or a conversion (a hub id not in the local cache, an unconverted
    pretraining checkpoint). A config that is there but unreadable is a SmolalignError naming `key`."""
    spec, revision = source.location, source.revision
    kind, location = source.kind, Path(source.location)
    if kind == "checkpoint":
        location = checkpoint_cache_dir(source)
        kind = "dir" if location.is_dir() else "unconverted"
    elif kind == "gguf" and gguf_cache_dir(source).is_dir():
        location, kind = gguf_cache_dir(source), "dir"
    if kind == "unconverted":
        return None
    if kind == "dir" and (base := adapter_base(location)) is not None:
        raise SmolalignError(f"{key} {spec} is a LoRA adapter (over {base or 'an unnamed base'}), not a whole model: "
                             f"merge it into its base once with `smolalign convert {spec} DIR`, and use DIR")
    from transformers import AutoConfig

    try:
        if kind == "gguf":
            with read_once():
                return AutoConfig.from_pretrained(str(location.parent), gguf_file=location.name)
        if kind == "hub":
            return AutoConfig.from_pretrained(spec, revision=revision, local_files_only=True)
        return AutoConfig.from_pretrained(str(location))
    except OSError as exc:
        if kind == "hub":
            return None
        raise SmolalignError(f"{key} {spec}: its config cannot be read ({str(exc).splitlines()[0]})") from None
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        if damaged(source, exc):
            raise SmolalignError(f"{key} {spec}: a weights file is damaged or cut off: {exc}") from None
        raise SmolalignError(f"{key} {spec}: its config cannot be read ({exc})") from None


def model_width(source) -> int | None:
    """The hidden size of a resolved model source, which decides its precision on a CPU (hardware.cpu_bf16_pays);
    None when its config cannot be had offline, or is unreadable (the run's own checks name that)."""
    return getattr(_text_config(source), "hidden_size", None)


def model_positions(source) -> int | None:
    """The positions a resolved model source was built for (max_position_embeddings), or None (as model_width)."""
    return getattr(_text_config(source), "max_position_embeddings", None)


@functools.cache
def _text_config(source):
    """The text model's part of a source's config (read once per source: a GGUF file's is parsed), or None."""
    try:
        config = read_config(source)
    except SmolalignError:
        return None
    if config is None:
        return None
    return config.get_text_config() if hasattr(config, "get_text_config") else config
