"""SIGUSR1 during training (what a Slurm job forwards before its time limit) saves a checkpoint at the next step end
and stops the run with exit code 75, well before max_steps and with no scheduled save due; `--resume` then finishes
the run from that checkpoint. With the save-on-signal callback switched off (its on_step_end made a no-op, or the
callback not added in stages/lifecycle.py) the run trains to max_steps and exits 0, so this test fails."""

import contextlib
import json
import os
import signal
import threading
import time

from tiny_models import chat_rows, write_jsonl

from smolalign.runs.metrics import read_metrics
from smolalign.runs.save_on_signal import SAVED_ON_SIGNAL_EXIT

MAX_STEPS = 40


def _signal_at_step(run_dir, step: int, done: threading.Event) -> None:
    """SIGUSR1 to this process once the run has logged `step` (as srun forwards it to every process of a step)."""
    while not done.is_set():
        if any(m.get("step", 0) >= step for m in read_metrics(run_dir) if "loss" in m):
            os.kill(os.getpid(), signal.SIGUSR1)
            return
        time.sleep(0.01)


@contextlib.contextmanager
def signalled_while_set_up(stage_module, monkeypatch):
    """SIGUSR1 sent to this process just before the stage writes its run directory (its `start_run`: the data
    prepared, the model loaded); yields the list of signals a handler of this test took, which stands in for the
    signal's default action (that would end the test process) and must stay empty."""
    lost = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: lost.append(signum))
    start_run = stage_module.start_run

    def signalled_then_start(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGUSR1)
        return start_run(*args, **kwargs)

    monkeypatch.setattr(stage_module, "start_run", signalled_then_start)
    try:
        yield lost
    finally:
        signal.signal(signal.SIGUSR1, previous)
        monkeypatch.setattr(stage_module, "start_run", start_run)


def test_sigusr1_saves_at_the_next_step_and_stops(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"stage": "sft", "model": {"source": str(tiny_dir)},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": MAX_STEPS,
                                     "logging_steps": 1, "save_steps": 1000, "gradient_checkpointing": False}})
    run_dir = tmp_path / "run"
    done = threading.Event()
    sender = threading.Thread(target=_signal_at_step, args=(run_dir, 2, done), daemon=True)
    sender.start()
    try:
        code, out, err = cli("sft", recipe, "-o", run_dir)
    finally:
        done.set()
    assert code == SAVED_ON_SIGNAL_EXIT, err
    [checkpoint] = run_dir.glob("checkpoint-*")
    saved_at = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
    assert checkpoint.name == f"checkpoint-{saved_at}" and 2 <= saved_at < MAX_STEPS
    assert max(m["step"] for m in read_metrics(run_dir) if "loss" in m) == saved_at  # no step after the save
    assert not (run_dir / "model").exists()  # stopped early: no final model, no result

    code, out, err = cli("sft", recipe, "-o", run_dir, "--resume")
    assert code == 0, err
    result = json.loads((run_dir / "manifest.json").read_text())["result"]
    assert result["global_step"] == MAX_STEPS and result["resumed_from"] == str(checkpoint)


def test_a_signal_before_training_starts_is_kept_for_the_first_step(cli, write_recipe, tiny_dir, tmp_path,
                                                                    monkeypatch):
    """SIGUSR1 while the run is still being set up (here: just before the run directory is written, the data
    prepared and the model loaded) is kept: the run saves at its first step end and exits 75. A handler of this test
    stands in for the signal's default action (which would end the test process): without the stage-wide handler
    (listening() around run_stage made a no-op) it takes the signal, and the run trains to max_steps."""
    import smolalign.stages.sft as sft

    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    recipe = write_recipe({"stage": "sft", "model": {"source": str(tiny_dir)},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 6,
                                     "logging_steps": 1, "save_steps": 1000, "gradient_checkpointing": False}})
    with signalled_while_set_up(sft, monkeypatch) as lost:
        code, out, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert lost == [] and code == SAVED_ON_SIGNAL_EXIT, err
    assert [p.name for p in (tmp_path / "run").glob("checkpoint-*")] == ["checkpoint-1"]


def test_grpo_reusing_its_samples_saves_at_the_end_of_a_generation_cycle(cli, write_recipe, tiny_dir, tmp_path,
                                                                         monkeypatch):
    """GRPO with steps_per_generation 2 trains two steps on one generation, which TRL keeps in memory only: a signal
    kept from the start saves at step 2 (not 1), and the resumed run ends on the uninterrupted run's weights. Saved at
    step 1, the resumed run would generate afresh at step 2 and train on other samples."""
    from resume_checks import REWARDS_FILE, largest_difference, weights

    import smolalign.stages.rl as rl

    rewards = tmp_path / "rewards.py"
    rewards.write_text(REWARDS_FILE)
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(32)])
    recipe = write_recipe({"model": {"source": str(tiny_dir), "dtype": "float32"}, "template": {"name": "chatml"},
                           "method": "grpo", "data": {"sources": [{"path": str(prompts)}]},
                           "rewards": [{"name": f"{rewards}:spread"}],
                           "train": {"num_generations": 4, "per_device_train_batch_size": 4, "steps_per_generation": 2,
                                     "max_completion_length": 8, "learning_rate": 1e-2, "max_steps": 4,
                                     "save_steps": 1000, "logging_steps": 1, "gradient_checkpointing": False,
                                     "seed": 0}})
    code, _, err = cli("rl", recipe, "-o", tmp_path / "full")
    assert code == 0, err

    with signalled_while_set_up(rl, monkeypatch) as lost:
        code, _, err = cli("rl", recipe, "-o", tmp_path / "cut")
    assert lost == [] and code == SAVED_ON_SIGNAL_EXIT, err
    assert [p.name for p in (tmp_path / "cut").glob("checkpoint-*")] == ["checkpoint-2"]
    code, _, err = cli("rl", recipe, "-o", tmp_path / "cut", "--resume")
    assert code == 0, err
    assert largest_difference(weights(tmp_path / "cut" / "model"), weights(tmp_path / "full" / "model")) == 0
