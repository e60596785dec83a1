"""benchmarks/gpu_figures.py spends scarce device time: a run that fails must not cost the runs after it, and a run
still going at --deadline must end (with every process it started) so that the call returns inside its limit with
the rows already written."""

import importlib
import os
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def figures():
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("gpu_figures")
    finally:
        sys.path[:] = saved


def context(figures, tmp_path, seconds_left=None):
    deadline = None if seconds_left is None else time.monotonic() + seconds_left
    return figures.Context(tmp_path / "model", tmp_path / "data", tmp_path / "prompts", tmp_path, tmp_path, 3, 1, {},
                           True, deadline=deadline)


def test_a_failed_run_is_a_row_and_the_next_run_starts(figures, tmp_path):
    ctx = context(figures, tmp_path)
    failed = ctx.attempt("broken", figures.run_child,
                         [sys.executable, "-c", "import sys; print('CUDA out of memory', file=sys.stderr); sys.exit(3)"])
    after = ctx.attempt("next", figures.run_child, [sys.executable, "-c", "print(41 + 1)"])
    assert failed is None and after.strip() == "42"
    assert "| broken | failed: exit 3: CUDA out of memory" in (tmp_path / "gpu_figures.md").read_text()
    assert "CUDA out of memory" in (tmp_path / "gpu_figures.log").read_text()


def test_a_run_past_the_deadline_ends_with_the_processes_it_started(figures, tmp_path, monkeypatch):
    """The child starts a grandchild (as a vLLM engine or compile workers would) and both outlive the deadline."""
    monkeypatch.setattr(figures, "MIN_RUN_SECONDS", 1)
    ctx = context(figures, tmp_path, seconds_left=3)
    pid_file = tmp_path / "grandchild.pid"
    # The grandchild does not hold the child's pipes, so only the kill decides whether it outlives the deadline.
    script = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
              f"time.sleep(600)'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(600)")
    started = time.monotonic()
    assert ctx.attempt("hangs", figures.run_child, [sys.executable, "-c", script]) is None
    assert time.monotonic() - started < 15
    assert "still running after" in (tmp_path / "gpu_figures.md").read_text()
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not Path(f"/proc/{grandchild}").exists() or "Z" in _state(grandchild):
            break
        time.sleep(0.1)
    else:
        os.kill(grandchild, 9)
        pytest.fail("the run's own child outlived the deadline")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


def test_no_run_starts_with_too_little_of_the_deadline_left(figures, tmp_path):
    ctx = context(figures, tmp_path, seconds_left=figures.MIN_RUN_SECONDS - 5)
    marker = tmp_path / "ran"
    assert ctx.attempt("late", figures.run_child, [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]) is None
    assert not marker.exists()
    assert "| late | not run:" in (tmp_path / "gpu_figures.md").read_text()


def test_a_run_that_leaves_a_process_behind_returns_when_it_ends_and_the_process_goes(figures, tmp_path):
    """A child that exits 0 but leaves a process holding its output (compile workers, an engine): its output comes
    back at once, and the process left behind is killed, so nothing holds the GPU into the next run."""
    pid_file = tmp_path / "left.pid"
    script = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
              f"open({str(pid_file)!r}, 'w').write(str(p.pid)); print('done')")
    started = time.monotonic()
    assert figures.run_child([sys.executable, "-c", script], timeout=60).strip() == "done"
    assert time.monotonic() - started < 20
    left = int(pid_file.read_text())
    for _ in range(50):
        if _state(left) == "Z":
            break
        time.sleep(0.1)
    else:
        os.kill(left, 9)
        pytest.fail("the process the run left behind is still running")


def test_a_run_whose_output_cannot_be_read_is_a_row_and_the_next_run_starts(figures, tmp_path):
    def no_metrics(timeout):
        return (tmp_path / "missing" / "metrics.jsonl").read_text()

    assert context(figures, tmp_path).attempt("unreadable", no_metrics) is None
    assert context(figures, tmp_path).attempt("next", lambda timeout: 7) == 7
    assert "| unreadable | failed: FileNotFoundError" in (tmp_path / "gpu_figures.md").read_text()
