"""curves.png: the training curves of one run, or of several overlaid, drawn from their metrics.jsonl.

Every numeric metric the trainer logged gets a panel. Related metrics share one: a training metric and its `eval_`
twin, DPO's chosen/rejected/margin rewards, GRPO's reward per reward function and its completion lengths. Several
runs share the panels, one colour per run. matplotlib is optional (the `plot` extra): without it a run still ends,
and says how to get the chart.
"""

import math
import re
import sys
from pathlib import Path

from smolalign.atomic import FIGURE_FORMATS, check_writable, save_figure
from smolalign.errors import SmolalignError
from smolalign.runs.metrics import LOGGED_AT, METRICS_FILE, read_metrics

CURVES_FILE = "curves.png"
INSTALL_PLOT = "pip install 'smolalign[plot]'"

NOT_CURVES = re.compile(
    rf"^(step|{LOGGED_AT}|epoch|total_flos|train_loss|(train|eval)_(runtime|samples_per_second|steps_per_second))$")
"""Bookkeeping the trainer logs once at the end, or the x axis itself."""

GROUPS = (
    ("loss", re.compile(r"^loss$")),
    ("learning rate", re.compile(r"^learning_rate$")),
    ("grad norm", re.compile(r"^grad_norm$")),
    ("reward", re.compile(r"^reward$")),
    ("reward per function (mean)", re.compile(r"^rewards/.+/mean$")),
    ("reward per function (std)", re.compile(r"^rewards/.+/std$")),
    ("rewards: chosen, rejected, margin", re.compile(r"^rewards/(chosen|rejected|margins)$")),
    ("log-probs", re.compile(r"^logps/(chosen|rejected)$")),
    ("logits", re.compile(r"^logits/(chosen|rejected)$")),
    ("completion length (tokens)", re.compile(r"^completions/.*length$")),
    ("clip ratio", re.compile(r"^clip_ratio/")),
)
"""Panels that hold several metrics, in the order they are drawn; every other metric gets a panel of its own, after
these. An `eval_` metric joins the panel of the metric it evaluates."""


def series(metrics: list[dict]) -> dict[str, tuple[list[int], list[float]]]:
    """{metric: (steps, values)} for every numeric metric. A step logged twice (a resumed run that had logged past
    its last checkpoint before it stopped) keeps its later value: the one the resumed run trained with."""
    by_key: dict[str, dict[int, float]] = {}
    for entry in metrics:
        step = entry.get("step")
        for key, value in entry.items():
            if NOT_CURVES.match(key) or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):
                by_key.setdefault(key, {})[step] = float(value)
    return {key: (sorted(points), [points[s] for s in sorted(points)]) for key, points in by_key.items()}


def panel_of(key: str) -> tuple[int, str]:
    """(order, title) of the panel that draws `key`."""
    base = key.removeprefix("eval_")
    for order, (title, pattern) in enumerate(GROUPS):
        if pattern.match(base):
            return order, title
    return len(GROUPS), base


def figure(runs: list[tuple[str, list[dict]]]):
    """The figure of `runs` ((label, metrics.jsonl entries) each): one axes per panel, one line per (run, metric),
    labelled "metric" for one run and "run: metric" for several. Panels are in `GROUPS` order, then by name. One
    run: a colour per metric; several: a colour per run and a line style per metric."""
    from matplotlib.figure import Figure  # no pyplot: no global state or GUI backend, safe in any thread

    panels: dict[tuple[int, str], list[tuple[str, str, tuple]]] = {}
    for label, metrics in runs:
        for key, points in series(metrics).items():
            panels.setdefault(panel_of(key), []).append((label, key, points))
    if not panels:
        raise SmolalignError("no numeric metric logged yet (is train.logging_steps larger than the run?)")
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(5 * columns, 3.2 * rows), layout="constrained")
    colours = {label: f"C{i % 10}" for i, (label, _) in enumerate(runs)}
    for index, ((_, title), lines) in enumerate(sorted(panels.items())):
        axes = fig.add_subplot(rows, columns, index + 1)
        keys = list(dict.fromkeys(key for _, key, _ in lines))
        for label, key, (steps, values) in lines:
            order = keys.index(key)
            if len(runs) == 1:
                style, colour, name = "-", f"C{order % 10}", key
            else:
                style, colour, name = ("-", "--", ":", "-.")[order % 4], colours[label], f"{label}: {key}"
            axes.plot(steps, values, style, color=colour, label=name, marker="." if len(steps) < 30 else None)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("step", fontsize=8)
        axes.tick_params(labelsize=8)
        if len(lines) > 1:
            axes.legend(fontsize=7)
    return fig


def plot_runs(run_dirs: list[Path], output: Path) -> Path:
    """Overlay the curves of `run_dirs` into the PNG `output`. SmolalignError for a folder without metrics or
    without matplotlib, before anything is written."""
    for run_dir in run_dirs:
        if not (Path(run_dir) / METRICS_FILE).is_file():
            raise SmolalignError(f"{run_dir}: no {METRICS_FILE} (not a run directory, or its run logged nothing yet)")
    check_writable(output, "-o", FIGURE_FORMATS)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SmolalignError(f"plotting needs matplotlib ({INSTALL_PLOT})") from None
    labels = run_labels(run_dirs)
    fig = figure([(label, read_metrics(run_dir)) for label, run_dir in zip(labels, run_dirs, strict=True)])

    save_figure(fig, Path(output))
    return Path(output)


def run_labels(run_dirs: list[Path]) -> list[str]:
    """The shortest path tails that tell the runs apart: `sft` and `po`, or `a/sft` and `b/sft`."""
    parts = [Path(d).resolve().parts for d in run_dirs]
    for length in range(1, max(map(len, parts)) + 1):
        labels = ["/".join(p[-length:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(d) for d in run_dirs]  # the same folder twice


def write_run_curves(run_dir: Path) -> Path | None:
    """At the end of a run: its curves.png, or a note saying how to get it (no matplotlib, nothing logged)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"note: no {CURVES_FILE}: matplotlib is not installed; {INSTALL_PLOT}, then `smolalign plot {run_dir}`",
              file=sys.stderr)
        return None
    try:
        return plot_runs([run_dir], Path(run_dir) / CURVES_FILE)
    except SmolalignError as exc:
        print(f"note: no {CURVES_FILE}: {exc}", file=sys.stderr)
        return None
