"""The built-in `python` tool: the model's code runs in the code reward's sandbox (the same isolation level, the
same limits on memory, processes, files and output), with the recipe's time limit as its CPU limit; what it printed
comes back, cut to the budget. Code that fails raises, so TRL hands the model `{'error': ...}` with the traceback's
last lines and counts the call as a tool failure; so does code that runs out of time."""

import threading

from rewards.sandbox import Limits, Pool
from smolalign.tools.budget import cut, cut_tail

TRACEBACK_LINES = 6
"""The last lines of a failing program's stderr the model is shown: the exception and where it was raised."""


class ToolError(RuntimeError):
    """A call the tool could not complete; TRL returns its message to the model as the tool's error."""


class PythonTool:
    """One sandbox pool per training process, started on the first call; `close()` stops its workers."""

    def __init__(self, timeout: float, max_output_chars: int, level: str = "auto", workers: int = 2):
        self.limits = Limits(cpu_seconds=timeout, wall_seconds=2 * timeout + 1)
        self.max_output_chars = max_output_chars
        self.level = level
        self.workers = workers
        self.timeouts = 0
        self._pool: Pool | None = None
        self._lock = threading.Lock()

    @property
    def pool(self) -> Pool:
        with self._lock:
            if self._pool is None:
                self._pool = Pool(self.workers, self.limits, self.level)
            return self._pool

    def run(self, code: str) -> str:
        """What `code` printed; raises ToolError with the traceback's end, or the time limit, when it fails."""
        execution = self.pool.run_many([(code, "")])[0]
        if execution.status in ("ok", "output_limit"):
            return cut(execution.stdout, self.max_output_chars)
        if execution.status == "timeout":
            self.timeouts += 1
            raise ToolError(f"the code ran past the {self.limits.cpu_seconds:g}-second limit")
        if execution.status == "sandbox_error":
            raise ToolError(f"the sandbox failed: {execution.stderr.strip()[-200:]}")
        lines = [line for line in execution.stderr.strip().splitlines() if line.strip()][-TRACEBACK_LINES:]
        message = cut_tail("\n".join(lines) or f"exit status {execution.returncode}", self.max_output_chars)
        raise ToolError(message)

    def function(self):
        """The tool as TRL takes it: a function named `python`, its schema made from its signature and docstring."""
        tool = self

        def python(code: str) -> str:
            """Run Python code and return what it printed. Use print() to see a value.

            Args:
                code: The Python program to run, e.g. print(123 * 456).
            """
            return tool.run(code)

        return python

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
