"""How long a smolalign command takes to exit once its work is done: the program as shipped (`smolalign.cli.run`,
which leaves the interpreter's last garbage collection nothing to walk) against `smolalign.cli.main` alone, in the
same run.

    python benchmarks/cli_exit.py [--repeats 2] [-- COMMAND ARGS...]

The default command is a chat with the bundled SmolLM2-135M-Instruct (converted once into smolalign's cache);
`-- rl quickstart/rl --set train.max_steps=1 -o runs/exit-bench --overwrite` times a training command (needs
runs/quickstart/po/model). Each measurement is a fresh process; the clock runs from the last line the command
writes to the process's end. Modes alternate so a machine that slows down mid-run hurts both; the medians are
printed with their ratio.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
REPO = Path(__file__).resolve().parent.parent
DEFAULT = ["chat", "smollm2-135m-instruct", "--message", "Which is larger, 38 or 83?", "--no-think"]
ENTRY = {"main only": "from smolalign.cli import main; main()", "run (as shipped)": "from smolalign.cli import run; run()"}


def measure(entry: str, command: list[str]) -> tuple[float, float]:
    """(seconds from the start to the last output line, seconds from that line to the exit)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", entry, *command], env=env, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    last = start
    for _ in iter(process.stdout.readline, b""):
        last = time.perf_counter()
    if process.wait():
        raise SystemExit(f"{' '.join(command)} failed (exit {process.returncode})")
    return last - start, time.perf_counter() - last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("command", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    measure(ENTRY["main only"], args.command)  # a first run converts the bundled model into the cache
    exits: dict[str, list[float]] = {mode: [] for mode in ENTRY}
    for _ in range(args.repeats):
        for mode, entry in ENTRY.items():
            work, exit_time = measure(entry, args.command)
            exits[mode].append(exit_time)
            print(f"{mode:18s} work {work:6.2f} s, exit {exit_time:5.2f} s", flush=True)
    medians = {mode: statistics.median(times) for mode, times in exits.items()}
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, OMP_NUM_THREADS="
          f"{os.environ['OMP_NUM_THREADS']}; `smolalign {' '.join(args.command)}`, medians of {args.repeats}:")
    for mode, median in medians.items():
        print(f"  {mode:18s} exit {median:5.2f} s")
    print(f"  ratio {medians['main only'] / medians['run (as shipped)']:.2f}x")


if __name__ == "__main__":
    main()
