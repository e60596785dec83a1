"""benchmarks/step_profile.py explains a benchmark's rate from inside the same run: the steps it names are profiled in
a real transformers Trainer started with the children's own preamble (benchmarks/gpu_sft.py), and what it reports
is what those steps did. The expectations come from the training script written here: a forward that waits on a
value once per call, a known step count."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

TRAIN = """
import torch
from transformers import Trainer, TrainingArguments

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1024, 1024)  # wide enough that its matmuls outweigh the loop around them
        self.calls, self.profiled = 0, []

    def forward(self, x, labels):
        self.calls += 1  # one forward a step: the call number is the step number
        if torch._C._autograd._profiler_enabled():
            self.profiled.append(self.calls)
        out = self.layer(x)
        scale = (out.detach().abs().mean() > -1).item()  # one host wait a forward, on purpose
        return {"loss": ((out - labels) ** 2).mean() * scale}

class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return 512

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(1024, generator=g), "labels": torch.randn(1024, generator=g)}

args = TrainingArguments(output_dir=sys.argv[1], max_steps=5, per_device_train_batch_size=64, logging_steps=1,
                         report_to="none", save_strategy="no", use_cpu=True, max_grad_norm=0)
model = Model()
Trainer(model=model, args=args, train_dataset=Rows()).train()
print("PROFILED_STEPS", model.profiled)
"""


@pytest.fixture(scope="module")
def benchmarks():
    saved = list(sys.path)
    sys.path.append(str(BENCHMARKS))
    try:
        yield importlib.import_module("gpu_sft"), importlib.import_module("step_profile")
    finally:
        sys.path[:] = saved


def test_the_named_steps_of_a_real_trainer_are_profiled_and_summed(benchmarks, tmp_path):
    gpu_sft, step_profile = benchmarks
    tables = tmp_path / "profile.md"
    env = {"BENCH_PROFILE": str(tables), "BENCH_PROFILE_STEPS": "2-4", "OMP_NUM_THREADS": "1"}
    out = gpu_sft.run_child([sys.executable, "-c", gpu_sft.CHILD_PREAMBLE + TRAIN, str(tmp_path / "run")],
                            {**os.environ, **env}, timeout=240)
    summary = step_profile.profile_of(out)
    assert summary is not None, out[-2000:]
    assert "PROFILED_STEPS [2, 3, 4]" in out  # the steps that ran under the profiler, as the training saw them
    assert summary["steps"] == 3
    assert summary["syncs"].get("aten::_local_scalar_dense", 0) >= 3  # the forward's .item(), once a profiled step
    assert summary["device_busy_share"] is None  # no device on this machine
    host = dict(summary["top_host"])
    assert any(name in host for name in ("aten::addmm", "aten::mm", "aten::linear")), host
    assert 0 < summary["wall_s_per_step"] < 10
    text = tables.read_text()
    assert "Host operations by their own time" in text
    assert json.loads(text.split("```json\n", 1)[1].split("```", 1)[0]) == summary


def test_without_the_variable_nothing_is_profiled(benchmarks, tmp_path):
    gpu_sft, step_profile = benchmarks
    env = {name: value for name, value in os.environ.items() if not name.startswith("BENCH_PROFILE")}
    out = gpu_sft.run_child([sys.executable, "-c", gpu_sft.CHILD_PREAMBLE + TRAIN, str(tmp_path / "run")],
                            {**env, "OMP_NUM_THREADS": "1"}, timeout=240)
    assert step_profile.profile_of(out) is None
    assert "PROFILED_STEPS []" in out


@pytest.mark.parametrize(("text", "steps"), [("2-3", (2, 3)), ("4", (4, 4))])
def test_the_steps_are_read_as_written(benchmarks, text, steps):
    assert benchmarks[1].parse_steps(text) == steps


@pytest.mark.parametrize("text", ["0-2", "3-2", "x"])
def test_steps_that_cannot_be_profiled_are_refused(benchmarks, text):
    with pytest.raises(ValueError):
        benchmarks[1].parse_steps(text)


def test_a_profile_that_fails_leaves_the_run_to_train(benchmarks, tmp_path):
    """Its tables cannot be written (no such folder): the run still trains every step and exits 0, saying why."""
    gpu_sft, step_profile = benchmarks
    env = {**os.environ, "BENCH_PROFILE": str(tmp_path / "missing" / "profile.md"), "BENCH_PROFILE_STEPS": "2-3",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", gpu_sft.CHILD_PREAMBLE + TRAIN, str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'train_runtime'" in done.stdout and "'epoch'" in done.stdout  # the trainer's closing log line
    assert step_profile.profile_of(done.stdout) is None
    assert done.stderr.count(step_profile.PROFILE_FAILED + "FileNotFoundError") == 1
