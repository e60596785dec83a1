"""A GGUF model's first run: its dry-run tokenizer read and its conversion, with transformers' GGUF loaders as they
come against the same loaders reading the file once (smolalign/models/gguf_read.py), in the same run.

    python benchmarks/gguf_read.py [--repeats 2]

Each measurement is a fresh process with an empty smolalign cache, on the bundled SmolLM2-135M-Instruct (Q4_1,
49,152-token vocabulary); imports happen before the clock starts. Modes alternate (off, on, off, on, ...) so a
machine that slows down mid-run hurts both; the medians are printed with their ratio.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import contextlib, json, sys, time
import transformers, gguf  # imported before the clock starts
from smolalign.models import load
from smolalign.models.sources import resolve_source
from smolalign.recipe.schema import ModelSection
from smolalign.target import this_machine
if sys.argv[1] == "off":
    load.read_once = contextlib.nullcontext
source, target = resolve_source("smollm2-135m-instruct"), this_machine()
start = time.perf_counter()
load.preflight_tokenizer(ModelSection(source="smollm2-135m-instruct"), "smollm3", source, target)
read = time.perf_counter()
load.local_dir(source)
done = time.perf_counter()
print("RESULT " + json.dumps({"tokenizer": read - start, "conversion": done - read, "total": done - start}))
"""


def measure(mode: str) -> dict:
    import json

    with tempfile.TemporaryDirectory(prefix="bench-gguf-") as cache:
        env = {**os.environ, "SMOLALIGN_CACHE": cache,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, cwd=REPO, check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[len("RESULT "):])


def main() -> None:
    import platform

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    runs = {"off": [], "on": []}
    for _ in range(args.repeats):
        for mode in runs:
            runs[mode].append(measure(mode))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}; medians of {args.repeats}")
    print("| loaders | dry-run tokenizer read | conversion | both |\n|---|---|---|---|")
    medians = {}
    for mode, label in (("off", "transformers as it comes"), ("on", "one reader per file (smolalign)")):
        medians[mode] = {key: statistics.median(r[key] for r in runs[mode]) for key in runs[mode][0]}
        m = medians[mode]
        print(f"| {label} | {m['tokenizer']:.1f} s | {m['conversion']:.1f} s | {m['total']:.1f} s |")
    print(f"ratio: {medians['off']['total'] / medians['on']['total']:.2f}x")


if __name__ == "__main__":
    main()
