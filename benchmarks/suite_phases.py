"""Where the default suite's generating and training tests spend their time, in float32 against the CPU's own
precision, in one run: the same test files under pytest twice (or `--repeats` times each, alternating), once with
`SMOLALIGN_CPU_BF16=0` (a CPU without bf16: float32 everywhere, the suite before bf16) and once as `make test` runs
them (bf16 generation and autocast training on a CPU with AMX or AVX512-BF16).

Each test's wall time is split, exclusively, into training steps (transformers' `Trainer.training_step`, less any
generation inside it), generation (transformers' `generate`, vLLM's `LLM.generate` and `LLM.chat`), vLLM engine
starts and model loads; the rest is the test's own work, process starts and imports. It prints, per configuration,
the sums over all tests and over the tests that generation and training dominate (at least half their time in
either configuration), and their ratios against float32.

    python benchmarks/suite_phases.py [--processes 2] [--repeats 1] [FILE ...]

Only in-process work is seen: tests that run smolalign in a child process (the launch, ZeRO-3, sweep and vLLM
server files) count as their own work. Wall times swing by 10-35% by the hour on a shared 2-core machine: compare
configurations from one run.
"""

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ["test_sft_run", "test_po_run", "test_rl_run", "test_distill_run", "test_online_dpo_run", "test_grpo_steps",
         "test_pairs", "test_graded_pairs", "test_eval", "test_chat", "test_resume", "test_tool_rl",
         "test_vllm_generation", "test_vllm_rl", "test_vllm_tools"]
PHASES = ("train", "generate", "engine_start", "load")
CONFIGS = {"float32": {"SMOLALIGN_CPU_BF16": "0"}, "default": {}}

# -- the pytest plugin (`-p suite_phases`): each test's time by phase, written where SUITE_PHASES_OUT names -------

_open: list[list] = []  # [phase, start, time spent in nested phases]
_spent: Counter = Counter()
_tests: dict[str, dict] = {}


def _timed(function, phase: str):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        _open.append([phase, time.perf_counter(), 0.0])
        try:
            return function(*args, **kwargs)
        finally:
            _, start, nested = _open.pop()
            total = time.perf_counter() - start
            _spent[phase] += total - nested
            if _open:
                _open[-1][2] += total

    timed.phase_timed = True
    return timed


def _install() -> None:
    from transformers import PreTrainedModel, Trainer
    from transformers.generation.utils import GenerationMixin

    if getattr(Trainer.training_step, "phase_timed", False):
        return
    Trainer.training_step = _timed(Trainer.training_step, "train")
    GenerationMixin.generate = _timed(GenerationMixin.generate, "generate")
    PreTrainedModel.from_pretrained = classmethod(_timed(PreTrainedModel.from_pretrained.__func__, "load"))
    try:
        import vllm
    except ImportError:
        return
    vllm.LLM.__init__ = _timed(vllm.LLM.__init__, "engine_start")
    vllm.LLM.generate = _timed(vllm.LLM.generate, "generate")
    vllm.LLM.chat = _timed(vllm.LLM.chat, "generate")


def pytest_runtest_protocol(item, nextitem):
    _install()
    _spent.clear()
    item.phase_start = time.perf_counter()


def pytest_runtest_makereport(item, call):
    if call.when == "teardown":
        _tests[item.nodeid] = {"wall": time.perf_counter() - item.phase_start, **_spent}


def pytest_sessionfinish(session):
    if os.environ.get("SUITE_PHASES_OUT"):
        Path(f"{os.environ['SUITE_PHASES_OUT']}.{os.getpid()}.json").write_text(json.dumps(_tests))


# -- the benchmark -----------------------------------------------------------------------------------------------


def run_config(name: str, files: list[str], processes: int, out: Path) -> dict[str, dict]:
    prefix = out / name
    env = {**os.environ, **CONFIGS[name], "OMP_NUM_THREADS": "1", "SUITE_PHASES_OUT": str(prefix),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")]))}
    if not CONFIGS[name]:
        env.pop("SMOLALIGN_CPU_BF16", None)
    parallel = ["-n", str(processes), "--dist", "loadfile"] if processes > 1 else []
    command = [sys.executable, "-m", "pytest", *parallel, "-q", "-p", "suite_phases", *files]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name}: pytest exited {done.returncode}\n{done.stdout[-3000:]}")
    tests: dict[str, dict] = {}
    for part in out.glob(f"{name}.*.json"):
        tests.update(json.loads(part.read_text()))
        part.unlink()
    return tests


def sums(tests: dict[str, dict], chosen) -> dict:
    picked = [tests[t] for t in chosen if t in tests]
    return {"tests": len(picked), "wall_s": round(sum(t["wall"] for t in picked), 1),
            **{f"{p}_s": round(sum(t.get(p, 0.0) for t in picked), 1) for p in PHASES}}


def dominated(runs: dict[str, list[dict]]) -> set[str]:
    """Tests with at least half their time in training and generation in some run of some configuration."""
    return {test for each in runs.values() for tests in each for test, t in tests.items()
            if t.get("train", 0.0) + t.get("generate", 0.0) >= 0.5 * t["wall"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="test files (default: the files that generate or train)")
    parser.add_argument("--processes", type=int, default=2, help="pytest-xdist processes, as make test")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration, alternating")
    args = parser.parse_args()
    files = args.files or [f"tests/integration/{name}.py" for name in FILES]
    runs: dict[str, list[dict]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for name in CONFIGS:
                runs[name].append(run_config(name, files, args.processes, Path(folder)))
    heavy = dominated(runs)
    table = {}
    for name, each in runs.items():
        every = [sums(tests, tests) for tests in each]
        chosen = [sums(tests, heavy) for tests in each]
        table[name] = {"all": {k: statistics.median(s[k] for s in every) for k in every[0]},
                       "dominated": {k: statistics.median(s[k] for s in chosen) for k in chosen[0]}}
    base = table["float32"]
    for row in table.values():
        for group in ("all", "dominated"):
            row[group]["train_and_generate_vs_float32"] = round(
                (row[group]["train_s"] + row[group]["generate_s"])
                / max(base[group]["train_s"] + base[group]["generate_s"], 1e-9), 3)
            row[group]["wall_vs_float32"] = round(row[group]["wall_s"] / max(base[group]["wall_s"], 1e-9), 3)
    print(json.dumps({"machine": platform.processor() or platform.machine(), "processes": args.processes,
                      "repeats": args.repeats, "dominated_tests": sorted(heavy), "configs": table}, indent=1))


if __name__ == "__main__":
    main()
