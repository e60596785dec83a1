"""Whether training learns at full precision's pace in each precision smolalign can train in, in one run: the SFT loss
at each step of `smolalign sft` (the real CLI, one child process a configuration) against float32 master weights.

    python benchmarks/update_precision.py [--model wide|bundled|PATH] [--steps 30] [--lr 1e-5] [--threads 2]
        [--configs NAME ...] [--tokens 256] [--batch 4] [--one-batch]

Configurations (every one from the same weights and data, in the same order):
- `float32 masters`: `model.dtype: auto` on a bf16 CPU (float32 weights and AdamW, bf16 autocast), the reference.
  Every configuration runs with SMOLALIGN_CPU_BF16=1, so a CPU without native bf16 (torch emulates it) trains in the
  same precisions as one with AMX, only slower.
- `float32`: `model.dtype: float32`, every part float32.
- `bfloat16, stochastic rounding`: `model.dtype: bfloat16`, smolalign's default for bf16 weights (a GPU's `auto`):
  AdamW rounding each update into the weights stochastically (stages/stochastic_rounding.py).
- `bfloat16, plain AdamW`: the same weights with torch's AdamW, as before the compensation (the child switches it off).

Models: `wide` is tests/tiny_models.py's Llama at 384 wide (2 layers, the narrowest width a bf16 CPU computes in bf16),
random; `bundled` is the bundled SmolLM2-135M-Instruct (trained weights); or a model directory. Data: the tests'
chat rows (sums in think and no_think), packed (BFD) to `--tokens` (256), `--batch` (4) rows a step. Prints one JSON line per
configuration (losses at steps 1, 10, 20, 30 and the last, seconds per step) and each one's last loss over the
reference's; the issue's bar is within 2% on a CPU.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

CONFIGS = {"float32 masters": ("auto", True), "float32": ("float32", True),
           "bfloat16, stochastic rounding": ("bfloat16", True), "bfloat16, plain AdamW": ("bfloat16", False)}


def wide_model(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import build_model, build_tokenizer

    build_model(folder, build_tokenizer(folder), hidden=384, heads=6, kv_heads=2)
    return folder


def model_dir(name: str, folder: Path) -> str:
    if name == "wide":
        return str(wide_model(folder / "wide"))
    if name == "bundled":
        from smolalign.models.load import local_dir
        from smolalign.models.sources import resolve_source

        return str(local_dir(resolve_source("smollm2-135m-instruct")))
    return name


def recipe(folder: Path, model: str, dtype: str, args) -> Path:
    import yaml

    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import chat_rows, write_jsonl

    data = write_jsonl(folder / "chat.jsonl", chat_rows(256))
    path = folder / f"sft-{dtype}.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"source": model, "dtype": dtype}, "template": {"name": "smollm3"},
        "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": args.tokens, "packing": "bfd", "per_device_train_batch_size": args.batch,
                  "max_steps": args.steps, "learning_rate": args.lr, "lr_scheduler_type": "constant",
                  "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False, "seed": 0}}))
    return path


def child(recipe_path: str, run_dir: str, kept: bool) -> None:
    """One configuration, in this process: `smolalign sft`, with the compensation switched off where asked."""
    import smolalign.stages.lifecycle as lifecycle
    from smolalign.cli import main

    if not kept:
        lifecycle.keep_low_precision_updates = lambda trainer: False
    try:
        main(["sft", recipe_path, "-o", run_dir])
    except SystemExit as exc:
        if exc.code:
            raise


def one_batch(model: str, steps: int = 4) -> None:
    """AdamW steps at lr 1e-5 on one batch of 64 random tokens, the loss before each: float32, float32 masters under
    bf16 autocast, bf16 weights with Kahan summation (optimi's AdamW, when installed), plain torch AdamW, and
    smolalign's stochastic rounding. Seconds, not the 30 SFT steps' half hour, on an emulated-bf16 CPU."""
    import contextlib

    import torch
    from transformers import AutoModelForCausalLM

    from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW

    ids = torch.randint(0, 49152, (1, 64), generator=torch.Generator().manual_seed(0))

    def kahan(params):
        from optimi import AdamW

        return AdamW(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, kahan_sum=True)

    plain = lambda params: torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0)  # noqa: E731
    runs = {"float32": (torch.float32, False, plain), "float32 masters, bf16 autocast": (torch.float32, True, plain),
            "bf16 + Kahan (optimi)": (torch.bfloat16, False, kahan), "bf16, plain AdamW": (torch.bfloat16, False, plain),
            "bf16, stochastic rounding": (torch.bfloat16, False, lambda p: StochasticRoundingAdamW(p, lr=1e-5))}
    for name, (dtype, mixed, make) in runs.items():
        weights = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        weights.train()
        try:
            optimizer = make(weights.parameters())
        except ImportError:
            print(f"{name:>32}: not installed")
            continue
        seen = []
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.bfloat16) if mixed else contextlib.nullcontext():
                loss = weights(input_ids=ids, labels=ids).loss
            seen.append(round(loss.item(), 3))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"{name:>32}: {' -> '.join(map(str, seen))}", flush=True)


def losses(run_dir: Path) -> list[float]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row["loss"] for row in rows if "loss" in row]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="wide")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS),
                        help="a subset (the reference, float32 masters, is float32 itself where it is left out)")
    parser.add_argument("--tokens", type=int, default=256, help="max_length of the packed rows")
    parser.add_argument("--batch", type=int, default=4, help="packed rows a step")
    parser.add_argument("--child", nargs=3, metavar=("RECIPE", "RUN_DIR", "KEPT"))
    parser.add_argument("--one-batch", action="store_true", help="four AdamW steps on one batch in each precision")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2] == "1")
        return
    if args.one_batch:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        with tempfile.TemporaryDirectory() as tmp:
            one_batch(model_dir(args.model, Path(tmp)))
        return
    # SMOLALIGN_CPU_BF16=1: a CPU without native bf16 (torch emulates it, slower) trains in the same precisions as
    # one with AMX, so the comparison is the same on every CPU; only its speed differs.
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(ROOT), "SMOLALIGN_CPU_BF16": "1"}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = model_dir(args.model, folder)
        for name in args.configs:
            dtype, kept = CONFIGS[name]
            run_dir = folder / name.replace(" ", "_").replace(",", "").replace("+", "")
            start = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--child", str(recipe(folder, model, dtype, args)),
                            str(run_dir), "1" if kept else "0"], env=env, check=True, capture_output=True)
            seconds = time.perf_counter() - start
            curve = losses(run_dir)
            results[name] = curve
            print(json.dumps({"config": name, "model": args.model, "steps": len(curve), "lr": args.lr,
                              "loss": {str(i): round(curve[i - 1], 4) for i in (1, 10, 20, 30) if i <= len(curve)},
                              "last": round(curve[-1], 4), "wall_s": round(seconds, 1)}), flush=True)
    reference = results.get("float32 masters", results.get("float32"))[-1]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.threads} threads")
    for name, curve in results.items():
        print(f"{name:>24}: last loss {curve[-1]:.4f}, {curve[-1] / reference:.4f}x the reference's")


if __name__ == "__main__":
    main()
