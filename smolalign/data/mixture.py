"""Mixing sources by weight (0.5 keeps a random half, 2.0 repeats a source twice), then the held-out split.

Every row keeps an `_origin` ("file#row") so a bad example is reported by where it came from.
"""

import json
import math
from dataclasses import dataclass

from smolalign.data.formats import (
    EXTRA_COLUMNS,
    add_system_prompt,
    canonical_columns,
    detect_format,
    sharegpt_to_messages,
)
from smolalign.data.rows import messages_problem, missing_problem
from smolalign.errors import SmolalignError
from smolalign.inputs.data_sources import load_source
from smolalign.recipe.data_schema import DataSection, SourceSection

ORIGIN = "_origin"
JSON_PREFIX = "\x00json\x00"
"""Marks a value stored as JSON text because its schema differed between sources."""
PROMPT_FORMAT = "prompt"
"""Prompt rows (rl, distillation, pairs, eval): a `prompt` column, or `messages` whose trailing assistant turns
are dropped; every other column is kept for the rewards."""


@dataclass
class Mixture:
    train: object
    """datasets.Dataset"""
    eval: object | None
    format: str
    rows_per_source: dict[str, tuple[int, int]]
    """source path -> (rows in the source, rows taken into the mixture)."""


def weighted_rows(n: int, weight: float, seed: int) -> list[int]:
    """Row indices for a source of `n` rows at `weight`: whole repeats, then a seeded random sample of the rest."""
    import numpy as np

    repeats, fraction = int(math.floor(weight)), weight - math.floor(weight)
    indices = list(range(n)) * repeats
    extra = round(n * fraction)
    if extra:
        rng = np.random.default_rng(seed)
        indices += sorted(rng.choice(n, size=extra, replace=False).tolist())
    return indices


def decoded(value):
    """A value stored as JSON text to align sources (see `JSON_PREFIX`), decoded back; others as they are."""
    if isinstance(value, str) and value.startswith(JSON_PREFIX):
        return json.loads(value[len(JSON_PREFIX):])
    return value


def _prepare_source(source: SourceSection, requested_format: str, index: int, seed: int, system_prompt=None):
    dataset = load_source(source)
    if len(dataset) == 0:
        raise SmolalignError(f"data source {source.path} is empty")
    if requested_format == PROMPT_FORMAT:
        fmt = PROMPT_FORMAT
        dataset = _as_prompt_rows(dataset, source.path)
    else:
        fmt = detect_format(dataset.column_names, requested_format, source.path)
    if fmt == "messages" and "messages" not in dataset.column_names:
        dataset = dataset.map(lambda row, i: {"messages": sharegpt_to_messages(row["conversations"],
                                                                                f"{source.path}#{i}")},
                              with_indices=True, remove_columns=["conversations"])
    if fmt != PROMPT_FORMAT:
        dataset = dataset.select_columns(canonical_columns(fmt, dataset.column_names))
    if system_prompt is not None:
        dataset = add_system_prompt(dataset, fmt, system_prompt, source.path)
    n = len(dataset)
    dataset = dataset.add_column(ORIGIN, [f"{source.path}#{i}" for i in range(n)])
    rows = weighted_rows(n, source.weight, seed + index)
    if rows != list(range(n)):
        dataset = dataset.select(rows)
    return dataset, fmt, n


def _as_prompt_rows(dataset, where: str):
    """A source of prompts: a row's `messages` (where it has no `prompt`) becomes its `prompt`, without the trailing
    assistant turns."""
    columns = dataset.column_names
    if "messages" not in columns:
        if "prompt" not in columns:
            raise SmolalignError(f"data source {where} has no prompt column (columns: {', '.join(columns)}; rename "
                                 "yours with columns: {yours: prompt})")
        return dataset

    def to_prompt(row, index):
        prompt = row.get("prompt")
        if prompt is not None:  # one column holds both kinds of row, so a string prompt becomes a user message
            return {"prompt": [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt}
        messages = row["messages"]
        problem = messages_problem(messages) if messages is not None else missing_problem(row, "messages")
        if problem:
            raise SmolalignError(f"prompt row {where}#{index}: {problem}")
        messages = list(messages)
        while messages and messages[-1].get("role") == "assistant":
            messages.pop()
        return {"prompt": messages}

    return dataset.map(to_prompt, with_indices=True, remove_columns=[c for c in ("prompt", "messages") if c in columns])


def _as_json_strings(dataset, columns: list[str]):
    """Nested columns whose schemas differ between sources become JSON strings, so sources concatenate."""
    from datasets import Value

    def is_string(feature) -> bool:
        return isinstance(feature, Value) and feature.dtype in ("string", "large_string")

    todo = [c for c in columns if c in dataset.column_names and not is_string(dataset.features[c])]
    if not todo:
        return dataset
    return dataset.map(lambda row: {c: JSON_PREFIX + json.dumps(row[c]) for c in todo})


def _with_json_extras(dataset, extras: list[str]):
    """Optional per-row columns as JSON text (null where a source lacks them), so sources line up."""
    dataset = _as_json_strings(dataset, [c for c in extras if c in dataset.column_names])
    for column in extras:
        if column not in dataset.column_names:
            dataset = dataset.add_column(column, [JSON_PREFIX + "null"] * len(dataset))
    return dataset


def build_mixture(data: DataSection, requested_format: str | None = None) -> Mixture:
    """Load, weight and concatenate every source, then split off the held-out rows; `requested_format` (e.g.
    PROMPT_FORMAT) overrides `data.format`."""
    import datasets

    parts, formats, counts = [], {}, {}
    for index, source in enumerate(data.sources):
        dataset, fmt, n = _prepare_source(source, requested_format or data.format, index, data.seed,
                                          data.system_prompt)
        parts.append(dataset)
        formats[source.path] = fmt
        counts[source.path] = (n, len(dataset))
    if len(set(formats.values())) > 1:
        listing = ", ".join(f"{path} is {fmt}" for path, fmt in formats.items())
        raise SmolalignError(f"data sources mix formats ({listing}); one recipe trains on one format")
    if len(parts) == 1:
        mixed = parts[0]
    else:
        optional = set(EXTRA_COLUMNS) if requested_format != PROMPT_FORMAT else {c for p in parts for c in p.column_names}
        extras = sorted({c for p in parts for c in p.column_names if c in optional} - {ORIGIN})
        if any(set(p.column_names) != set(parts[0].column_names) for p in parts):
            parts = [_with_json_extras(p, extras) for p in parts]
        parts = [p.select_columns(sorted(p.column_names)) for p in parts]
        try:
            mixed = datasets.concatenate_datasets(parts)
        except ValueError:
            columns = sorted(parts[0].column_names)
            mixed = datasets.concatenate_datasets([_as_json_strings(p, columns) for p in parts])
    train, held_out = mixed, None
    if data.eval_split:
        size = int(data.eval_split) if data.eval_split >= 1 else data.eval_split
        if isinstance(size, int) and size >= len(mixed):
            raise SmolalignError(f"data.eval_split {data.eval_split} leaves no training rows (the mixture has {len(mixed)})")
        split = mixed.train_test_split(test_size=size, seed=data.seed)
        train, held_out = split["train"], split["test"]
    return Mixture(train, held_out, formats[data.sources[0].path], counts)
