"""metrics.jsonl in the run directory: every value the trainer logs, one JSON object per logging step."""

import json
from pathlib import Path

METRICS_FILE = "metrics.jsonl"


def metrics_callback(run_dir: Path):
    from transformers import TrainerCallback

    class MetricsFile(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                with open(run_dir / METRICS_FILE, "a") as stream:
                    stream.write(json.dumps({"step": state.global_step, **logs}) + "\n")

    return MetricsFile()


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / METRICS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def summary(run_dir: Path, key: str = "loss", companions: tuple[str, ...] = ()) -> str:
    """"loss 2.31 (step 2) -> 0.42 (step 16)": the first and last logged value of `key`, followed by those of the
    first of `companions` the last entry has ("; rewards/margins 0.18 -> 5.3")."""
    logged = [m for m in read_metrics(run_dir) if m.get(key) is not None]  # None: TRL logged NaN (no reward scored)
    if not logged:
        return f"{key}: nothing logged (train.logging_steps is larger than the run, or every value was NaN)"
    first, last = logged[0], logged[-1]
    text = f"{key} {first[key]:.4g} (step {first['step']}) -> {last[key]:.4g} (step {last['step']})"
    companion = next((k for k in companions if last.get(k) is not None), None)
    if companion:
        start = first.get(companion)
        text += f"; {companion} {float('nan') if start is None else start:.4g} -> {last[companion]:.4g}"
    return text
