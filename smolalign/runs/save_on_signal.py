"""Saving before a time limit: on SIGUSR1 (which a `launch slurm` job forwards to training when its time limit
nears) the run writes a checkpoint at the next step boundary (for GRPO reusing its samples over several steps, the
next end of a generation cycle), stops, and exits with SAVED_ON_SIGNAL_EXIT, after
which the job requeues itself and the next run resumes from that checkpoint.

The handler is installed for the whole stage (`listening`, around every stage run), not only while training runs: a
signal that arrives while the data is prepared or the models load is kept, and the run saves at its first step end,
where without a handler the signal's default action would end the process and the job would wait out its time limit.

The signal handler only sets a flag. Every rank gets the signal (srun delivers it to every process of the step), but
not at the same instant: a rank that sees it just before a step ends and one that sees it just after would save at
different steps, and a ZeRO-3 or FSDP save on one rank alone waits forever for the others. So at each step end the
flag is all-reduced (MAX) over the process group, one one-element tensor per optimizer step, and every rank decides
the same: save and stop at this step. This also covers a signal that reached only some of the ranks.
"""

import contextlib
import math
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from smolalign.runs.rundir import checkpoint_step

SAVE_SIGNAL = signal.SIGUSR1
SAVED_ON_SIGNAL_EXIT = 75
"""The exit code of a run stopped by the signal after saving (sysexits' EX_TEMPFAIL: run it again to continue)."""


class SavedOnSignal(Exception):
    """The run saved a checkpoint on the signal and stopped before its end."""


_RECEIVED = threading.Event()


def _received(signum, frame) -> None:
    _RECEIVED.set()


@contextlib.contextmanager
def listening() -> Iterator[None]:
    """Catch SAVE_SIGNAL while the block runs, for the callback's next step end (main thread only; elsewhere signals
    cannot be handled). The outermost block starts with no signal received; a block inside another (the handler
    already installed) keeps what that one caught."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(SAVE_SIGNAL) is _received:
        yield
        return
    _RECEIVED.clear()
    previous = signal.signal(SAVE_SIGNAL, _received)
    try:
        yield
    finally:
        signal.signal(SAVE_SIGNAL, previous)


def generation_cycle(steps_per_generation: int | None, num_iterations: int | None, accumulation: int) -> int:
    """Optimizer steps from one generation to the next of a trainer that trains on its samples over several steps
    (GRPO's steps_per_generation x num_iterations micro-batches; 1 for every other trainer). Only a checkpoint at a
    cycle's end resumes as the run would have gone on: TRL keeps the cycle's samples in memory only, and a resumed
    trainer generates afresh at its first step and counts its cycles from there."""
    if not steps_per_generation:
        return 1
    every = steps_per_generation * (num_iterations or 1)
    return math.lcm(every, accumulation) // accumulation


def settings_generation_cycle(settings) -> int:
    """`generation_cycle` of a recipe's train settings (`recipe.settings.TrainSettings`): 1 for a trainer without
    GRPO's num_iterations."""
    if settings.get("num_iterations") is None:
        return 1
    steps_per_generation, _ = settings.generation_batches()
    return generation_cycle(steps_per_generation, settings["num_iterations"], settings.accumulation)


def trainer_generation_cycle(args, checkpoint: Path | None = None) -> int:
    """`generation_cycle` of a trainer's config (TRL's GRPOConfig has filled steps_per_generation in), with a warning
    (from the main process) when the run resumes to train on from a `checkpoint` inside a cycle."""
    cycle = generation_cycle(getattr(args, "steps_per_generation", None), getattr(args, "num_iterations", None),
                             args.gradient_accumulation_steps)
    step = checkpoint_step(checkpoint) or 0
    trains_on = not (args.max_steps and args.max_steps > 0 and step >= args.max_steps)
    if step % cycle and trains_on and getattr(args, "process_index", 0) == 0:
        print(f"warning: --resume: {checkpoint.name} is inside a generation cycle of {cycle} steps; the resumed run "
              "generates afresh there and trains on other samples than the interrupted run would have",
              file=sys.stderr)
    return cycle


def save_on_signal_callback(args=None, checkpoint: Path | None = None):
    """A TrainerCallback that saves and stops at the first step end after SAVE_SIGNAL arrived on any rank that ends
    a generation cycle of the trainer's (`args`, its config; `checkpoint`, the one it resumes from: TRL counts its
    cycles from the first step it trains), or is the run's last."""
    from transformers import TrainerCallback

    cycle = 1 if args is None else trainer_generation_cycle(args, checkpoint)
    resumed_at = checkpoint_step(checkpoint) or 0

    class SaveOnSignal(TrainerCallback):
        def __init__(self):
            self.stopped_at: int | None = None

        def on_step_end(self, args, state, control, **kwargs):
            # every rank takes part in the all-reduce at every step end, whether or not this one ends a cycle
            ends = (state.global_step - resumed_at) % cycle == 0 or state.global_step >= state.max_steps
            if _any_rank(_RECEIVED.is_set(), args.device) and ends:
                control.should_save = True
                control.should_training_stop = True
                self.stopped_at = state.global_step
            return control

    return SaveOnSignal()


def _any_rank(flag: bool, device) -> bool:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    # NCCL reduces tensors on the GPU only; gloo (CPU runs) on the CPU.
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=on)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())
