"""metrics.jsonl in the run directory: every value the trainer logs, one JSON object per logging step."""

import json
from pathlib import Path


def metrics_callback(run_dir: Path):
    from transformers import TrainerCallback

    class MetricsFile(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                with open(run_dir / "metrics.jsonl", "a") as stream:
                    stream.write(json.dumps({"step": state.global_step, **logs}) + "\n")

    return MetricsFile()


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
