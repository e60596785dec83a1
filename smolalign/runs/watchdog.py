"""Failing a run loudly instead of letting it hang: a thread that watches training progress (and a generation
server, when there is one) and interrupts the main thread when a step takes longer than the stall timeout, a weight
sync into vLLM longer than the sync timeout, or the server dies.

The interrupt (SIGINT to the main thread) surfaces as `RunFailure` with the reason. If the main thread is stuck where
Python cannot deliver it (a C loop that never returns to Python, as a hung NCCL collective), the process exits with
code 1 after a grace period, printing the reason: the same code as a `RunFailure`, since it is the same failure (the
exit-code contract, docs/verbs/index.md).
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
    def __init__(self, stall_timeout: float | None, server=None, sync_timeout: float | None = None):
        self.stall_timeout, self.server, self.sync_timeout = stall_timeout, server, sync_timeout
        self.last_progress = time.monotonic()
        self.syncing: tuple[str, float] | None = None
        """While a weight sync runs: what it is ("the weight sync into the vLLM server at step 3") and when it
        started."""
        self.failure: str | None = None
        self._stop = threading.Event()
        # Held while the watchdog decides to fail the run or interrupts it, and while the run says it has ended: a run
        # that ends just as its last step turns stale is failed or left alone, never interrupted after it ended.
        self._deciding = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="smolalign-watchdog", daemon=True)

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    @contextlib.contextmanager
    def timing_sync(self, what: str) -> Iterator[None]:
        """Around one weight sync: the run fails when it takes longer than the sync timeout."""
        self.syncing = (what, time.monotonic())
        try:
            yield
        finally:
            self.syncing = None

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
                interrupt_main_thread()
            if self._stop.wait(REPEAT_INTERRUPT):
                return
        print("error: the run did not stop after the interrupt; exiting", file=sys.stderr, flush=True)
        os._exit(RUN_FAILURE_EXIT)

    def _reason(self) -> str | None:
        if self.server is not None and not self.server.alive():
            return f"the vLLM server exited ({self.server.describe_exit()})"
        syncing = self.syncing
        if self.sync_timeout and syncing is not None and time.monotonic() - syncing[1] > self.sync_timeout:
            log = getattr(self.server, "log", None)
            where = (f"; the server's log: {log}" if log else
                     "; see the server's own log" if self.server is not None else "")
            return (f"{syncing[0]} did not finish within {self.sync_timeout:g} s (generation.sync_timeout){where}")
        if self.stall_timeout and time.monotonic() - self.last_progress > self.stall_timeout:
            return (f"no training step finished for {self.stall_timeout:g} s (stalled generation or weight sync?); "
                    "raise generation.stall_timeout if steps are really this slow")
        return None


@contextlib.contextmanager
def stall_watchdog(stall_timeout: float | None, server=None, sync_timeout: float | None = None
                   ) -> Iterator[Watchdog]:
    watchdog = Watchdog(stall_timeout, server, sync_timeout)
    active = bool(stall_timeout) or bool(sync_timeout) or server is not None
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


def interrupt_main_thread() -> None:
    """SIGINT to the main thread itself, so that a blocking call it waits in (a sleep, a socket read, a lock) returns
    and Python raises KeyboardInterrupt there; `_thread.interrupt_main` alone only sets a flag that a thread stuck in
    a C call never reads. Where no Python handler takes SIGINT, the flag is all that is safe."""
    if callable(signal.getsignal(signal.SIGINT)):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    else:
        _thread.interrupt_main()


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
