"""The script `smolalign launch slurm` writes, run end to end: fake `scontrol` and `srun` start both "nodes" on this
machine, and the real `accelerate launch` of each meets the other at the c10d rendezvous and trains a tiny model
with the recipe's global batch kept over the two processes."""

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from tiny_models import chat_rows, write_jsonl

from smolalign.launch import free_port
from smolalign.runs.metrics import read_metrics

REPO = Path(__file__).resolve().parents[2]

SCONTROL = """#!/bin/bash
[[ $1 == show ]] && printf 'localhost\\nlocalhost\\n'
"""
SRUN = """#!/bin/bash
# One task per listed node, all of them on this machine.
while [[ $1 == --* ]]; do [[ $1 == --nodelist=* ]] && nodelist=${1#--nodelist=}; shift; done
IFS=, read -ra nodes <<< "$nodelist"
pids=()
for rank in "${!nodes[@]}"; do
  # Sharing one machine, every node would claim the rendezvous port: the others start once the first holds it.
  for _ in $(seq 300); do (( rank == 0 )) || (exec 3<> "/dev/tcp/127.0.0.1/$MAIN_PROCESS_PORT") 2> /dev/null && break
    sleep 0.2; done
  SLURM_PROCID=$rank "$@" > "$FAKE_DIR/task$rank.log" 2>&1 & pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""


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
    fake = tmp_path / "fake"
    fake.mkdir()
    for name, text in (("scontrol", SCONTROL), ("srun", SRUN)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "FAKE_DIR": str(fake),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "tiny", "SLURM_CPUS_ON_NODE": "1"}
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
