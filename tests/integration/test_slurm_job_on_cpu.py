"""The script `smolalign launch slurm` writes, run end to end: fake `scontrol` and `srun` start both "nodes" on this
machine, and the real `accelerate launch` of each meets the other at the c10d rendezvous and trains a tiny model
with the recipe's global batch kept over the two processes; a job signalled before its time limit saves, requeues
and resumes with progress each time."""

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from tiny_models import chat_rows, write_jsonl

from smolalign.ports import free_port
from smolalign.runs.metrics import read_metrics

REPO = Path(__file__).resolve().parents[2]

SCONTROL = """#!/bin/bash
[[ $1 == show ]] && printf 'localhost\\nlocalhost\\n'
[[ $1 == requeue ]] && touch "$FAKE_DIR/requeued"
exit 0
"""
SRUN = """#!/bin/bash
# One task per listed node, all of them on this machine.
while [[ $1 == --* ]]; do [[ $1 == --nodelist=* ]] && nodelist=${1#--nodelist=}; shift; done
IFS=, read -ra nodes <<< "$nodelist"
pids=()
# slurmstepd runs each task in a process group of its own (bash's job control gives each background job one)
[[ ${FAKE_PROCTRACK:-cgroup} == pgid ]] && set -m
for rank in "${!nodes[@]}"; do
  # Sharing one machine, every node would claim the rendezvous port: the others start once the first holds it.
  for _ in $(seq 300); do (( rank == 0 )) || (exec 3<> "/dev/tcp/127.0.0.1/$MAIN_PROCESS_PORT") 2> /dev/null && break
    sleep 0.2; done
  SLURM_PROCID=$rank "$@" > "$FAKE_DIR/task$rank.log" 2>&1 & pids+=($!)
done
# As slurmstepd does, a signal to srun reaches every process of the step (proctrack/cgroup: launchers, torchrun's
# workers), or each task's process group only (proctrack/pgid: not the workers, which torchrun starts in sessions
# of their own).
descendants() { local child; for child in $(pgrep -P "$1"); do echo "$child"; descendants "$child"; done; }
forward() {
  for pid in "${pids[@]}"; do
    if [[ ${FAKE_PROCTRACK:-cgroup} == pgid ]]; then kill -"$1" -- -"$pid" 2> /dev/null
    else kill -"$1" "$pid" $(descendants "$pid") 2> /dev/null; fi
  done
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM
status=0
for pid in "${pids[@]}"; do
  while true; do
    code=0; wait "$pid" || code=$?
    if (( code > 128 )) && kill -0 "$pid" 2> /dev/null; then continue; fi  # a trapped signal interrupted wait
    break
  done
  (( code == 0 )) || status=$code
done
exit $status
"""


def fake_slurm(tmp_path: Path) -> Path:
    """A folder holding the fake `scontrol` and `srun`, to put first on the job's PATH."""
    fake = tmp_path / "fake"
    fake.mkdir()
    for name, text in (("scontrol", SCONTROL), ("srun", SRUN)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    return fake


def job_env(fake: Path, **extra: str) -> dict[str, str]:
    """The environment Slurm gives the batch script of a two-node job, with the fakes first on PATH."""
    return {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "FAKE_DIR": str(fake),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "tiny",
            "SLURM_CPUS_ON_NODE": "1", **extra}


@pytest.mark.slow  # about 40 s on 2 CPU cores
@pytest.mark.skipif(torch.cuda.is_available(), reason="two processes on the CPU (gloo); one GPU cannot host both")
def test_two_nodes_train_through_the_generated_script(cli, write_recipe, tiny_dir, tmp_path, monkeypatch):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"stage": "sft", "model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                           "launch": {"global_batch_size": 8},
                           "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2,
                                     "max_steps": 2, "logging_steps": 1, "save_steps": 2,
                                     "gradient_checkpointing": False}})
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("launch", "slurm", recipe, "--nodes", "2", "--gpus-per-node", "1", "--preset", "ddp",
                         "--script", "job.sbatch", "-o", "run", "--main-process-port", str(free_port()))
    assert code == 0, err
    fake = fake_slurm(tmp_path)
    env = job_env(fake)
    job = subprocess.Popen(["bash", "job.sbatch"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        _, stderr = job.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):  # no launcher outlives the test, whatever happened
            os.killpg(job.pid, signal.SIGKILL)
    logs = "\n".join(path.read_text()[-2000:] for path in sorted(fake.glob("task*.log")))
    assert job.returncode == 0, stderr + logs
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["hardware"]["world_size"] == 2 and manifest["result"]["global_step"] == 2
    assert manifest["result"]["resumed_from"] is None  # --resume before any checkpoint: a fresh start
    assert "--resume" in manifest["command"]
    # What the trainer used: 8 = 2 per device × 2 processes × 2 accumulated (its saved TrainingArguments)
    args = torch.load(tmp_path / "run" / "checkpoint-2" / "training_args.bin", weights_only=False)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.world_size) == (2, 2, 2)
    assert [m["step"] for m in read_metrics(tmp_path / "run") if "loss" in m] == [1, 2]


def _wait_for_step(run_dir: Path, past: int, job: subprocess.Popen) -> None:
    while job.poll() is None:
        if any(m["step"] > past for m in read_metrics(run_dir) if "loss" in m):
            return
        time.sleep(0.05)


MAX_STEPS = 60


def unscheduled_saves_job(cli, write_recipe, tiny_dir, tmp_path, monkeypatch) -> Path:
    """job.sbatch in `tmp_path` for a two-node SFT of MAX_STEPS steps that saves only on the signal (save_steps beyond
    them), run directory `run`; returns the folder of the fake Slurm tools."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"stage": "sft", "model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                           "launch": {"global_batch_size": 4},
                           "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": MAX_STEPS,
                                     "logging_steps": 1, "save_steps": 1000, "gradient_checkpointing": False}})
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("launch", "slurm", recipe, "--nodes", "2", "--gpus-per-node", "1", "--preset", "ddp",
                         "--script", "job.sbatch", "-o", "run", "--main-process-port", str(free_port()))
    assert code == 0, err
    return fake_slurm(tmp_path)


@pytest.mark.slow  # about 90 s on 2 CPU cores: three runs of the two-node job
@pytest.mark.skipif(torch.cuda.is_available(), reason="two processes on the CPU (gloo); one GPU cannot host both")
def test_a_job_signalled_before_its_time_limit_saves_requeues_and_progresses(cli, write_recipe, tiny_dir, tmp_path,
                                                                               monkeypatch):
    """Two runs are sent the time-limit USR1 mid-training and the third runs to the end. No save is scheduled
    (save_steps beyond MAX_STEPS): each requeue leaves a newer checkpoint only because the ranks saved on the signal.
    With the save-on-signal callback switched off (not added in stages/lifecycle.py) the first signalled run trains
    to MAX_STEPS and no requeue happens, so this test fails."""
    fake = unscheduled_saves_job(cli, write_recipe, tiny_dir, tmp_path, monkeypatch)
    run_dir = tmp_path / "run"
    saved = [0]
    for restart in range(3):
        env = job_env(fake, SLURM_RESTART_COUNT=str(restart))
        job = subprocess.Popen(["bash", "job.sbatch"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
        try:
            if restart < 2:
                _wait_for_step(run_dir, saved[-1], job)  # training is past where this run resumed
                job.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@N delivers to the batch shell
            _, stderr = job.communicate(timeout=240)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
        logs = "\n".join(path.read_text()[-2000:] for path in sorted(fake.glob("task*.log")))
        assert job.returncode == 0, stderr + logs
        assert (fake / "requeued").exists() == (restart < 2), stderr + logs
        (fake / "requeued").unlink(missing_ok=True)
        if restart < 2:
            newest = max(int(p.name.split("-")[1]) for p in run_dir.glob("checkpoint-*"))
            state = json.loads((run_dir / f"checkpoint-{newest}" / "trainer_state.json").read_text())
            assert saved[-1] < state["global_step"] == newest < MAX_STEPS  # progress, and stopped early
            saved.append(newest)
    result = json.loads((run_dir / "manifest.json").read_text())["result"]
    assert result["global_step"] == MAX_STEPS
    assert result["resumed_from"] == str((run_dir / f"checkpoint-{saved[-1]}").resolve())


@pytest.mark.slow  # about 40 s on 2 CPU cores
@pytest.mark.skipif(torch.cuda.is_available(), reason="two processes on the CPU (gloo); one GPU cannot host both")
def test_under_process_group_tracking_the_signal_still_reaches_the_ranks(cli, write_recipe, tiny_dir, tmp_path,
                                                                         monkeypatch):
    """Where Slurm tracks a step's processes by process group, srun's USR1 reaches each node's task group: the
    launchers, not torchrun's ranks. The job's relay hands it on: the ranks save mid-training and the job requeues.
    Without the relay no rank sees the signal and training runs to MAX_STEPS."""
    fake = unscheduled_saves_job(cli, write_recipe, tiny_dir, tmp_path, monkeypatch)
    run_dir = tmp_path / "run"
    job = subprocess.Popen(["bash", "job.sbatch"], env=job_env(fake, FAKE_PROCTRACK="pgid"), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_step(run_dir, 0, job)
        job.send_signal(signal.SIGUSR1)
        _, stderr = job.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    logs = "\n".join(path.read_text()[-2000:] for path in sorted(fake.glob("task*.log")))
    assert job.returncode == 0 and (fake / "requeued").exists(), stderr + logs
    [checkpoint] = run_dir.glob("checkpoint-*")
    assert 0 < int(checkpoint.name.split("-")[1]) < MAX_STEPS
