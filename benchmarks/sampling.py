"""What smolalign's CPU sampling is worth (smolalign/generation/nucleus.py, draw.py, vllm_cpu_sampler.py,
transformers_sampler.py), in one run on the quickstart's SFT model, through smolalign's own generators
(pairs.backends) in the precision it picks on this CPU: each engine with its library's own sampler (transformers'
sort for top-p; vLLM's `TopKTopPSampler.forward_cpu`), then with smolalign's, on the quickstart's evaluation step (64
held-out questions, think mode, temperature 0.6, top-p 0.95, a seed per prompt, 40 new tokens, 32 sequences at a
time).

    python benchmarks/sampling.py [--threads 2]

Needs runs/quickstart/sft/model (make quickstart). Prints one JSON line per engine: answers per second with each
sampler, their ratio, and how many answers are identical under both: the nucleus is the same, the draw another random
stream (one uniform number a token instead of an exponential for every word), so sampled answers differ where a draw
does.
"""

import argparse
import contextlib
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

    rows = [json.loads(line) for line in
            (ROOT / "recipes/quickstart/data/arithmetic_eval.jsonl").read_text().splitlines()]
    return [Prompt(f"q{i}", row["prompt"] if isinstance(row["prompt"], list)
                   else [{"role": "user", "content": row["prompt"]}], "arithmetic_eval.jsonl")
            for i, row in enumerate(rows[:n])]


@contextlib.contextmanager
def library_sampler(backend: str):
    """The engine's own sampler: smolalign's replacements switched off while the generator is built and runs."""
    import smolalign.generation.vllm_engine as vllm_engine
    import smolalign.pairs.backends as backends

    saved = backends.fast_sampling, vllm_engine.fast_cpu_sampling
    backends.fast_sampling = vllm_engine.fast_cpu_sampling = lambda accelerator: contextlib.nullcontext()
    try:
        yield
    finally:
        backends.fast_sampling, vllm_engine.fast_cpu_sampling = saved


def run(backend: str, step: dict, prompts: list, own: bool) -> tuple[float, list]:
    from smolalign.pairs.backends import make_generator
    from smolalign.recipe.generation_schema import GeneratorSection

    section = GeneratorSection(source="runs/quickstart/sft/model", backend=backend, temperature=step["temperature"],
                               top_p=step["top_p"], max_new_tokens=step["max_new_tokens"], batch_size=step["batch"],
                               think=step["think"])
    with library_sampler(backend) if own else contextlib.nullcontext():
        made = make_generator("bench", section, "smollm3", {})
        made.sample(prompts[:1], 0, step["k"])  # warm-up
        start = time.perf_counter()
        answers = made.sample(prompts, 1, step["k"])
        seconds = time.perf_counter() - start
        made.close()
    return seconds, [a.text for group in answers for a in group]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from smolalign.hardware import cpu_computes_bf16

    torch.set_num_threads(args.threads)
    if not (ROOT / "runs/quickstart/sft/model").is_dir():
        sys.exit("needs runs/quickstart/sft/model: run make quickstart (or smolalign sft quickstart/sft) first")
    print(json.dumps({"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                      "threads": args.threads, "cpu_bf16": cpu_computes_bf16()}))
    step = dict(temperature=0.6, top_p=0.95, max_new_tokens=40, batch=32, k=1, think=True)
    prompts = questions(64)
    for backend in ("transformers", "vllm"):
        own_s, own_answers = run(backend, step, prompts, own=True)
        ours_s, our_answers = run(backend, step, prompts, own=False)
        identical = sum(a == b for a, b in zip(own_answers, our_answers, strict=True))
        print(json.dumps({"engine": backend, "library_answers_per_s": round(len(prompts) / own_s, 2),
                          "smolalign_answers_per_s": round(len(prompts) / ours_s, 2),
                          "speedup": round(own_s / ours_s, 2), "identical_answers": f"{identical}/{len(prompts)}"}),
              flush=True)


if __name__ == "__main__":
    main()
