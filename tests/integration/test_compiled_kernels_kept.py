"""What a run compiles outlives it: a train command points TorchInductor's and Triton's caches under
SMOLALIGN_CACHE/compile, where the next run, another job or a requeue finds flex attention's kernels, instead of
torch's default torchinductor_<user> in the system's temporary directory, which a container or a Slurm job's
private temporary directory loses. The default tier reads the cache folder torch itself resolves in a real command's
process; the slow tier compiles (`train.torch_compile: true`, TorchInductor's C++ backend on a CPU) and finds the
compiled graphs there, with the precompiled C++ header torch would have left in the job's temporary directory."""

import os
import subprocess
import sys

import pytest
from tiny_models import chat_rows, write_jsonl

CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
REPORT = """
import atexit, os, runpy, sys
def report():
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    print("INDUCTOR " + cache_dir()); print("TRITON " + os.environ.get("TRITON_CACHE_DIR", ""))
atexit.register(report)
sys.argv = ["smolalign"] + sys.argv[1:]
runpy.run_module("smolalign", run_name="__main__")
"""


def smolalign(tmp_path, recipe, *args, verb="sft", **environment) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name not in CACHE_VARIABLES}
    env["SMOLALIGN_CACHE"] = str(tmp_path / "cache")
    env.update(environment)
    return subprocess.run([sys.executable, "-c", REPORT, verb, str(recipe), "-o", str(tmp_path / "run"), *args],
                          env=env, capture_output=True, text=True, timeout=900)


def sft_recipe(write_recipe, tiny_dir, tmp_path, evaluated=False, **train):
    """An SFT recipe (`evaluated`: with the eval: section a sweep needs)."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": "what is 1 plus 1", "solution": "2"}])
    evaluation = {"eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": "math_accuracy"}]}}
    return write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                         "data": {"sources": [{"path": str(data)}]},
                         "train": {"max_length": 128, "packing": "bfd", "per_device_train_batch_size": 2,
                                   "max_steps": 1, "gradient_checkpointing": False, **train},
                         **(evaluation if evaluated else {})})


@pytest.mark.parametrize(("verb", "args"), [("sft", ()), ("sweep", ("--grid", "train.learning_rate=1e-4,2e-4"))])
def test_a_train_commands_compile_caches_are_under_smolalign_cache(write_recipe, tiny_dir, tmp_path, verb, args):
    """sweep too: a Slurm array task (`--array-task`) trains its cell in the sweep command's own process."""
    done = smolalign(tmp_path, sft_recipe(write_recipe, tiny_dir, tmp_path, evaluated=verb == "sweep"), *args,
                     "--dry-run", verb=verb)
    assert done.returncode == 0, done.stderr[-3000:]
    reported = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("INDUCTOR ", "TRITON ")))
    assert reported == {"INDUCTOR": str(tmp_path / "cache" / "compile" / "inductor"),
                        "TRITON": str(tmp_path / "cache" / "compile" / "triton")}


@pytest.mark.slow
def test_a_runs_compiled_graphs_land_in_smolalign_cache(write_recipe, tiny_dir, tmp_path):
    """The job's temporary directory is its own, as in a container or a Slurm job: nothing compiled stays there, the
    precompiled C++ header that TorchInductor keeps under it by default included."""
    job_tmp = tmp_path / "job-tmp"
    job_tmp.mkdir()
    done = smolalign(tmp_path, sft_recipe(write_recipe, tiny_dir, tmp_path, torch_compile=True), TMPDIR=str(job_tmp))
    assert done.returncode == 0, done.stderr[-3000:]
    inductor = tmp_path / "cache" / "compile" / "inductor"
    compiled = [p for p in inductor.rglob("*") if p.is_file()]
    assert compiled, "nothing compiled landed in SMOLALIGN_CACHE/compile/inductor"
    assert list((inductor / "precompiled_headers").glob("*.gch")), "the precompiled header is not with the kernels"
    assert not list(job_tmp.rglob("*.gch")), "a precompiled header was left in the job's temporary directory"
