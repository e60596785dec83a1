"""metrics.jsonl in the run directory: every value the trainer logs, one JSON object per logging step, appended
(a run killed mid-line leaves a torn line, which readers skip and the resumed run starts a new line after). Each
entry carries `time`, the Unix time it was logged at, so step times and steady-state throughput can be read back
without the first steps' compilation in them."""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from smolalign.jsonl import read_jsonl
from smolalign.library_patch import replaced
from smolalign.runs.rundir import checkpoint_step

METRICS_FILE = "metrics.jsonl"
LOGGED_AT = "time"
"""The key of the Unix time each entry was logged at."""


def metrics_callback(run_dir: Path):
    from transformers import TrainerCallback

    class MetricsFile(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                with open(run_dir / METRICS_FILE, "a+b") as stream:
                    if stream.seek(0, 2):
                        stream.seek(-1, 2)
                        if stream.read(1) != b"\n":
                            stream.write(b"\n")  # a line torn by a killed run: the new ones start on their own
                    entry = {"step": state.global_step, **logs, LOGGED_AT: round(time.time(), 3)}
                    stream.write((json.dumps(entry) + "\n").encode())

    return MetricsFile()


def read_metrics(run_dir: Path) -> list[dict]:
    """The logged entries; a line cut off by a killed run (the only way one is not JSON) is left out."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return []
    return [entry for _, entry in read_jsonl(path, skip_bad_lines=True) if "step" in entry]


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


@contextmanager
def loss_of_every_rank(trainer) -> Iterator[None]:
    """While it is open, the trainer's final mean loss counts every process: transformers gathers the loss from all
    ranks when it logs, and adds the steps after the last logging step from this process alone (a 2-process run's
    train_loss 5.5499 with logging_steps 3 against 5.6422 with 1). The tail is gathered as logging gathers it."""

    def with_every_rank(finalize):
        def finalize_training(*args, **kwargs):
            from transformers.trainer_pt_utils import nested_gather

            trainer._tr_loss = nested_gather(trainer._tr_loss, trainer.args.parallel_mode).mean()
            return finalize(*args, **kwargs)

        return finalize_training

    with replaced(trainer, "_finalize_training", with_every_rank):
        yield


def whole_run_loss(reported: float, state, checkpoint: Path | None) -> float:
    """The mean training loss over all of a run's steps (`state`: the trainer's, `checkpoint`: the one it resumed
    from). transformers' Trainer divides the loss summed over the steps of this process by the run's whole step
    count, so a resumed run reports too little; the steps before the checkpoint are added back from their logged
    losses (each the mean of its logging window), or, when none was logged, the mean is the resumed steps' own."""
    global_step, resumed_at, log_history = state.global_step, checkpoint_step(checkpoint), state.log_history
    if not resumed_at or global_step <= resumed_at:
        return reported
    after = reported * global_step  # the resumed steps' summed loss
    logged, last = [], 0
    for entry in sorted((e for e in log_history if "loss" in e and "step" in e), key=lambda e: e["step"]):
        if entry["step"] > resumed_at:
            break
        logged.append((entry["loss"], entry["step"] - last))
        last = entry["step"]
    if not logged:
        return after / (global_step - resumed_at)
    before = sum(loss * window for loss, window in logged) / sum(window for _, window in logged) * resumed_at
    return (before + after) / global_step

