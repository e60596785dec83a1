"""The SFT data pipeline: mixture -> tokens and labels -> row checks -> truncation -> packing, cached by fingerprint.

The cache key covers everything the result depends on (source files by path/size/mtime, tokenizer, template text,
template kwargs, loss masks, length and packing settings), so a second run with the same inputs loads the prepared
rows from disk instead of re-tokenizing, and any change re-prepares.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from smolalign.data.encode import EMPTY_ANSWER, PROBLEM, UNTRAINED, Encoder, LossMask
from smolalign.data.mixture import ORIGIN, Mixture, build_mixture
from smolalign.errors import SmolalignError
from smolalign.inputs.data_sources import rows_fingerprint
from smolalign.models.sources import cache_root
from smolalign.progress import datasets_bars
from smolalign.recipe.settings import TrainSettings
from smolalign.resolve import Run
from smolalign.templates.registry import ChatTemplate

PIPELINE_VERSION = 5
"""Bump when the prepared rows change for the same inputs, so old caches are not reused (2: empty answers and
reasoning in no_think answers refused, a system message of flags only filled by data.system_prompt; 3: no copy of a
held-out row trained, sources of one dataset counted apart; 4: a reward model's sides end where the rendered
conversation ends; 5: other rows under one short name told apart, plain reward pairs as conversations, KTO's
desirable rows counted)."""


@dataclass(frozen=True)
class Layout:
    """How rows become training sequences, read from the run's effective training settings."""

    max_length: int | None
    packing: str | None
    """None (no packing), "bfd", "bfd_split" or "wrapped"."""
    truncation_mode: str | None
    loss: LossMask

    @classmethod
    def from_settings(cls, settings: TrainSettings) -> "Layout":
        packing = settings["packing_strategy"] if settings.get("packing") else None
        max_length = settings.get("max_length")
        if packing and max_length is None:
            raise SmolalignError("train.packing needs train.max_length")
        # Loss masking is smolalign's (these keys are not passed to TRL): on unless the recipe turns it off.
        loss = LossMask(assistant_only=settings.train.get("assistant_only_loss") is not False,
                        completion_only=settings.train.get("completion_only_loss") is not False)
        return cls(max_length, packing, settings.get("truncation_mode"), loss)


@dataclass
class PreparedData:
    train: object
    eval: object | None
    stats: dict
    fingerprint: str


def tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    specials = json.dumps({"eos": tokenizer.eos_token, "pad": tokenizer.pad_token}, sort_keys=True)
    return hashlib.sha256((body + specials).encode()).hexdigest()


def cache_key(run: Run, layout: "Layout | dict", tokenizer, template: ChatTemplate) -> str:
    """What prepared rows depend on; `layout` is the SFT layout, or a mapping of the settings another stage uses."""
    parts = {
        "pipeline": PIPELINE_VERSION,
        "sources": [(rows_fingerprint(s), asdict(s)) for s in run.data.sources],
        "data": {k: v for k, v in asdict(run.data).items() if k != "sources"},
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "template": template.sha256,
        "template_kwargs": run.recipe.template.kwargs,
        "layout": layout if isinstance(layout, dict) else asdict(layout),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def load_prepared(key: str, *, prepared_by_another: bool = False) -> PreparedData | None:
    """The rows prepared under `key` in smolalign's cache, if they are there whole. `prepared_by_another`: this
    process reads what the run's main process prepared a moment ago (under a launcher, the main process prepares
    first and the others wait), so a cache without them is refused: the processes of this node do not see the main
    one's cache, and would each prepare the data again, all at once."""
    import datasets

    directory = cache_root() / "tokenized" / key
    if (directory / "stats.json").is_file():
        stats = json.loads((directory / "stats.json").read_text())
        held_out = datasets.load_from_disk(str(directory / "eval")) if (directory / "eval").is_dir() else None
        return PreparedData(datasets.load_from_disk(str(directory / "train")), held_out, {**stats, "cached": True}, key)
    if prepared_by_another:
        raise SmolalignError(f"the data the run's main process prepared is not in this process's cache ({directory}, "
                             "SMOLALIGN_CACHE): every node of a run must see the same cache, on a filesystem they "
                             "share; set SMOLALIGN_CACHE to a folder there")
    return None


def save_prepared(data: PreparedData) -> None:
    """`data` in smolalign's cache under its key, for every later process and run that prepares the same rows."""
    _save(cache_root() / "tokenized" / data.fingerprint, data.train, data.eval, data.stats)


def prepare_sft_data(run: Run, tokenizer, template: ChatTemplate, *, use_cache: bool = True,
                     mixture: Mixture | None = None, prepared_by_another: bool = False) -> PreparedData:
    """Train (and held-out) rows as the trainer consumes them: input_ids, labels and, packed, seq_lengths.
    `mixture` is the run's data already read (by the plan), if it was; `prepared_by_another`: see load_prepared."""
    datasets_bars()
    layout = Layout.from_settings(run.settings)
    key = cache_key(run, layout, tokenizer, template)
    if use_cache and (found := load_prepared(key, prepared_by_another=prepared_by_another)) is not None:
        return found
    mixture = mixture or build_mixture(run.data)
    encoder = Encoder(tokenizer, template, mixture.format, layout.loss, run.recipe.template.kwargs)
    stats: dict = {"format": mixture.format, "sources": {p: {"rows": n, "taken": k}
                                                          for p, (n, k) in mixture.rows_per_source.items()}}
    workers = run.settings.get("dataset_num_proc")
    train, stats["train"] = prepare_split(mixture.train, encoder, layout, run.data.on_untrained, workers)
    held_out = None
    if mixture.eval is not None:
        held_out, stats["eval"] = prepare_split(mixture.eval, encoder, layout, run.data.on_untrained, workers,
                                                split="held-out")
    if use_cache:
        save_prepared(PreparedData(train, held_out, stats, key))
    return PreparedData(train, held_out, {**stats, "cached": False}, key)


def encode_rows(dataset, encoder: Encoder, num_proc: int | None = None):
    """Tokenize and mask every row (batched), keeping the origin and problem columns for the checks."""
    # datasets' own cache is not used (ours is keyed above), so skip its fingerprinting, which would pickle
    # the whole tokenizer to hash the encoder.
    return dataset.map(encoder, batched=True, batch_size=512, desc="tokenize",
                       remove_columns=[c for c in dataset.column_names if c != ORIGIN], keep_in_memory=True,
                       load_from_cache_file=False, new_fingerprint=uuid.uuid4().hex,
                       num_proc=num_proc if num_proc and num_proc > 1 and len(dataset) >= 2 * num_proc else None)


def prepare_split(dataset, encoder: Encoder, layout: Layout, on_untrained: str, num_proc: int | None = None, *,
                  split: str = "training"):
    """One split through encoding, checks, truncation and packing; returns the rows and what happened to them.
    `num_proc` (train.dataset_num_proc) tokenizes in that many processes; the result does not depend on it. A
    split left with no row (every one dropped with no trained token) is refused, naming why (`split` names it)."""
    encoded = encode_rows(dataset, encoder, num_proc)
    rows = len(encoded)
    encoded, dropped_empty = fail_on_problems(encoded, on_untrained)
    lengths = row_lengths(encoded)
    stats = {"rows": rows, "tokens": int(lengths.sum()), "dropped_empty": dropped_empty}
    if len(encoded) == 0:
        raise SmolalignError(f"no {split} row is left: all {rows:,} have an empty answer (data.on_untrained: drop)")
    if layout.max_length is not None and layout.packing in (None, "bfd"):
        too_long = lengths > layout.max_length
        stats["truncated"] = int(too_long.sum())
        if too_long.any():
            encoded = truncate(encoded, layout.max_length, layout.truncation_mode)
    trained = trained_per_row(encoded)
    encoded, stats["dropped_untrained"] = drop_untrained(encoded, trained, on_untrained)
    if len(encoded) == 0:
        cut = (f", {stats['truncated']:,} of them cut at train.max_length {layout.max_length}"
               if stats.get("truncated") else "")
        raise SmolalignError(f"no {split} row is left: all {stats['rows']:,} were dropped with no trained token "
                             f"(data.on_untrained: drop){cut}; raise train.max_length or check the loss mask")
    encoded = encoded.select_columns(["input_ids", "labels"])
    stats["trained_tokens"] = int(trained.sum())
    if layout.packing:
        from trl import pack_dataset

        encoded = pack_dataset(encoded, layout.max_length, layout.packing, map_kwargs={"desc": "pack"})
        stats["packed_rows"] = len(encoded)
        capacity = len(encoded) * layout.max_length
        stats["fill"] = float(row_lengths(encoded).sum() / capacity) if capacity else 0.0
    return encoded, stats


def describe_split(stats: dict, max_length: int | None) -> str:
    """One split's `prepare_split` stats in words, for the line a run prints before it trains."""
    text = (f"{stats['rows']:,} rows, {stats['tokens']:,} tokens ({stats['trained_tokens']:,} trained), "
            f"{stats.get('truncated', 0):,} truncated, {stats['dropped_untrained']:,} dropped with no trained token")
    if stats.get("dropped_empty"):
        text += f", {stats['dropped_empty']:,} with an empty answer"
    if "packed_rows" in stats:
        text += f"; packed into {stats['packed_rows']:,} rows of {max_length:,} tokens, {stats['fill']:.1%} full"
    return text


def row_lengths(dataset):
    """Tokens per row, read from the Arrow offsets without materializing the rows."""
    import pyarrow.compute as pc

    return pc.list_value_length(dataset.data.table.column("input_ids")).to_numpy(zero_copy_only=False)


def trained_per_row(dataset):
    """How many labels are not -100 in each row, computed on the Arrow columns."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    labels = dataset.data.table.column("labels")
    if dataset._indices is not None:  # a selected view: materialize just this column in order
        labels = pa.chunked_array([pa.array(dataset["labels"], type=labels.type)])
    counts = np.zeros(len(dataset), dtype=np.int64)
    start = 0
    for chunk in labels.chunks:
        flat = pc.list_flatten(chunk).to_numpy(zero_copy_only=False)
        parents = pc.list_parent_indices(chunk).to_numpy(zero_copy_only=False)
        counts[start:start + len(chunk)] = np.bincount(parents[flat != -100], minlength=len(chunk))
        start += len(chunk)
    return counts


def fail_on_problems(encoded, on_untrained: str = "fail"):
    """Row problems (end of turn untrained, wrong think mode, an empty answer) stop the run, naming the first row;
    with `data.on_untrained: drop`, rows with an empty answer are dropped instead. Returns (rows, how many dropped)."""
    import numpy as np

    problems = encoded[PROBLEM]
    empty = np.asarray([p.endswith(EMPTY_ANSWER) for p in problems], dtype=bool)
    bad = [i for i, p in enumerate(problems) if p and p != UNTRAINED and not (on_untrained == "drop" and empty[i])]
    if bad:
        first = bad[0]
        hint = "; set data.on_untrained: drop to skip such rows (each whole)" if empty[first] else ""
        raise SmolalignError(f"data row {encoded[first][ORIGIN]}: {problems[first]} ({len(bad)} row(s) "
                             f"affected){hint}")
    if not empty.any():
        return encoded, 0
    print(f"dropped {int(empty.sum())} row(s) with an empty answer", file=sys.stderr)
    # flattened: the counts after this read the Arrow table itself, which a selection leaves whole
    return encoded.select(np.flatnonzero(~empty)).flatten_indices(), int(empty.sum())


def truncate(encoded, max_length: int, mode: str):
    window = slice(None, max_length) if mode == "keep_start" else slice(-max_length, None)
    return encoded.map(lambda row: {"input_ids": row["input_ids"][window], "labels": row["labels"][window]},
                       keep_in_memory=True)


def drop_untrained(encoded, trained, on_untrained: str):
    """Rows with nothing trained: fail naming the first (default) or drop them and report how many."""
    import numpy as np

    untrained = np.flatnonzero(trained == 0)
    if not len(untrained):
        return encoded, 0
    if on_untrained == "fail":
        first = encoded[int(untrained[0])][ORIGIN]
        raise SmolalignError(
            f"data row {first}: {UNTRAINED} ({len(untrained)} row(s) in all; set data.on_untrained: drop to skip them)")
    print(f"dropped {len(untrained)} row(s) in which no token is trained", file=sys.stderr)
    return encoded.select(np.flatnonzero(trained > 0)), len(untrained)


def _save(directory: Path, train, held_out, stats: dict) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=".prepare-"))
    train.save_to_disk(str(staging / "train"))
    if held_out is not None:
        held_out.save_to_disk(str(staging / "eval"))
    (staging / "stats.json").write_text(json.dumps(stats, indent=2))
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(staging, directory)
