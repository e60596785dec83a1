"""Run the smolalign CLI in a subprocess that stops at a chosen call, so a fault test can kill -9 it at a known
moment (in the middle of a checkpoint save, between two files of a final write, halfway through a conversion)
instead of at a random one. Nothing in smolalign is replaced: the named function runs as usual except that its Nth
call first writes a marker file and then waits forever for the kill.

    KILLPOINT=transformers.trainer:Trainer._save_rng_state KILLPOINT_CALL=2 KILLPOINT_MARKER=killpoint.marker \\
        python tests/killpoint.py sft recipe.yaml
"""

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path


def install(target: str, on_call: int, marker: Path) -> None:
    module_name, _, qualname = target.partition(":")
    owner = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = 0

    def stopping(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == on_call:
            marker.write_text(str(os.getpid()))
            while True:
                time.sleep(1)
        return original(*args, **kwargs)

    setattr(owner, name, stopping)


def run_until_killed(argv: list[str], target: str, marker: Path, on_call: int = 1, timeout: float = 300) -> None:
    """Start `smolalign ARGV` with the kill point, wait until it stops there, kill -9 it; fails if it never does."""
    import signal

    env = {**os.environ, "KILLPOINT": target, "KILLPOINT_CALL": str(on_call), "KILLPOINT_MARKER": str(marker),
           "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, __file__, *argv], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while not marker.is_file() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.is_file(), f"never reached {target} (exit {process.poll()}): {process.stderr.read()[-2000:]}"
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL


if __name__ == "__main__":
    install(os.environ["KILLPOINT"], int(os.environ.get("KILLPOINT_CALL", "1")), Path(os.environ["KILLPOINT_MARKER"]))
    from smolalign.cli import main

    main(sys.argv[1:])
