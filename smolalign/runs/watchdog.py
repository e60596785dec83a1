"""Failing a run loudly instead of letting it hang: a thread that watches training progress (and a generation
server, when there is one) and interrupts the main thread when a step takes longer than the stall timeout or the
server dies.

The interrupt surfaces as `RunFailure` with the reason. If the main thread is stuck where Python cannot deliver the
interrupt (inside a blocking C call), the process exits with code 1 after a grace period, printing the reason: the
same code as a `RunFailure`, since it is the same failure (the exit-code contract, docs/verbs/index.md).
"""

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

from smolalign.errors import RunFailure

CHECK_EVERY = 1.0
GRACE_AFTER_INTERRUPT = 120.0
REPEAT_INTERRUPT = 5.0
RUN_FAILURE_EXIT = 1


class Watchdog:
    def __init__(self, stall_timeout: float | None, server=None):
        self.stall_timeout, self.server = stall_timeout, server
        self.last_progress = time.monotonic()
        self.failure: str | None = None
        self._stop = threading.Event()
        # Held while the watchdog decides to fail the run or interrupts it, and while the run says it has ended: a run
        # that ends just as its last step turns stale is failed or left alone, never interrupted after it ended.
        self._deciding = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="smolalign-watchdog", daemon=True)

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def callback(self):
        from transformers import TrainerCallback

        watchdog = self

        class Progress(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                watchdog.progress()

            def on_train_begin(self, args, state, control, **kwargs):
                watchdog.progress()

        return Progress()

    def _watch(self) -> None:
        while not self._stop.wait(CHECK_EVERY):
            with self._deciding:
                if self._stop.is_set():
                    return
                self.failure = self._reason()
            if self.failure:
                break
        else:
            return
        print(f"error: {self.failure}", file=sys.stderr, flush=True)
        # An interrupt that lands in a weakref callback or a __del__ is swallowed there: repeat it until the main
        # thread stops.
        deadline = time.monotonic() + GRACE_AFTER_INTERRUPT
        while time.monotonic() < deadline:
            with self._deciding:
                if self._stop.is_set():  # the run has ended: it raises the failure itself
                    return
                _thread.interrupt_main()
            if self._stop.wait(REPEAT_INTERRUPT):
                return
        print("error: the run did not stop after the interrupt; exiting", file=sys.stderr, flush=True)
        os._exit(RUN_FAILURE_EXIT)

    def _reason(self) -> str | None:
        if self.server is not None and not self.server.alive():
            return f"the vLLM server exited ({self.server.describe_exit()})"
        if self.stall_timeout and time.monotonic() - self.last_progress > self.stall_timeout:
            return (f"no training step finished for {self.stall_timeout:g} s (stalled generation or weight sync?); "
                    "raise generation.stall_timeout if steps are really this slow")
        return None


@contextlib.contextmanager
def stall_watchdog(stall_timeout: float | None, server=None) -> Iterator[Watchdog]:
    watchdog = Watchdog(stall_timeout, server)
    active = bool(stall_timeout) or server is not None
    restore = _deliverable_interrupts() if active else None
    if active:
        watchdog._thread.start()
    try:
        yield watchdog
    except KeyboardInterrupt:
        watchdog._stop.set()  # no repeated interrupt while this one is handled
        if watchdog.failure:
            raise RunFailure(watchdog.failure) from None
        raise
    finally:
        try:
            with watchdog._deciding:
                watchdog._stop.set()
        except KeyboardInterrupt:  # the watchdog's interrupt, arriving as the run ends: its failure is raised below
            watchdog._stop.set()
        if restore is not None:
            signal.signal(signal.SIGINT, restore)
    if watchdog.failure:  # every interrupt was swallowed, yet the run failed (its server died, or it stalled)
        raise RunFailure(watchdog.failure)


def _deliverable_interrupts():
    """`interrupt_main` does nothing while SIGINT is ignored, as it is in a job a non-interactive shell started in
    the background (`smolalign rl ... &` in a script): install Python's handler for the watchdog's lifetime and
    return the one to put back (None when nothing was changed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGINT)
    if current in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return current
    return None
