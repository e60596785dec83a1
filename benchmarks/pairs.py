"""Pair generation throughput with the transformers backend: batched generation against one prompt at a time, on
the same model, prompts and sampling settings, measured in the same run.

    python benchmarks/pairs.py [--model smollm2-135m-instruct] [--prompts 32] [--batch-size 16] [--max-new-tokens 48]

A pair is one strong (greedy) and one weak (sampled) answer; both sides use the same model here, which is what
matters for the backend's throughput. Prints pairs/s for both and their ratio (batched / one at a time).
"""

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, where benchmarks/rewards.py would shadow the
# `rewards` package that smolalign imports: the folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

os.environ.setdefault("OMP_NUM_THREADS", "2")


def prompts(n: int, seed: int = 0):
    from smolalign.pairs.prompts import Prompt, prompt_key

    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        messages = [{"role": "user", "content": f"What is {a} + {b}? Explain briefly."}]
        out.append(Prompt(prompt_key(messages), messages, f"bench#{i}"))
    return out


def pairs_per_second(model: str, items: list, batch_size: int, max_new_tokens: int) -> tuple[float, float]:
    """(pairs/s, share of answers that ended with the end-of-turn token)."""
    from smolalign.pairs.backends import TransformersGenerator
    from smolalign.recipe.generation_schema import GeneratorSection

    answers, elapsed = [], 0.0
    for side, temperature in (("strong", 0.0), ("weak", 0.7)):
        section = GeneratorSection(source=model, temperature=temperature, max_new_tokens=max_new_tokens,
                                   batch_size=batch_size, template="chatml")
        generator = TransformersGenerator(f"pairs.{side}", section, "chatml", {})
        start = time.perf_counter()
        for i in range(0, len(items), batch_size):
            answers += generator.generate(items[i:i + batch_size], seed=i)
        elapsed += time.perf_counter() - start
        generator.close()
    return len(items) / elapsed, sum(a.finished for a in answers) / len(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    import torch

    from smolalign.models.load import load_tokenizer, local_dir
    from smolalign.models.sources import resolve_source
    from smolalign.recipe.schema import ModelSection

    local_dir(resolve_source(args.model))  # convert a GGUF source once, outside the timings
    load_tokenizer(ModelSection(source=args.model), "chatml")
    items = prompts(args.prompts)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"torch {torch.__version__}, cuda={torch.cuda.is_available()}; python {sys.version.split()[0]}")
    print(f"model {args.model}, {args.prompts} prompts, max_new_tokens {args.max_new_tokens}; generation time only (model loading excluded)")
    one, finished_one = pairs_per_second(args.model, items, 1, args.max_new_tokens)
    print(f"one prompt at a time: {one:.3f} pairs/s ({finished_one:.0%} of answers ended their turn)")
    batched, finished_batched = pairs_per_second(args.model, items, args.batch_size, args.max_new_tokens)
    print(f"batched ({args.batch_size}):         {batched:.3f} pairs/s ({finished_batched:.0%} of answers ended their turn)")
    print(f"ratio batched / one at a time: {batched / one:.2f}")


if __name__ == "__main__":
    main()
