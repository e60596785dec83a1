"""vLLM's CPU build against transformers `generate`, side by side in one run on the bundled SmolLM2-135M-Instruct, for
the three generation steps smolalign runs: evaluation (greedy answers to held-out questions), pair generation (N
sampled answers per prompt, as graded pairs draw them) and one GRPO generation step (the quickstart's: 4 prompts ×
8 sampled completions of at most 16 tokens). Each side goes through smolalign's own generators (pairs.backends), in
the same precision; the engine's start (import and load) is timed apart from its generation.

    python benchmarks/vllm_cpu.py [--prompts 32] [--threads 2] [--precision float32|bfloat16|both]

Each precision is the one smolalign picks with the CPU's bf16 reading forced (SMOLALIGN_CPU_BF16): float32, and
bfloat16 (a CPU with AMX or AVX512-BF16; elsewhere torch emulates it, slower).

Prints one JSON line per step and precision with both engines' rates and their ratio (vLLM / transformers), then one
line per step comparing each engine's bfloat16 rate with its float32 rate.
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def questions(n: int) -> list:
    from smolalign.pairs.prompts import Prompt

    rows = [json.loads(line) for line in (ROOT / "recipes/quickstart/data/arithmetic_eval.jsonl").read_text().splitlines()]
    prompts = []
    for i, row in enumerate(rows[:n]):
        messages = row["prompt"] if isinstance(row["prompt"], list) else [{"role": "user", "content": row["prompt"]}]
        prompts.append(Prompt(f"q{i}", messages, "arithmetic_eval.jsonl"))
    return prompts


def generator(backend: str, temperature: float, max_new_tokens: int, batch_size: int):
    from smolalign.pairs.backends import make_generator
    from smolalign.recipe.generation_schema import GeneratorSection

    section = GeneratorSection(source="smollm2-135m-instruct", backend=backend, temperature=temperature,
                               max_new_tokens=max_new_tokens, batch_size=batch_size, think=False)
    start = time.perf_counter()
    made = make_generator("bench", section, "smollm3", {})
    return made, time.perf_counter() - start


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    out = function()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=("float32", "bfloat16", "both"), default="both")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    prompts = questions(args.prompts)
    steps = {
        "eval (greedy, 40 new tokens)": dict(temperature=0.0, max_new_tokens=40, k=1, batch=len(prompts)),
        "pairs (4 samples per prompt, T=1, 40 new tokens)": dict(temperature=1.0, max_new_tokens=40, k=4, batch=8),
        "GRPO generation step (4 prompts x 8, T=1, 16 new tokens)": dict(temperature=1.0, max_new_tokens=16, k=8,
                                                                         batch=4, prompts=4),
    }
    from smolalign.hardware import CPU_BF16_VARIABLE, cpu_computes_bf16

    print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} cores", "threads": args.threads,
                      "torch": torch.__version__, "cpu_bf16": cpu_computes_bf16()}))
    precisions = ("float32", "bfloat16") if args.precision == "both" else (args.precision,)
    rates: dict = {}
    for name, step in steps.items():
        for precision in precisions:
            os.environ[CPU_BF16_VARIABLE] = "1" if precision == "bfloat16" else "0"
            rates[name, precision] = measure(name, step, prompts, precision)
        if len(precisions) == 2:
            print(json.dumps({"step": name, **{f"{backend}_bf16_over_float32": round(
                rates[name, "bfloat16"][backend]["answers_per_s"] / rates[name, "float32"][backend]["answers_per_s"], 2)
                for backend in ("transformers", "vllm")}}), flush=True)


def measure(name: str, step: dict, prompts: list, precision: str) -> dict:
    """Both engines on one step in one precision: one JSON line, returned as a dict."""
    chosen = prompts[:step.get("prompts", len(prompts))]
    result = {"step": name, "precision": precision, "prompts": len(chosen), "samples": step["k"]}
    for backend in ("transformers", "vllm"):
        made, load = generator(backend, step["temperature"], step["max_new_tokens"], step["batch"])
        made.sample(chosen[:1], 0, step["k"])  # warm-up
        seconds, answers = timed(lambda made=made, chosen=chosen, k=step["k"]: made.sample(chosen, 1, k))
        tokens = sum(a.tokens for group in answers for a in group)
        result[backend] = {"load_s": round(load, 2), "seconds": round(seconds, 3),
                           "answers_per_s": round(len(chosen) * step["k"] / seconds, 2),
                           "tokens_per_s": round(tokens / seconds, 1)}
        made.close()
    result["vllm_over_transformers"] = round(result["vllm"]["answers_per_s"] /
                                             result["transformers"]["answers_per_s"], 2)
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
