"""What checking every weight sync costs: the quickstart's GRPO recipe (recipes/quickstart/rl.yaml) with vLLM colocated
(its CPU build on a CPU), run by the real CLI, on the bundled SmolLM2-135M-Instruct (the quickstart's PO model where
it exists); the check's seconds (`sync/check_seconds`, smolalign/stages/weight_sync.py) against each step's
(`step_time`), both from the run's metrics.jsonl, in the same run.

    python benchmarks/weight_sync_check.py [--steps 6] [--model smollm2-135m-instruct] [--threads 2]

Prints one line per step (TRL's copy of the weights, the check, the step) and the check's share of a step: median
and mean over the steps after the first. The first check also asks the engine for the probe's greedy answer and pays
the engine's first prompt-log-prob call (a warm-up the first generation would pay otherwise): shown apart. The
issue's bar is 2% of a step.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="smolalign-sync-check-"))
    command = [sys.executable, "-m", "smolalign", "rl", str(ROOT / "recipes/quickstart/rl.yaml"),
               "--set", f"model.source={args.model}", "--set", "generation.backend=vllm_colocate",
               "--set", f"train.max_steps={args.steps}", "--set", f"train.save_steps={args.steps}",
               "-o", str(run_dir / "run")]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    entries = [json.loads(line) for line in (run_dir / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [e for e in entries if "sync/check_seconds" in e and "step_time" in e]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.threads} threads; "
          f"model {args.model}; {len(steps)} steps")
    for e in steps:
        print(json.dumps({"step": e["step"], "sync_seconds": round(e["sync/seconds"], 3),
                          "check_seconds": round(e["sync/check_seconds"], 3), "step_time": round(e["step_time"], 2),
                          "engine_gap": e["sync/engine_gap"], "verified": e["sync/verified"]}))
    later = steps[1:]
    shares = [e["sync/check_seconds"] / e["step_time"] for e in later]
    print(f"first check: {steps[0]['sync/check_seconds']:.2f} s (the probe's greedy answer and the engine's first "
          f"prompt-log-prob call included)")
    print(f"later checks: median {statistics.median(e['sync/check_seconds'] for e in later):.3f} s, median step "
          f"{statistics.median(e['step_time'] for e in later):.2f} s; the check's share of a step: median "
          f"{statistics.median(shares):.2%}, mean {statistics.mean(shares):.2%}, max {max(shares):.2%}")


if __name__ == "__main__":
    main()
