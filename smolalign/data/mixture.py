"""Mixing sources by weight (0.5 keeps a random half, 2.0 repeats a source twice), then the held-out split.

Every row keeps an `_origin` ("file#row", the source's label and the row's index) so a bad example is reported by
where it came from; two sources of one dataset (its splits) have labels of their own.
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
from smolalign.inputs.data_sources import load_source, row_labels, source_labels
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
    """source label (`source_labels`) -> (rows in the source, rows taken into the mixture)."""


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


def held_out_split(mixed, eval_split: float | int, seed: int):
    """(training rows, held-out rows): `eval_split` of the mixture's distinct rows (a share, or a count), each held
    out once. Every copy of a held-out row (a source weighted above 1 repeats its rows; two sources may read the same
    rows) leaves training, so no evaluated row was trained on."""
    origins = mixed[ORIGIN]
    first: dict[str, int] = {}
    for index, origin in enumerate(origins):
        first.setdefault(origin, index)
    distinct = mixed if len(first) == len(mixed) else mixed.select(list(first.values()))
    size = int(eval_split) if eval_split >= 1 else eval_split
    held = size if isinstance(size, int) else math.ceil(size * len(distinct))  # datasets rounds a share up
    if held >= len(distinct):
        raise SmolalignError(f"data.eval_split {eval_split} leaves no training rows (the mixture has {len(distinct)}"
                             f"{' distinct' if distinct is not mixed else ''})")
    split = distinct.train_test_split(test_size=size, seed=seed)
    if distinct is mixed:
        return split["train"], split["test"]
    held = set(split["test"][ORIGIN])
    return mixed.select([i for i, origin in enumerate(origins) if origin not in held]), split["test"]


def decoded(value):
    """A value stored as JSON text to align sources (see `JSON_PREFIX`), decoded back; others as they are."""
    if isinstance(value, str) and value.startswith(JSON_PREFIX):
        return json.loads(value[len(JSON_PREFIX):])
    return value


def _prepare_source(source: SourceSection, label: str, rows_named: str, requested_format: str, index: int, seed: int,
                    system_prompt=None):
    dataset = load_source(source)
    if len(dataset) == 0:
        raise SmolalignError(f"data source {label} is empty")
    if requested_format == PROMPT_FORMAT:
        fmt = PROMPT_FORMAT
        dataset = _as_prompt_rows(dataset, label)
    else:
        fmt = detect_format(dataset.column_names, requested_format, label)
    if fmt == "messages" and "messages" not in dataset.column_names:
        dataset = dataset.map(lambda row, i: {"messages": sharegpt_to_messages(row["conversations"], f"{label}#{i}")},
                              with_indices=True, remove_columns=["conversations"])
    if fmt != PROMPT_FORMAT:
        dataset = dataset.select_columns(canonical_columns(fmt, dataset.column_names))
    if system_prompt is not None:
        dataset = add_system_prompt(dataset, fmt, system_prompt, label)
    n = len(dataset)
    dataset = dataset.add_column(ORIGIN, [f"{rows_named}#{i}" for i in range(n)])  # see held_out_split
    rows = weighted_rows(n, source.weight, seed + index)
    if not rows:
        raise SmolalignError(f"data source {label}: weight {source.weight:g} of its {n} row(s) keeps none (it rounds "
                             f"to 0 rows); give it a weight of at least {1 / n:.3g} (one row), or take it out of the "
                             "recipe")
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
    # The new type is stated: datasets would keep a column's own type, and its Json type (rows holding `{}`) does not
    # concatenate with another source's strings.
    features = dataset.features.copy()
    features.update({c: Value("string") for c in todo})
    return dataset.map(lambda row: {c: JSON_PREFIX + json.dumps(row[c]) for c in todo}, features=features)


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
    labels = source_labels(data.sources)
    for index, (source, label, rows_named) in enumerate(zip(data.sources, labels, row_labels(data.sources),
                                                            strict=True)):
        dataset, fmt, n = _prepare_source(source, label, rows_named, requested_format or data.format, index,
                                          data.seed, data.system_prompt)
        parts.append(dataset)
        formats[label] = fmt
        counts[label] = (n, len(dataset))
    if len(set(formats.values())) > 1:
        listing = ", ".join(f"{label} is {fmt}" for label, fmt in formats.items())
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
    train, held_out = held_out_split(mixed, data.eval_split, data.seed) if data.eval_split else (mixed, None)
    return Mixture(train, held_out, formats[labels[0]], counts)
