"""On-policy distillation against GRPO with 4 generations per prompt: the same tiny student, the same prompts and
completion budget, measured in the same run. The claim to check: distillation is far cheaper per prompt, because
one sampled answer graded token by token by the teacher replaces a group of answers graded by a reward.

    python benchmarks/distill.py [--steps 24] [--completion-tokens 32] [--repeats 3]

Both runs go through `smolalign rl` (TRL's DistillationTrainer with a same-tokenizer teacher, and GRPOTrainer with
a cheap reward), with transformers generation on the CPU; each run's wall time includes loading the models.
Prints prompts/s and student tokens/s for each (best of --repeats) and their ratios (distillation / GRPO).
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

REWARD = "def constant(completions, **kw):\n    return [0.0 for _ in completions]\n"


def run_cli(args: list[str]) -> float:
    from smolalign.cli import main

    start = time.perf_counter()
    try:
        main(args)
    except SystemExit as exc:
        if exc.code:
            raise RuntimeError(f"smolalign {' '.join(args)} exited {exc.code}") from None
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--completion-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; the fastest counts (shared machines)")
    args = parser.parse_args()
    import torch
    import yaml
    from tiny_models import build_model, build_tokenizer, write_jsonl

    folder = Path(tempfile.mkdtemp(prefix="smolalign-bench-distill-"))
    os.environ.setdefault("SMOLALIGN_CACHE", str(folder / "cache"))
    tokenizer = build_tokenizer(folder / "student")
    build_model(folder / "student", tokenizer, hidden=128, layers=4, seed=0)
    build_tokenizer(folder / "teacher")
    build_model(folder / "teacher", tokenizer, hidden=256, layers=4, seed=1)
    prompts = write_jsonl(folder / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(256)])
    (folder / "reward.py").write_text(REWARD)
    common = {"model": {"source": str(folder / "student")}, "template": {"name": "chatml"},
              "data": {"sources": [{"path": str(prompts)}]}}
    train = {"per_device_train_batch_size": 8, "max_completion_length": args.completion_tokens, "max_steps": args.steps,
             "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False, "temperature": 1.0}
    distill = {**common, "method": "distill", "teacher": {"source": str(folder / "teacher")}, "train": train}
    grpo = {**common, "method": "grpo", "rewards": [{"name": f"{folder / 'reward.py'}:constant"}],
            "train": {**train, "num_generations": 4}}
    for name, recipe in (("distill", distill), ("grpo", grpo)):
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(recipe))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"torch {torch.__version__}; python {sys.version.split()[0]}")
    print(f"{args.steps} steps of 8 sequences, ≤ {args.completion_tokens} tokens each; student 4 layers × 128, "
          "teacher 4 layers × 256 (same tokenizer)")
    seconds = {name: min(run_cli(["rl", str(folder / f"{name}.yaml"), "-o", str(folder / name), "--overwrite"])
                         for _ in range(args.repeats)) for name in ("distill", "grpo")}
    sequences = args.steps * 8
    prompts_done = {"distill": sequences, "grpo": sequences // 4}
    tokens = {"distill": sequences * args.completion_tokens}
    logged = [json.loads(line) for line in (folder / "grpo" / "metrics.jsonl").read_text().splitlines()]
    tokens["grpo"] = int(sum(m.get("completions/mean_length", 0) * 8 for m in logged if "reward" in m))
    for name in ("distill", "grpo"):
        print(f"{name:8} {seconds[name]:6.1f} s  {prompts_done[name] / seconds[name]:6.2f} prompts/s  "
              f"{tokens[name] / seconds[name]:8.1f} student tokens/s")
    print(f"ratio distill / grpo: {(prompts_done['distill'] / seconds['distill']) / (prompts_done['grpo'] / seconds['grpo']):.2f}x "
          f"prompts/s, {(tokens['distill'] / seconds['distill']) / (tokens['grpo'] / seconds['grpo']):.2f}x student tokens/s")


if __name__ == "__main__":
    main()
