"""How the processes of a vLLM server smolalign started end: stopped (SIGTERM to its process group, SIGKILL after a
grace period and to whatever of the group outlives the server's own process), killed by the kernel with the
process that started it (the parent-death signal), and, for vLLM's engine and workers, which watch no parent, by a
reaper process that kills the group once the starting process is gone however it went."""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

STOP_GRACE = 30.0
"""Seconds a stopped server gets to exit after SIGTERM before SIGKILL."""


def die_with_parent() -> None:
    """In the server's process before it runs: the kernel sends it SIGKILL when the process that started it dies,
    even by SIGKILL (Linux's parent-death signal). Its own children are the reaper's."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


REAPER = """import os, signal, sys
if not os.read(0, 1):
    try:
        os.killpg(int(sys.argv[1]), signal.SIGKILL)
    except ProcessLookupError:
        pass
"""
"""Reads its stdin until a byte arrives (the server was stopped: nothing to do) or the end of file (the process
holding the other end died without stopping it: SIGKILL to the server's process group)."""


class Reaper:
    """A process of its own session (signals to the run's group do not reach it) that kills the server's process
    group once the process that started the server is gone, however it went."""

    def __init__(self, group: int):
        read, self._write = os.pipe()  # not inherited by the server or any other child started with exec
        try:
            self.process = subprocess.Popen([sys.executable, "-c", REAPER, str(group)], stdin=read,
                                            start_new_session=True)
        except BaseException:
            os.close(self._write)
            raise
        finally:
            os.close(read)

    def release(self) -> None:
        """The server is stopped: the reaper exits without killing anything."""
        if self._write is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._write, b"\0")
        os.close(self._write)
        self._write = None
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def stop_server(handle) -> None:
    """SIGTERM to the server's process group (vLLM's engine and workers with it), SIGKILL after STOP_GRACE, and
    SIGKILL to whatever of the group outlives the server's own process (an engine whose server died first)."""
    process = handle.process
    if process is None:
        return

    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    if handle.reaper is not None:
        handle.reaper.release()
