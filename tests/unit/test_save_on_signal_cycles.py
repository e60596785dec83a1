"""The save on the time-limit signal for GRPO that trains several steps on one generation: it waits for the end of
the generation cycle, counted as TRL counts it, from the first step the process trains (a resume restarts TRL's
count), and saves at the run's last step whatever the cycle, so a run whose last cycle is short still stops and is
requeued. The generation cycle itself: optimizer steps between two generations, as TRL's _prepare_inputs makes them."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from smolalign.runs import save_on_signal
from smolalign.runs.save_on_signal import generation_cycle, save_on_signal_callback


@pytest.mark.parametrize("steps_per_generation, iterations, accumulation, cycle", [
    (None, None, 4, 1), (4, 1, 4, 1), (8, 1, 4, 2), (4, 3, 4, 3), (2, 1, 8, 1), (3, 1, 2, 3), (4, 2, 8, 1),
])
def test_the_cycle_in_optimizer_steps(steps_per_generation, iterations, accumulation, cycle):
    assert generation_cycle(steps_per_generation, iterations, accumulation) == cycle


def saves_at(checkpoint: str | None, max_steps: int, steps: range) -> list[int]:
    args = SimpleNamespace(steps_per_generation=2, num_iterations=1, gradient_accumulation_steps=1,
                           max_steps=max_steps, device="cpu", process_index=0)
    callback = save_on_signal_callback(args, Path(checkpoint) if checkpoint else None)
    save_on_signal._RECEIVED.set()
    try:
        saved = []
        for step in steps:
            control = SimpleNamespace(should_save=False, should_training_stop=False)
            callback.on_step_end(args, SimpleNamespace(global_step=step, max_steps=max_steps), control)
            if control.should_save:
                saved.append(step)
        return saved
    finally:
        save_on_signal._RECEIVED.clear()


def test_the_save_waits_for_the_cycles_end_counted_from_the_first_step_trained(capsys):
    assert saves_at(None, 10, range(1, 5)) == [2, 4]
    assert saves_at("checkpoint-3", 10, range(4, 8)) == [5, 7]   # TRL generated afresh at step 4
    assert "checkpoint-3 is inside a generation cycle of 2 steps" in capsys.readouterr().err


def test_the_runs_last_step_saves_whatever_the_cycle(capsys):
    assert saves_at(None, 5, range(5, 6)) == [5]
    assert saves_at("checkpoint-5", 5, range(5, 6)) == [5]
    assert "inside a generation cycle" not in capsys.readouterr().err   # no step left to train: nothing to warn
