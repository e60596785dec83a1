"""The watchdog's interrupt must not be lost: one that is swallowed (it landed in a weakref callback or a __del__)
is repeated, and a run whose watchdog fired never ends as a success."""

import signal
import time

import pytest

from smolalign.errors import RunFailure
from smolalign.runs import watchdog as watchdog_module
from smolalign.runs.watchdog import stall_watchdog


def test_a_swallowed_interrupt_is_repeated(monkeypatch):
    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.1)
    monkeypatch.setattr(watchdog_module, "REPEAT_INTERRUPT", 0.3)
    swallowed = 0
    with pytest.raises(RunFailure, match="no training step finished for 0.5 s"):
        with stall_watchdog(0.5):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    time.sleep(0.02)
                except KeyboardInterrupt:  # what a __del__ or weakref callback does with it
                    swallowed += 1
                    if swallowed == 2:
                        raise
    assert swallowed == 2


def test_a_run_whose_interrupts_were_all_swallowed_still_fails(monkeypatch):
    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.1)
    monkeypatch.setattr(watchdog_module, "REPEAT_INTERRUPT", 0.2)
    with pytest.raises(RunFailure, match="no training step finished"):
        with stall_watchdog(0.3):
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                try:
                    time.sleep(0.02)
                except KeyboardInterrupt:
                    pass


def test_a_run_that_ends_while_the_watchdog_decides_fails_and_is_not_interrupted_afterwards(monkeypatch):
    """The last step turns stale just as the run ends: the run is failed (RunFailure), and no interrupt reaches the
    code that runs after it (saving, the summary), where it could be swallowed and the run end as a success."""
    import threading

    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.01)
    deciding, decided = threading.Event(), threading.Event()

    def stale(self):
        deciding.set()
        decided.wait(5)
        return "stale"

    monkeypatch.setattr(watchdog_module.Watchdog, "_reason", stale)
    with pytest.raises(RunFailure, match="stale"):
        with stall_watchdog(1.0):
            assert deciding.wait(5)
            threading.Timer(0.2, decided.set).start()  # the block ends while the watchdog holds its decision
    time.sleep(0.5)  # an interrupt sent now would surface here as KeyboardInterrupt


def test_a_run_that_ended_is_never_failed_by_a_late_decision(monkeypatch):
    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.01)
    with stall_watchdog(0.05) as dog:
        pass
    dog.last_progress -= 10  # stale, but the run has ended
    time.sleep(0.2)
    assert dog.failure is None


def test_a_run_that_never_stops_exits_with_the_run_failure_code(tmp_path):
    """A main thread that cannot be interrupted (stuck in a C call; here: swallowing every interrupt) is ended by
    the watchdog with exit code 1, the documented code for a failed run, not a code of its own."""
    import os
    import subprocess
    import sys

    script = ("import time\nfrom smolalign.runs import watchdog as w\n"
              "w.CHECK_EVERY, w.REPEAT_INTERRUPT, w.GRACE_AFTER_INTERRUPT = 0.05, 0.1, 0.5\n"
              "with w.stall_watchdog(0.2):\n    while True:\n        try:\n            time.sleep(0.01)\n"
              "        except KeyboardInterrupt:\n            pass\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 1, done.stderr
    assert "no training step finished" in done.stderr and "did not stop after the interrupt" in done.stderr


def test_the_interrupt_reaches_a_run_started_with_sigint_ignored(monkeypatch):
    """A job a non-interactive shell starts in the background has SIGINT ignored, and interrupt_main does nothing
    then: the watchdog installs Python's handler while it watches, and puts the ignored one back."""
    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.1)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        start = time.monotonic()
        with pytest.raises(RunFailure, match="no training step finished for 0.3 s"):
            with stall_watchdog(0.3):
                while time.monotonic() - start < 20:  # steps of Python code, as a trainer runs
                    time.sleep(0.02)
        assert time.monotonic() - start < 10
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_main_thread_blocked_in_a_call_is_interrupted_at_once(monkeypatch):
    """A step stuck in one long blocking call (a sleep here; a socket read, a lock) is interrupted when the watchdog
    fires, not when the call returns: the interrupt is a signal to the main thread, which ends the call."""
    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.1)
    started = time.monotonic()
    with pytest.raises(RunFailure, match="no training step finished for 0.3 s"):
        with stall_watchdog(0.3):
            time.sleep(20)
    assert time.monotonic() - started < 5


def test_a_weight_sync_longer_than_the_sync_timeout_fails_the_run_naming_the_servers_log(monkeypatch, tmp_path):
    from types import SimpleNamespace

    monkeypatch.setattr(watchdog_module, "CHECK_EVERY", 0.1)
    server = SimpleNamespace(alive=lambda: True, log=tmp_path / "vllm.log")
    with pytest.raises(RunFailure, match=r"the weight sync into the vLLM server at step 4 did not finish within 0.5 s "
                                         r"\(generation.sync_timeout\); the server's log: .*vllm.log"):
        with stall_watchdog(60, server, sync_timeout=0.5) as watchdog:
            time.sleep(0.8)  # a step longer than the sync timeout, outside a sync: nothing to say
            with watchdog.timing_sync("the weight sync into the vLLM server at step 4"):
                time.sleep(20)
