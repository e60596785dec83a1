"""The cache key of a converted checkpoint: a sha256 of the content of every file the conversion reads (weights,
configs, tokenizer files), so a checkpoint rewritten in place (a resumed run saving the same step again, a re-copied
folder) is converted again and an unchanged one, wherever it was copied to, is reused.

Content rather than path + mtime because both lie: copies change mtimes without changing weights, and an interrupted
and restarted save can rewrite a step under the same name. Reading every byte costs about a second per GB, so each
file's digest is remembered next to the cache, keyed by its size, mtime, ctime and inode (ctime changes on any
write and cannot be set back): an untouched file is never read twice, a touched one is hashed again.
"""

import hashlib
import json
from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.checkpoints.detect import Detected

CONVERTER_VERSION = "1"
"""Part of every key: bump it when a conversion fix changes the output, so cached conversions are redone."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "chat_template.json")
_CHUNK = 8 * 1024 * 1024


def content_files(detected: Detected) -> list[Path]:
    """The files a conversion of `detected` reads (optimizer states of nanotron are left out: unused)."""
    path = detected.path
    if detected.format == "nanotron":
        files = sorted((path / "model").rglob("*.safetensors"))
        files += [path / n for n in ("model_config.json", "config.yaml", "checkpoint_metadata.json") if (path / n).is_file()]
    elif detected.format == "deepspeed":
        files = sorted(p for p in (path / detected.tag).iterdir() if p.is_file())
    else:
        files = sorted(p for p in path.iterdir() if p.is_file())
    files += [p for p in (path / "config.json", path.parent / "config.json") if p.is_file() and p not in files]
    return files


def content_key(detected: Detected, tokenizer: Path | None, memo: Path) -> str:
    """sha256 over (relative name, file digest) of the checkpoint's files and the tokenizer's, and the converter
    version."""
    digests = _read_memo(memo)
    lines = [f"converter {CONVERTER_VERSION} {detected.format} {detected.tag or ''}"]
    for file in content_files(detected):
        lines.append(f"{_relative(file, detected.path)}\0{_digest(file, digests)}")
    if tokenizer is not None:
        for name in TOKENIZER_FILES + ("config.json",):
            if (tokenizer / name).is_file():
                lines.append(f"tokenizer/{name}\0{_digest(tokenizer / name, digests)}")
    _write_memo(memo, digests)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _relative(file: Path, root: Path) -> str:
    try:
        return str(file.relative_to(root))
    except ValueError:
        return "../" + file.name


def _digest(file: Path, digests: dict) -> str:
    stat = file.stat()
    stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    known = digests.get(str(file.resolve()))
    if known and known[0] == stamp:
        return known[1]
    sha = hashlib.sha256()
    with file.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            sha.update(chunk)
    digests[str(file.resolve())] = [stamp, sha.hexdigest()]
    return sha.hexdigest()


def _read_memo(memo: Path) -> dict:
    try:
        return json.loads(memo.read_text())
    except (OSError, ValueError):
        return {}


def _write_memo(memo: Path, digests: dict) -> None:
    write_atomically(memo, json.dumps(digests))
