"""The sbatch script of a multi-node run, rendered from a `SlurmJob`: node roles from the allocation, one
`accelerate launch` per training node meeting at a c10d rendezvous on the first one, an optional `trl vllm-serve`
node that training waits for, steps run in a container image when asked (pyxis or apptainer), and, when the time
limit nears, USR1 forwarded to training, which saves a checkpoint and stops, then a requeue, after which the run
resumes from that checkpoint. Text only (stdlib), so every line of the wiring is testable without Slurm:
`smolalign launch slurm RECIPE --nodes N` writes it.
"""

import shlex
from dataclasses import dataclass

from smolalign.runs.save_on_signal import SAVED_ON_SIGNAL_EXIT
from smolalign.slurm.container import Container, container_mounts, in_container
from smolalign.slurm.server_node import VllmServer, server_node_step


@dataclass(frozen=True)
class SlurmJob:
    job_name: str
    stage: str
    recipe: str
    """Absolute path of the recipe file."""
    train_args: tuple[str, ...]
    """What follows `smolalign STAGE RECIPE` (--set overrides, --output-dir), without --resume / --overwrite."""
    nodes: int
    """Training nodes."""
    gpus_per_node: int
    accelerate_config: str
    deepspeed: bool
    """The accelerate config is a DeepSpeed one: its multi-node launcher must be torchrun's (`standard`)."""
    main_process_port: int
    workdir: str
    activate: str
    """Shell line that puts smolalign's Python environment first on PATH."""
    log_dir: str
    sbatch: tuple[tuple[str, str], ...]
    """#SBATCH options (name, value) beyond the ones every job gets; an empty value is a flag."""
    signal_seconds: int
    """USR1 reaches the batch shell this long before the time limit; training saves, stops, and the job requeues."""
    overwrite: bool = False
    """The first run starts over (--overwrite); requeued runs resume."""
    vllm: VllmServer | None = None
    setup: tuple[str, ...] = ()
    """Shell lines run before the environment is activated (module load ...)."""
    command: str = ""
    """The command line that wrote the script, recorded at its top."""
    array: int = 0
    """A Slurm array of this many tasks (a sweep: one per cell, each picks its cell by $SLURM_ARRAY_TASK_ID)."""
    container: Container | None = None

    @property
    def total_nodes(self) -> int:
        return self.nodes + (1 if self.vllm else 0)

    @property
    def num_processes(self) -> int:
        return self.nodes * self.gpus_per_node


def render_script(job: SlurmJob) -> str:
    parts = [_header(job), _environment(job), _roles(job), _requeue(job)]
    if job.vllm is not None:
        parts.append(server_node_step(job, job.vllm))
    parts.append(_training(job))
    return "\n\n".join(parts) + "\n"


def _header(job: SlurmJob) -> str:
    options = [("job-name", job.job_name), ("nodes", str(job.total_nodes)), ("ntasks-per-node", "1"),
               ("gres", f"gpu:{job.gpus_per_node}"), ("exclusive", ""), ("mem", "0"), ("requeue", ""),
               ("signal", f"B:USR1@{job.signal_seconds}"), ("open-mode", "append")]
    log = "%x-%A_%a" if job.array else "%x-%j"  # an array task's log carries the array's id and its own index
    options += [("output", f"{job.log_dir}/{log}.out"), ("error", f"{job.log_dir}/{log}.err")]
    if job.array:
        options.append(("array", f"0-{job.array - 1}"))
    given = dict(job.sbatch)
    if given.keys() & {"mem-per-cpu", "mem-per-gpu"}:  # sbatch refuses them next to --mem
        options = [option for option in options if option[0] != "mem"]
    options = [(name, given.pop(name, value)) for name, value in options] + list(given.items())
    lines = ["#!/bin/bash"] + [f"#SBATCH --{name}" + (f"={value}" if value else "") for name, value in options]
    roles = f"{job.nodes} training node(s) × {job.gpus_per_node} GPU(s)"
    if job.vllm is not None:
        roles += " + 1 vLLM server node (the last one)"
    lines += [
        "#",
        f"# smolalign {job.stage}: {roles}; accelerate with {job.accelerate_config}, c10d rendezvous on the first node.",
        "# USR1 (sent before the time limit) goes on to training, which saves a checkpoint at its next step and stops;",
        "# then the job requeues, and every run passes --resume, so the requeued job continues from that checkpoint.",
        "# Preempted jobs are requeued by Slurm itself (--requeue).",
    ]
    if job.container is not None:
        lines.append(f"# Every srun step runs in the image {job.container.image} ({job.container.runtime}); this "
                     "script runs on the host.")
    if job.array:
        lines.append(f"# An array of {job.array} tasks, one per sweep cell: each trains and evaluates cell "
                     "$SLURM_ARRAY_TASK_ID.")
    if job.command:
        lines.append(f"# Written by: {job.command}")
    return "\n".join(lines)


def _environment(job: SlurmJob) -> str:
    g = job.gpus_per_node
    if job.container is None:
        tools = ["scontrol", "srun", "accelerate"] + (["trl", "curl", "getent"] if job.vllm else [])
        environment = [job.activate]
    else:  # accelerate and trl are the image's; only Slurm's tools (and apptainer, curl) are the host's
        tools = ["scontrol", "srun"] + (["apptainer"] if job.container.runtime == "apptainer" else []) + \
            (["curl", "getent"] if job.vllm else [])
        environment = container_mounts(job.container)
    return "\n".join([
        "set -euo pipefail",
        f"cd {shlex.quote(job.workdir)}",
        *job.setup,
        *environment,
        f"for tool in {' '.join(tools)}; do",
        '  command -v "$tool" > /dev/null || { echo "error: $tool is not on PATH" >&2; exit 1; }',
        "done",
        "",
        "# The launched processes run the stage instead of launching again.",
        "export SMOLALIGN_LAUNCHED=1",
        "export PYTHONUNBUFFERED=1",
        "# python -m puts the working directory first on the path: a rewards.py there would hide smolalign's rewards.",
        "export PYTHONSAFEPATH=1 SMOLALIGN_SAFE_PATH=1",
        "# A rank that fails or hangs in a collective aborts the job instead of blocking every other rank.",
        "export NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "# One task per node owns all of the node's CPUs; each of its processes gets an equal share of threads.",
        "CPUS_PER_NODE=${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-" + str(g) + "}}",
        f"export OMP_NUM_THREADS=${{OMP_NUM_THREADS:-$(( CPUS_PER_NODE >= {g} ? CPUS_PER_NODE / {g} : 1 ))}}",
    ])


def _roles(job: SlurmJob) -> str:
    lines = [
        "# Node roles: the first nodes of the allocation train" + (", the last one serves vLLM." if job.vllm else "."),
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        f"if (( ${{#NODES[@]}} != {job.total_nodes} )); then",
        f'  echo "error: expected {job.total_nodes} nodes in $SLURM_JOB_NODELIST, got ${{#NODES[@]}}" >&2',
        "  exit 1",
        "fi",
        f'TRAIN_NODES=("${{NODES[@]:0:{job.nodes}}}")',
        'TRAIN_NODELIST=$(IFS=,; echo "${TRAIN_NODES[*]}")',
        'export MAIN_PROCESS_IP="${TRAIN_NODES[0]}"',
        f"export MAIN_PROCESS_PORT={job.main_process_port}",
    ]
    if job.vllm is not None:
        lines += [
            f'VLLM_NODE="${{NODES[{job.nodes}]}}"', f'export VLLM_URL="http://$VLLM_NODE:{job.vllm.port}"',
            "# Weight sync: training's main process hosts the transfer group, which the server joins at the address",
            "# vLLM reads from VLLM_HOST_IP (else its guess: the interface of the default route, which may not be the",
            "# one the vLLM node reaches). Given to the training step only: the server's own engine keeps its own.",
            'TRAIN_HOST_IP=$(getent ahostsv4 "${TRAIN_NODES[0]}" | awk \'NR == 1 { print $1 }\')',
            'if [[ -z $TRAIN_HOST_IP ]]; then',
            '  echo "error: ${TRAIN_NODES[0]} does not resolve to an IPv4 address (getent ahostsv4); the vLLM server '
            'could not reach training to sync weights" >&2',
            "  exit 1",
            "fi",
            "export TRAIN_HOST_IP",
        ]
    lines.append('echo "smolalign: job $SLURM_JOB_ID (run ${SLURM_RESTART_COUNT:-0}): training on $TRAIN_NODELIST, '
                 'rendezvous $MAIN_PROCESS_IP:$MAIN_PROCESS_PORT'
                 + (', vLLM on $VLLM_NODE, weight sync from $TRAIN_HOST_IP' if job.vllm else '')
                 + '"')
    return "\n".join(lines)


def _requeue(job: SlurmJob) -> str:
    lines = [
        "REQUEUED=0 SIGNALLED=0",
        "requeue() {",
        '  echo "smolalign: requeueing job $SLURM_JOB_ID, which resumes from the last checkpoint" >&2',
        '  if scontrol requeue "$SLURM_JOB_ID"; then REQUEUED=1; else',
        '    echo "smolalign: scontrol requeue failed; the job runs until its time limit" >&2',
        "  fi",
        "}",
        "# srun passes USR1 on to its step (to every process, or to each task's process group, as Slurm tracks them);",
        "# each node's relay hands it to the training ranks, which save a checkpoint at their next step end and stop",
        "# (exit 75); the launchers ignore it (trap '' USR1 below). The requeue follows.",
        "time_limit_near() {",
        "  SIGNALLED=1",
        '  if [[ -n ${TRAIN_PID:-} ]]; then',
        '    echo "smolalign: USR1: the time limit is near (or the job is preempted); training saves a checkpoint and '
        'stops" >&2',
        '    kill -USR1 "$TRAIN_PID" 2> /dev/null || true',
        "  else",
        "    requeue",
        "  fi",
        "}",
        "trap time_limit_near USR1",
        "",
        "# A trapped signal interrupts `wait`: wait again while the step still runs.",
        "wait_step() {",
        "  local pid=$1 status",
        "  while true; do",
        "    status=0",
        '    wait "$pid" || status=$?',
        '    if (( status > 128 )) && kill -0 "$pid" 2> /dev/null; then continue; fi',
        '    return "$status"',
        "  done",
        "}",
    ]
    if job.overwrite:
        lines += ["", "# --overwrite starts the first run over; a requeued run continues what it started.",
                  'if (( ${SLURM_RESTART_COUNT:-0} > 0 )); then export RUN_MODE=--resume; '
                  "else export RUN_MODE=--overwrite; fi"]
    return "\n".join(lines)


def _training(job: SlurmJob) -> str:
    config = shlex.quote(job.accelerate_config)
    in_image = job.container is not None and job.container.preset
    if job.deepspeed:  # the DeepSpeed config --launch runs (buckets sized from the model), written on each node
        preset = job.container.preset if in_image else job.accelerate_config
        config = f'"$(python -m smolalign.accelerate_config {shlex.quote(preset)} {job.num_processes})"'
    elif in_image:
        config = ('"$(python -c ' + shlex.quote(f'from smolalign.launch import preset_path; '
                                                f'print(preset_path("{job.container.preset}"))') + ')"')
    launcher = [
        ["accelerate", "launch", "--config_file", config],
        ["--num_machines", str(job.nodes), "--num_processes", str(job.num_processes)],
        ["--machine_rank", '"$SLURM_PROCID"'],
        ["--main_process_ip", '"$MAIN_PROCESS_IP"', "--main_process_port", '"$MAIN_PROCESS_PORT"'],
        ["--rdzv_backend", "c10d"],
    ]
    if job.deepspeed:
        launcher.append(["--deepspeed_multinode_launcher", "standard"])
    stage = ["-m", "smolalign", job.stage, shlex.quote(job.recipe), *map(shlex.quote, job.train_args)]
    if job.vllm is not None:
        stage += ["--set", '"generation.server.base_url=$VLLM_URL"']
    stage.append('"$RUN_MODE"' if job.overwrite else "--resume")
    launcher.append(stage)
    # Expanded by each task's own shell: SLURM_PROCID is the task's rank within this step, 0 .. nodes-1.
    # USR1 is for the training processes (they set their own handler); ignored here, it stays ignored in the
    # launchers. The relay passes it on to the ranks, which torchrun starts in sessions of their own: where Slurm
    # tracks processes by process group, the step's signal reaches only the task's group (smolalign.slurm.signal_relay).
    launcher[0] = ["python", "-m", "smolalign.slurm.signal_relay", *launcher[0]]
    host_ip = 'export VLLM_HOST_IP="$TRAIN_HOST_IP"; ' if job.vllm is not None else ""
    per_node = f"trap '' USR1; {host_ip}exec " + " \\\n    ".join(" ".join(words) for words in launcher)
    srun_options, command_prefix = in_container(job)
    return "\n".join([
        f"srun --nodes={job.nodes} --ntasks={job.nodes} --ntasks-per-node=1 --nodelist=\"$TRAIN_NODELIST\" "
        f'--cpus-per-task="$CPUS_PER_NODE" --kill-on-bad-exit=1 --wait=60 {srun_options}\\',
        f"  {command_prefix}bash -c " + _single_quoted(per_node) + " &",
        "TRAIN_PID=$!",
        "TRAIN_STATUS=0",
        'wait_step "$TRAIN_PID" || TRAIN_STATUS=$?',
        f"# {SAVED_ON_SIGNAL_EXIT}: saved on the signal and stopped. torchrun reports any rank's non-zero exit as 1, so",
        "# after the signal every failure requeues (resuming from the newest complete checkpoint).",
        f"if (( TRAIN_STATUS == {SAVED_ON_SIGNAL_EXIT} || (SIGNALLED && TRAIN_STATUS != 0) )); then requeue; fi",
        "if (( REQUEUED )); then exit 0; fi",
        'exit "$TRAIN_STATUS"',
    ])


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
