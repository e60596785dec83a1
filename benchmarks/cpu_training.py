"""What each of smolalign's CPU training adaptations is worth on the quickstart's GRPO stage, in one run: the same
`smolalign rl quickstart/rl` steps with all of them off (TRL as it comes, under bf16 autocast), then each added in
turn, then all on (smolalign's default on a CPU with AMX or AVX512-BF16):

- scored positions (smolalign/stages/scored_positions.py): TRL's fused LM head projects only the completion tokens;
- generation copy (smolalign/stages/generation_copy.py): sampling from a bfloat16 copy of the float32 policy;
- eager attention (hardware.autocast_attention): the trained model's attention under autocast;
- shared prompts (smolalign/trainers/grpo.py): each distinct prompt goes through the model once per batch,
  its answers on its key/value cache;
- prompts read once in generation (smolalign/trainers/shared_prefill.py): the rollouts' `generate` runs each distinct
  prompt once and continues every copy from its cache.

With `--stage distill`, the quickstart's distillation stage (`smolalign rl quickstart/distill`) with TRL's
DistillationTrainer as it comes (its loss outside autocast, so in float32) against smolalign's, whose loss runs
under the run's mixed precision (smolalign/trainers/distillation.py); the other adaptations on in both.

    python benchmarks/cpu_training.py [--stage rl|distill] [--steps 6] [--threads 2] [--only all,baseline]

Needs runs/quickstart/po/model (rl) or runs/quickstart/rl/model (distill): make quickstart. Each configuration runs
`--steps` steps in a fresh process; it prints, per configuration, the median seconds per step of generation
(`generate`), of training (the rest of TRL's training_step: log-probs, loss, backward, optimizer) and of the whole
step, over the steps after the first, and the ratios against the baseline. Step times swing by 10-20% on a shared
2-core machine: compare medians from one run.
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
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ALL_ON = {"scored": True, "copy": True, "eager": True, "shared": True, "prefill": True, "autocast_loss": True}
CONFIGS = {
    "rl": {
        "baseline": {**ALL_ON, "scored": False, "copy": False, "eager": False, "shared": False, "prefill": False},
        "+ scored positions": {**ALL_ON, "copy": False, "eager": False, "shared": False, "prefill": False},
        "+ generation copy": {**ALL_ON, "eager": False, "shared": False, "prefill": False},
        "+ eager attention": {**ALL_ON, "shared": False, "prefill": False},
        "+ shared prompts": {**ALL_ON, "prefill": False},
        "all (default)": ALL_ON,
    },
    "distill": {
        "baseline": {**ALL_ON, "autocast_loss": False},
        "all (default)": ALL_ON,
    },
}
NEEDS = {"rl": "runs/quickstart/po/model", "distill": "runs/quickstart/rl/model"}

CHILD = r'''
import contextlib, json, sys, time
import dataclasses
import smolalign.stages.generation_copy as generation_copy
import smolalign.stages.library_patches as library_patches
import smolalign.recipe.method_table as method_table
from transformers.generation.utils import GenerationMixin
from trl import DistillationTrainer, GRPOTrainer

config = json.loads(sys.argv[1])
off = lambda accelerator: contextlib.nullcontext()
if not config["scored"]:
    library_patches.scored_positions_only = off
if not config["copy"]:
    library_patches.bf16_generation_copy = off
if not config["shared"]:
    method_table.METHODS["grpo"] = dataclasses.replace(method_table.METHODS["grpo"], trainer=lambda: GRPOTrainer)
if not config["prefill"]:
    generation_copy.generate_sharing_prompts = lambda model, *args, **kwargs: type(model).generate(model, *args, **kwargs)
if not config["autocast_loss"]:
    method_table.METHODS["distill"] = dataclasses.replace(method_table.METHODS["distill"],
                                                          trainer=lambda: DistillationTrainer)
times = {"generate": [], "step": [], "precision": []}
depth = [0]

def timed(generate):
    """A generation entry point, timed once however they nest (the copy's generate calls transformers')."""
    def timed_generate(self, *args, **kwargs):
        depth[0] += 1
        start = time.perf_counter()
        try:
            out = generate(self, *args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            times["generate"].append(time.perf_counter() - start)
            times["precision"].append(str(next(self.parameters()).dtype))
        return out
    return timed_generate

generation_copy.generate_sharing_prompts = timed(generation_copy.generate_sharing_prompts)

def timed_step(self, *args, **kwargs):
    start = time.perf_counter()
    out = step(self, *args, **kwargs)
    times["step"].append(time.perf_counter() - start)
    return out

trainer = DistillationTrainer if sys.argv[3] == "quickstart/distill" else GRPOTrainer
step = trainer.training_step
GenerationMixin.generate, trainer.training_step = timed(GenerationMixin.generate), timed_step
from smolalign.cli import main
try:
    main(sys.argv[2:])
except SystemExit as exc:
    if exc.code:
        raise
print("TIMES " + json.dumps(times))
'''


def run_config(stage: str, name: str, config: dict, steps: int, threads: int, out: Path) -> dict:
    args = ["rl", f"quickstart/{stage}", "--overwrite", "-o", str(out / name.replace(" ", "_")),
            "--set", f"train.max_steps={steps}", "--set", f"train.save_steps={steps}"]
    if not config["eager"]:
        args += ["--set", "model.attn_implementation=sdpa"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config), *args], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("TIMES ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"{name}: exit {result.returncode}\n{result.stderr[-3000:]}")
    times = json.loads(lines[-1][len("TIMES "):])
    generate, step = times["generate"][1:], times["step"][1:]
    return {"config": name, "generate_s": statistics.median(generate),
            "train_s": statistics.median(s - g for s, g in zip(step, generate, strict=True)), "step_s": statistics.median(step),
            "generates_in": sorted(set(times["precision"])), "steps_measured": len(step)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=sorted(CONFIGS), default="rl")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default=None, help="comma-separated configuration names (default: all)")
    args = parser.parse_args()
    if not (ROOT / NEEDS[args.stage]).is_dir():
        sys.exit(f"needs {NEEDS[args.stage]}: run make quickstart first")
    configs = CONFIGS[args.stage]
    names = list(configs) if args.only is None else [n for n in configs if n in args.only.split(",")]
    print(json.dumps({"machine": platform.processor() or platform.machine(), "threads": args.threads,
                      "stage": args.stage, "steps": args.steps}))
    rows = []
    with tempfile.TemporaryDirectory(prefix="smolalign-bench-") as tmp:
        for name in names:
            rows.append(run_config(args.stage, name, configs[name], args.steps, args.threads, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    base = next((r for r in rows if r["config"] == "baseline"), None)
    if base is not None:
        for row in rows:
            print(f"{row['config']:>20}: step {row['step_s']:.2f} s ({base['step_s'] / row['step_s']:.2f}x), "
                  f"generate {row['generate_s']:.2f} s ({base['generate_s'] / row['generate_s']:.2f}x), "
                  f"train {row['train_s']:.2f} s ({base['train_s'] / row['train_s']:.2f}x)")


if __name__ == "__main__":
    main()
