"""The sweep's comparison, from the cells' own evaluations: every metric of every cell with its bootstrap interval
and its paired difference to the first cell (the baseline), as sweep.md, sweep.png and sweep.json.

Each cell's eval.samples.jsonl holds its per-sample scores; they are put back into the arrays the evaluation scored,
and the evaluation's own report (smolalign.evaluation.report) does the statistics, so a sweep's intervals and
differences are exactly those of `smolalign eval` with the cells as models and the first one as `--baseline`.
"""

import json
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.evaluation.generate import ModeSamples
from smolalign.evaluation.inputs import EvalInputs, EvalModel, prepare
from smolalign.evaluation.report import build_report, render_markdown, render_text, write_chart
from smolalign.jsonl import read_jsonl
from smolalign.runs.rundir import MODEL_DIR
from smolalign.sweep.cells import SAMPLES_FILE, CellRun

SWEEP_JSON = "sweep.json"
SWEEP_MARKDOWN = "sweep.md"
SWEEP_CHART = "sweep.png"
_EVALUATED = "after"
"""The label of a stage's output model in its eval.samples.jsonl."""


def compare(runs: list[CellRun], sweep_dir: Path, grid: list[tuple[str, list[str]]], seeds: int | None) -> dict:
    """Write sweep.json, sweep.md and (with matplotlib) sweep.png; returns sweep.json's content."""
    inputs = cell_inputs(runs)
    results = {run.cell.name: read_samples(run, inputs) for run in runs}
    report = build_report(inputs, results)
    sweep = {"recipe": runs[0].resolved.recipe.source, "grid": dict(grid), "seeds": seeds, "baseline": runs[0].cell.name,
             "cells": [{"name": run.cell.name, "overrides": list(run.cell.overrides), "run_dir": str(run.run_dir)}
                       for run in runs],
             "rows": rows(report, runs), "report": report}
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SWEEP_JSON).write_text(json.dumps(sweep, indent=2, ensure_ascii=False) + "\n")
    (sweep_dir / SWEEP_MARKDOWN).write_text(render_markdown(report))
    print(render_text(report))
    written = [sweep_dir / SWEEP_JSON, sweep_dir / SWEEP_MARKDOWN]
    try:
        write_chart(report, sweep_dir / SWEEP_CHART)
        written.append(sweep_dir / SWEEP_CHART)
    except SmolalignError as exc:  # matplotlib is optional: the tables and sweep.json are the result
        print(f"note: no {SWEEP_CHART}: {exc}")
    print("wrote " + ", ".join(str(path) for path in written))
    return sweep


def cell_inputs(runs: list[CellRun]) -> EvalInputs:
    """The evaluation the cells ran (their shared `eval:` section), with the cells as its models."""
    recipe = runs[0].resolved.recipe
    section = recipe.evaluation
    models = [EvalModel(run.cell.name, str(run.run_dir / MODEL_DIR)) for run in runs]
    return prepare(section, runs[0].resolved.rewards.evaluation, models, models[0].label,
                   section.template or recipe.template.name, recipe.template.kwargs)


def read_samples(run: CellRun, inputs: EvalInputs) -> dict[str, ModeSamples]:
    """One cell's scored samples per mode, as (prompts, K) arrays in the evaluation's prompt order."""
    import numpy as np

    path = run.run_dir / SAMPLES_FILE
    found: dict[str, dict[tuple[str, int], dict]] = {mode: {} for mode in inputs.section.modes}
    for _, row in read_jsonl(path):
        if row["model"] == _EVALUATED and row["mode"] in found:
            found[row["mode"]][row["prompt"], row["sample"]] = row
    k = inputs.section.samples
    names = [reward.name for reward, _ in inputs.rewards]
    out = {}
    for mode, rows_ in found.items():
        try:
            grid = [[rows_[prompt.origin, j] for j in range(k)] for prompt in inputs.prompts]
        except KeyError as exc:
            raise SmolalignError(f"{path}: no {mode} sample for prompt {exc.args[0][0]} of the recipe's eval: data; "
                                 "the cell was evaluated on other prompts (run the sweep with --overwrite)") from None

        def array(pick, grid=grid):
            return np.array([[pick(row) for row in group] for group in grid], dtype=float)

        rewards = {name: array(lambda row, name=name: np.nan if row["rewards"].get(name) is None
                               else row["rewards"][name]) for name in names}
        arrays = {"rewards": rewards, "compliant": array(lambda row: row["compliant"]),
                  "finished": array(lambda row: row["finished"]), "tokens": array(lambda row: row["tokens"])}
        out[mode] = ModeSamples([[row["turn"] for row in group] for group in grid], arrays)
    return out


def rows(report: dict, runs: list[CellRun]) -> list[dict]:
    """One row per cell: its overrides, and per mode every metric (value, low, high) and its difference to the
    baseline (none for the baseline itself)."""
    out = []
    for run in runs:
        label = run.cell.name
        row = {"cell": label, "overrides": dict(o.split("=", 1) for o in run.cell.overrides),
               "metrics": report["results"][label]}
        row["difference"] = report["differences"].get(label)
        out.append(row)
    return out
