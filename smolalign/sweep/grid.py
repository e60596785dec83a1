"""The grid of a sweep: `--grid KEY=V1,V2` options (and `--seeds N`) as cells, each a list of `--set` overrides and
a run-directory name made of them (`method=dpo,train.learning_rate=1e-6,seed=0`). Stdlib only: `--help` and the
argument checks load nothing heavy."""

import itertools
import re
from dataclasses import dataclass

from smolalign.errors import SmolalignError
from smolalign.recipe.yamlio import parse_value, printable

SEED_KEY = "train.seed"
_UNSAFE = re.compile(r"[^\w.,=+-]")
"""Characters left out of a cell's directory name (a value's slashes, spaces, quotes)."""


@dataclass(frozen=True)
class Cell:
    index: int
    name: str
    """The run directory's name: its overrides, KEY=VALUE joined by commas (seed=S for --seeds)."""
    overrides: tuple[str, ...]
    """`--set` overrides, KEY=VALUE as written on the command line."""


def parse_grid(specs: list[str]) -> list[tuple[str, list[str]]]:
    """(key, value texts) per `--grid KEY=V1,V2`; every value must parse as a `--set` value does."""
    if not specs:
        raise SmolalignError("the grid is empty: give at least one --grid KEY=V1,V2 (e.g. --grid method=dpo,apo_zero)")
    axes: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, text = spec.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SmolalignError(f"--grid {spec!r}: expected KEY=V1,V2 (e.g. train.learning_rate=1e-6,5e-6)")
        values = [value.strip() for value in text.split(",")]
        if not text.strip():
            raise SmolalignError(f"--grid {key}: no values; list them after =, separated by commas")
        if any(not value for value in values):
            raise SmolalignError(f"--grid {key}: empty value in {text!r}; list values separated by commas")
        if key == "eval" or key.startswith("eval."):
            raise SmolalignError(f"--grid {key}: the eval: section is what the cells are compared with, so it must "
                                 "be the same in every cell; set it in the recipe (or with --set)")
        if key in (k for k, _ in axes):
            raise SmolalignError(f"--grid {key} is given twice; list all its values in one --grid")
        if len(set(values)) != len(values):
            raise SmolalignError(f"--grid {key}: a value is listed twice in {text!r}")
        for value in values:
            parse_value(value, f"--grid {printable(f'{key}={value}')}")
        axes.append((key, values))
    return axes


def expand(axes: list[tuple[str, list[str]]], seeds: int | None) -> list[Cell]:
    """The cartesian product of the axes (first axis slowest), times seeds 0..N-1 (train.seed) with --seeds N."""
    if seeds is not None and seeds < 1:
        raise SmolalignError(f"--seeds must be at least 1, got {seeds}")
    if seeds is not None and SEED_KEY in (key for key, _ in axes):
        raise SmolalignError(f"--grid {SEED_KEY} and --seeds both set the seed; keep one")
    keys = [key for key, _ in axes]
    cells = []
    for values in itertools.product(*(values for _, values in axes)):
        pairs = [(key, value) for key, value in zip(keys, values, strict=True)]
        for seed in range(seeds) if seeds is not None else [None]:
            overrides = [f"{key}={value}" for key, value in pairs]
            shown = list(overrides)
            if seed is not None:
                overrides.append(f"{SEED_KEY}={seed}")
                shown.append(f"seed={seed}")
            cells.append(Cell(len(cells), _UNSAFE.sub("_", ",".join(shown)), tuple(overrides)))
    return cells
