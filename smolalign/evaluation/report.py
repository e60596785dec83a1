"""The evaluation's outputs: eval.json (settings, every metric with its interval, differences to the baseline), the
samples as JSONL, the tables (text for the terminal, Markdown for a README) and a PNG chart of the main metrics."""

import dataclasses
import json
from pathlib import Path

from smolalign.atomic import save_figure, write_atomically
from smolalign.errors import SmolalignError
from smolalign.evaluation.generate import ModeSamples
from smolalign.evaluation.inputs import EvalInputs
from smolalign.evaluation.metrics import CONFIDENCE, RESAMPLES, estimate, per_prompt, resample_indices


def build_report(inputs: EvalInputs, results: dict[str, dict[str, ModeSamples]]) -> dict:
    """eval.json's content: per model and mode every metric with its interval; per model the paired difference to
    the baseline, or to the model `inputs.compared_to` names for it."""
    section = inputs.section
    k = section.samples
    thresholds = {reward.name: reward.threshold for reward, _ in inputs.rewards}
    indices = resample_indices(len(inputs.prompts), section.seed)
    values = {label: {mode: per_prompt(samples.arrays, thresholds, k) for mode, samples in modes.items()}
              for label, modes in results.items()}
    first = next(iter(values.values()))[section.modes[0]]
    report = {
        "settings": {**dataclasses.asdict(section), "template": inputs.template_name,
                     "template_kwargs": inputs.template_kwargs},
        "prompts": len(inputs.prompts), "samples": k, "confidence": CONFIDENCE, "resamples": RESAMPLES,
        "models": [{"label": m.label, "source": m.source} for m in inputs.models],
        "baseline": inputs.baseline, "modes": list(section.modes), "metrics": list(first),
        "results": {label: {mode: {name: estimate(v, indices).as_dict() for name, v in metrics.items()}
                            for mode, metrics in modes.items()} for label, modes in values.items()},
        "differences": {},
    }
    # Every model is compared with the baseline unless --compare names another model for it.
    compared_to = {**({label: inputs.baseline for label in values if label != inputs.baseline}
                      if inputs.baseline is not None else {}), **inputs.compared_to}
    report["compared_to"] = compared_to
    report["differences"] = {
        label: {mode: {name: estimate(v - values[base][mode][name], indices).as_dict() for name, v in metrics.items()}
                for mode, metrics in values[label].items()}
        for label, base in compared_to.items()}
    return report


def sample_rows(inputs: EvalInputs, results: dict[str, dict[str, ModeSamples]]):
    """One JSON object per sample: model, mode, prompt origin, sample index, whole turn and its scores."""
    for label, modes in results.items():
        for mode, samples in modes.items():
            arrays = samples.arrays
            for i, prompt in enumerate(inputs.prompts):
                for j, turn in enumerate(samples.turns[i]):
                    rewards = {name: None if v[i, j] != v[i, j] else float(v[i, j])
                               for name, v in arrays["rewards"].items()}
                    yield {"model": label, "mode": mode, "prompt": prompt.origin, "sample": j, "turn": turn,
                           "finished": bool(arrays["finished"][i, j]), "tokens": int(arrays["tokens"][i, j]),
                           "compliant": bool(arrays["compliant"][i, j]), "rewards": rewards}


def write_outputs(report: dict, rows, json_path: Path) -> Path:
    """eval.json at `json_path` and the samples beside it (NAME.samples.jsonl); returns the samples' path."""
    write_atomically(json_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    samples_path = json_path.with_name(json_path.stem + ".samples.jsonl")
    write_atomically(samples_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return samples_path


def _number(name: str, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    digits = 1 if name == "length" else 2
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _cell(name: str, estimate_: dict, signed: bool = False) -> str:
    if estimate_["value"] is None:
        return "n/a"
    return (f"{_number(name, estimate_['value'], signed)} "
            f"[{_number(name, estimate_['low'], signed)}, {_number(name, estimate_['high'], signed)}]")


def table_rows(report: dict, mode: str) -> list[tuple[str, list[list[str]]]]:
    """(title, rows) of the values table and, with a baseline, the differences table of one mode."""
    labels = [m["label"] for m in report["models"]]
    values = [["metric", *labels]]
    for name in report["metrics"]:
        values.append([name, *[_cell(name, report["results"][label][mode][name]) for label in labels]])
    percent = int(report["confidence"] * 100)
    title = (f"{mode}: {report['prompts']} prompts × {report['samples']} sample(s); mean [{percent}% bootstrap "
             "interval over prompts]")
    tables = [(title, values)]
    if report["differences"]:
        others = [label for label in labels if label in report["differences"]]
        compared_to = report.get("compared_to") or dict.fromkeys(others, report["baseline"])
        differences = [["metric", *[f"{label} − {compared_to[label]}" for label in others]]]
        for name in report["metrics"]:
            differences.append([name, *[_cell(name, report["differences"][label][mode][name], signed=True)
                                        for label in others]])
        bases = sorted(set(compared_to.values()))
        to = f"difference to {bases[0]}" if len(bases) == 1 else "difference of each model to the one it is compared with"
        tables.append((f"{mode}: {to}, paired by prompt", differences))
    return tables


def render_text(report: dict) -> str:
    blocks = []
    for mode in report["modes"]:
        for title, rows in table_rows(report, mode):
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows]
            blocks.append("\n".join([title, *lines]))
    return "\n\n".join(blocks)


def render_markdown(report: dict) -> str:
    blocks = []
    for mode in report["modes"]:
        for title, rows in table_rows(report, mode):
            lines = [f"**{title}**", "", "| " + " | ".join(rows[0]) + " |",
                     "|" + "|".join(["---"] * len(rows[0])) + "|"]
            lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def chart_metrics(report: dict) -> list[str]:
    """The main metrics: each reward's avg@K, compliance and truncation (rates on one 0-1 axis)."""
    return [name for name in report["metrics"] if " avg@" in name] + ["compliance", "truncation"]


def write_chart(report: dict, path: Path) -> None:
    """Grouped bars (one group per metric, one bar per model) with their intervals, one panel per mode."""
    try:
        import matplotlib
    except ImportError:
        raise SmolalignError("--chart needs matplotlib (pip install 'smolalign[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics, labels, modes = chart_metrics(report), [m["label"] for m in report["models"]], report["modes"]
    figure, axes = plt.subplots(1, len(modes), figsize=(4.8 * len(modes), 3.4), sharey=True, squeeze=False)
    width = 0.8 / len(labels)
    for axis, mode in zip(axes[0], modes, strict=True):
        for m, label in enumerate(labels):
            found = [report["results"][label][mode][name] for name in metrics]
            heights = [e["value"] or 0.0 for e in found]
            errors = [[(e["value"] - e["low"]) if e["value"] is not None else 0 for e in found],
                      [(e["high"] - e["value"]) if e["value"] is not None else 0 for e in found]]
            positions = [i + (m - (len(labels) - 1) / 2) * width for i in range(len(metrics))]
            axis.bar(positions, heights, width, yerr=errors, capsize=2, label=label)
        axis.set_xticks(range(len(metrics)), [name.replace(" ", "\n") for name in metrics], fontsize=8)
        axis.set_ylim(0, 1.05)
        axis.set_title(f"{mode} ({report['prompts']} prompts × {report['samples']})", fontsize=9)
    axes[0][0].legend(fontsize=8, loc="upper left")
    figure.tight_layout()

    save_figure(figure, path)
    plt.close(figure)
