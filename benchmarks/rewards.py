"""Reward throughput: the math reward (completions/s) and the code reward (sandboxed executions/s), each with one
worker and with every core, measured in the same run and printed as ratios.

    python benchmarks/rewards.py [--completions 2000] [--programs 64]

Targets: math at least 500 completions/s per core; code at least 20 executions/s per core for a small test suite.
The math reward runs in one process per worker (math-verify is CPU-bound Python); the code reward's pool runs one
sandboxed process per execution.
"""

import argparse
import os
import platform
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, and its name would shadow the `rewards`
# package it measures.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

CODE_TASK = "def add(a, b):\n    return a + b\n"


def math_completions(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    completions, golds = [], []
    for i in range(n):
        a, b = rng.randint(1, 999), rng.randint(1, 999)
        answer = a + b if i % 3 else a + b + 1
        form = i % 4
        text = {0: f"We add {a} and {b}, so the answer is {answer}.",
                1: f"<think>\n{a} + {b}: add the units first.\n</think>\nThe result is $\\boxed{{{answer}}}$.",
                2: f"{a} + {b} = {answer}",
                3: f"The sum is \\frac{{{2 * answer}}}{{2}}."}[form]
        completions.append(text)
        golds.append(str(a + b))
    return completions, golds


def _math_chunk(chunk: tuple[list[str], list[str]]) -> int:
    from rewards.math import MathAccuracy

    reward = MathAccuracy()
    return sum(1 for s in reward(chunk[0], solution=chunk[1]) if s is not None)


def math_rate(completions: list[str], golds: list[str], workers: int) -> float:
    chunks = [(completions[i::workers], golds[i::workers]) for i in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_math_chunk, [(c[:5], g[:5]) for c, g in chunks]))  # warm up imports in every worker
        start = time.perf_counter()
        scored = sum(pool.map(_math_chunk, chunks))
        elapsed = time.perf_counter() - start
    assert scored == len(completions)
    return len(completions) / elapsed


def code_rate(programs: int, workers: int) -> tuple[float, str]:
    from rewards.code import score_assert_tests
    from rewards.sandbox import Pool, choose_level

    tests = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(10, 5) == 15"]
    with Pool(workers=workers) as pool:
        start = time.perf_counter()
        scores = [score_assert_tests(CODE_TASK, tests, pool) for _ in range(programs // len(tests))]
        elapsed = time.perf_counter() - start
    assert all(s == 1.0 for s in scores), scores
    return len(scores) * len(tests) / elapsed, choose_level()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=2000)
    parser.add_argument("--programs", type=int, default=96, help="sandboxed executions per measurement")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"machine: {platform.machine()}, {cores} cores; python {sys.version.split()[0]}")
    completions, golds = math_completions(args.completions)
    one = math_rate(completions, golds, 1)
    many = math_rate(completions, golds, cores)
    print(f"math_accuracy: 1 worker {one:,.0f} completions/s; {cores} workers {many:,.0f}/s "
          f"({many / cores:,.0f}/s per core); ratio {many / one:.2f} (target >= 500/s per core)")
    one_code, level = code_rate(args.programs, 1)
    many_code, _ = code_rate(args.programs, cores)
    print(f"code (sandbox {level}, 3 asserts per program, one execution per assert): 1 worker {one_code:.1f} "
          f"executions/s; {cores} workers {many_code:.1f}/s ({many_code / cores:.1f}/s per core); ratio "
          f"{many_code / one_code:.2f} (target >= 20/s per core)")


if __name__ == "__main__":
    main()
