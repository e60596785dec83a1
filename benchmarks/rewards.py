"""Reward throughput: the math reward (completions/s) and the code reward (sandboxed executions/s), each with one
worker and with every core, measured in the same run and printed as ratios.

    python benchmarks/rewards.py [--completions 2000] [--programs 96] [--only math|code] [--level auto|bwrap|unshare]
                                [--repeat 3]

Targets: math at least 500 completions/s per core; code at least 100 executions/s per core. The math reward runs in
one process per worker (math-verify is CPU-bound Python). The code worker pool is measured with 1 worker, one per core
and its default (two per core); the baseline with 1 and one per core. The code reward scores fenced completions of realistic size
(benchmarks/code_tasks.py: functions with four asserts and stdin/stdout programs with four tests, a quarter of them
wrong, one in 48 never ending on one test) through `CodeReward`, one batch per call as in training, with the worker
pool and, in the same run, with the previous implementation (benchmarks/sandbox_baseline.py: one namespace set-up and
two interpreter starts per execution); both must give the same scores.
"""

import argparse
import json
import os
import platform
import random
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, and its name would shadow the `rewards`
# package it measures.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.append(str(Path(__file__).resolve().parent))  # after the package: for code_tasks and sandbox_baseline

CODE_LIMITS = {"cpu_seconds": 1, "wall_seconds": 1}  # a hung program costs a worker one second


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


def code_batch(programs: int, hanging: bool = True) -> tuple[list[str], list[str], int, int]:
    """(completions, test column, executions, executions that time out); without the hanging programs if not
    `hanging`."""
    from code_tasks import HANGS
    from code_tasks import programs as make_programs

    chosen = [(source, tests) for source, tests in make_programs(programs) if hanging or source != HANGS]
    completions = [f"Here is my solution.\n```python\n{source}```\n" for source, _ in chosen]
    hanging = sum(source == HANGS for source, _ in chosen)
    return completions, [json.dumps(tests) for _, tests in chosen], sum(len(t) for _, t in chosen), hanging


def code_rate(batch, workers: int, baseline: bool, level: str, repeat: int = 1) -> tuple[float, float, list, str]:
    """(executions/s, CPU seconds per execution of this process and every sandbox process, scores, sandbox level) for
    scoring the batch with `workers` workers: the fastest of `repeat` passes over the batch, as timeit keeps the
    minimum (on a shared machine the slower passes measure the neighbours)."""
    from rewards.code import CodeReward

    completions, tests, executions, _ = batch
    reward = CodeReward(workers=workers, limits=CODE_LIMITS, level=level)
    if baseline:
        import sandbox_baseline

        reward.pool.close()
        reward.pool = sandbox_baseline.Pool(workers, reward.pool.limits, reward.pool.level)
    try:
        reward(completions[:workers], test_cases=tests[:workers])  # start the workers (the baseline has none)
        passes = []
        for _ in range(repeat):
            cpu_before = _cpu_seconds(reward.pool)
            start = time.perf_counter()
            scores = reward(completions, test_cases=tests)
            passes.append((time.perf_counter() - start, _cpu_seconds(reward.pool) - cpu_before))
    finally:
        reward.close()
    assert all(s is not None for s in scores), scores
    elapsed, cpu = min(passes)
    return executions / elapsed, cpu / executions, scores, reward.pool.level


def _cpu_seconds(pool) -> float:
    """CPU time used so far by this process and the worker pool's process trees (each worker's reaped executions are
    in its children's times). Unlike wall time, this does not depend on how busy the shared machine is. (Not for the
    baseline: its sandboxes die killed, unreaped by their parents, and take their times with them.)"""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [worker.proc.pid for worker in getattr(pool, "_all", []) if worker.proc is not None]
    while pending:
        pid = pending.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += sum(int(value) for value in fields[11:15]) / ticks  # utime, stime, cutime, cstime
            for task in os.listdir(f"/proc/{pid}/task"):
                pending += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except OSError:
            pass  # it exited meanwhile
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=2000)
    parser.add_argument("--programs", type=int, default=96, help="code completions per measurement (4 tests each)")
    parser.add_argument("--only", choices=("math", "code"))
    parser.add_argument("--repeat", type=int, default=3, help="passes over the code batch per measurement; the "
                        "fastest is kept")
    parser.add_argument("--level", default="auto", help="sandbox level for the code reward (default: the strongest)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    load_before = f"{os.getloadavg()[0]:.2f}"
    print(f"machine: {platform.machine()}, {cores} cores; python {sys.version.split()[0]}")
    if args.only in (None, "math"):
        completions, golds = math_completions(args.completions)
        one = math_rate(completions, golds, 1)
        many = math_rate(completions, golds, cores)
        print(f"math_accuracy: 1 worker {one:,.0f} completions/s; {cores} workers {many:,.0f}/s "
              f"({many / cores:,.0f}/s per core); ratio {many / one:.2f} (target >= 500/s per core)")
    if args.only in (None, "code"):
        from rewards.sandbox import WORKERS_PER_CORE

        pooled = WORKERS_PER_CORE * cores  # the pool's default
        batch = code_batch(args.programs)
        rates, cpu, level, expected = {}, {}, None, None
        for baseline, counts in ((False, (1, cores, pooled)), (True, (1, cores))):
            for workers in counts:
                rates[baseline, workers], cpu[baseline, workers], scores, level = code_rate(batch, workers, baseline,
                                                                                           args.level, args.repeat)
                expected = expected or scores
                assert scores == expected, "the baseline and the worker pool disagree"
        print(f"code (sandbox {level}; {args.programs} programs, {batch[2]} executions, {batch[3]} timing out; "
              f"mean score {sum(expected) / len(expected):.3f}; fastest of {args.repeat} passes each):")
        one, many = rates[True, 1], rates[True, cores]
        print(f"  baseline (one sandbox per execution): 1 worker {one:.1f} executions/s; {cores} workers {many:.1f}/s "
              f"({many / cores:.1f}/s per core)")
        one, many, default = rates[False, 1], rates[False, cores], rates[False, pooled]
        print(f"  worker pool: 1 worker {one:.1f} executions/s; {cores} workers {many:.1f}/s ({many / cores:.1f}/s "
              f"per core); {pooled} workers (the default) {default:.1f}/s ({default / cores:.1f}/s per core)")
        for workers in (cores, pooled):
            print(f"  worker pool CPU time with {workers} workers (this process and every sandbox process, independent "
                  f"of the machine's load): {cpu[False, workers] * 1000:.1f} ms per execution, i.e. "
                  f"{1 / cpu[False, workers]:.0f} executions per CPU-second")
        steady = code_batch(args.programs, hanging=False)
        for workers in (cores, pooled):
            rate, steady_cpu, _, _ = code_rate(steady, workers, False, args.level, args.repeat)
            print(f"  worker pool without the {batch[3]} hanging programs ({steady[2]} executions): {workers} workers "
                  f"{rate:.1f}/s ({rate / cores:.1f}/s per core); CPU {steady_cpu * 1000:.1f} ms per execution, i.e. "
                  f"{1 / steady_cpu:.0f} per CPU-second")
        print(f"  worker pool / baseline: {rates[False, 1] / rates[True, 1]:.1f}x with 1 worker, "
              f"{rates[False, cores] / rates[True, cores]:.1f}x with {cores}, {default / rates[True, cores]:.1f}x with "
              f"the default {pooled} against the baseline's {cores} (target >= 100 executions/s per core)")
        print(f"  load average before/after: {load_before} / {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
