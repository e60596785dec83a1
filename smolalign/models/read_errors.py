"""What a model source's read failures mean, in one line naming the source: a damaged or cut-off weights file, a
folder saved without its tokenizer, a hub source that cannot be downloaded or is not cached while the hub does not
answer. The libraries' own words for these are tracebacks or lists of what they tried."""

import contextlib
import struct
from collections.abc import Iterator
from pathlib import Path

from smolalign import hub_access
from smolalign.errors import SmolalignError
from smolalign.models.sources import ModelSource


@contextlib.contextmanager
def source_errors(source: ModelSource) -> Iterator[None]:
    """Turn a hub or file failure while loading into one message naming the source; a hub source asks first whether
    the hub answers (`hub_access`), so that an unreachable one fails at once from the local cache."""
    offline = hub_access.offline_reason() if source.kind == "hub" else None
    try:
        yield
    except SmolalignError:
        raise
    except Exception as exc:
        if damaged(source, exc):
            raise SmolalignError(f"model source {source.label}: a weights file is damaged or cut off "
                                 f"({' '.join(str(exc).split()) or type(exc).__name__})") from None
        if not isinstance(exc, (OSError, ValueError)):
            raise
        if offline:  # the library's own words only repeat it
            raise SmolalignError(f"model source {source.label}: not in the local cache, and {offline}; download it "
                                 f"where the hub answers (hf download {source.location}) or point the source at a "
                                 "directory") from None
        if source.kind == "hub":
            raise SmolalignError(f"model source {source.label}: it could not be downloaded "
                                 f"({str(exc).splitlines()[0]})") from None
        raise SmolalignError(f"model source {source.label}: {str(exc).splitlines()[0]}") from None


def damaged(source: ModelSource, exc: Exception) -> bool:
    """A read failure that means a damaged or cut-off file: safetensors' own error, a header that ends early
    (struct), or a GGUF file cut inside its tensor data (gguf's reader then cannot shape a tensor it maps)."""
    return (type(exc).__name__ == "SafetensorError" or isinstance(exc, struct.error)
            or (source.kind == "gguf" and isinstance(exc, ValueError) and "cannot reshape array" in str(exc)))


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model")
"""Any of these in a model folder means it carries a tokenizer (fast, config, sentencepiece, BPE or WordPiece)."""


def refuse_a_folder_without_tokenizer(source: ModelSource) -> None:
    """A transformers folder saved without its tokenizer (`model.save_pretrained` alone) is named as such: the
    library's own words list the ways it tried to build one."""
    folder = Path(source.location)
    if source.kind == "dir" and folder.is_dir() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise SmolalignError(f"model source {source.label}: the folder holds weights but no tokenizer (no "
                             "tokenizer.json or tokenizer_config.json); save the tokenizer it was trained with into "
                             "it: AutoTokenizer.from_pretrained(BASE).save_pretrained(FOLDER)")
