"""Saving before a time limit: on SIGUSR1 (which a `launch slurm` job forwards to training when its time limit
nears) the run writes a checkpoint at the next step boundary, stops, and exits with SAVED_ON_SIGNAL_EXIT, after
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
import signal
import threading
from collections.abc import Iterator

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


def save_on_signal_callback():
    """A TrainerCallback that saves and stops at the first step end after SAVE_SIGNAL arrived on any rank."""
    from transformers import TrainerCallback

    class SaveOnSignal(TrainerCallback):
        def __init__(self):
            self.stopped_at: int | None = None

        def on_step_end(self, args, state, control, **kwargs):
            if _any_rank(_RECEIVED.is_set(), args.device):
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
