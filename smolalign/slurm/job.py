"""From `smolalign launch slurm RECIPE --nodes N [--vllm-nodes 1]` to a written (and optionally submitted) sbatch
script. The recipe is checked first as its stage's --dry-run checks it, for the cluster's world size (nodes × GPUs
per node) and without loading weights, so a bad recipe costs no queue time; the vLLM node's settings come from the
recipe's generation.server section; every node runs the Python environment that runs smolalign now, or, with
--container IMAGE, every srun step runs in that image with the paths the run needs mounted at the same place.
"""

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.errors import SmolalignError
from smolalign.estimate.plan_rows import add_memory_and_time_rows
from smolalign.estimate.time import describe_seconds
from smolalign.generation.server_command import SERVER_NODE_PORT, serve_options, trl_serve_command
from smolalign.hardware import Hardware
from smolalign.launch import distributed_type, preset_path
from smolalign.preflight import preflight
from smolalign.recipe.load import recipe_path
from smolalign.recipe.method_table import METHODS
from smolalign.recipe.schema import Recipe
from smolalign.recipe.validate import load_recipe, recipe_stage
from smolalign.resolve import Run, resolve
from smolalign.runs.rundir import last_checkpoint
from smolalign.runs.save_on_signal import settings_generation_cycle
from smolalign.slurm.container import container_of
from smolalign.slurm.options import (
    DEFAULT_PRESET,
    SlurmRequest,
    check_request,
    default_job_name,
    sbatch_options,
    time_limit_seconds,
    vllm_serve_options,
)
from smolalign.slurm.script import SlurmJob, render_script
from smolalign.slurm.server_node import VllmServer
from smolalign.stages.lifecycle import run_dir_of
from smolalign.stages.registry import runner
from smolalign.target import IMAGE_PACKAGES, Target

_UNSAFE_PATH = re.compile(r"[\s'\"$`\\]")
MULTI_NODE_TYPES = ("MULTI_GPU", "DEEPSPEED", "FSDP")


def write_job(request: SlurmRequest) -> Path | None:
    """Check, render and write the script (stdout for `--script -`); returns the file written, if any."""
    if request.submit and request.script == "-":
        raise SmolalignError("--submit needs a script file; drop --script - or --submit")
    return emit_job(request, *build_job(request))


def emit_job(request: SlurmRequest, job: SlurmJob, plan, notes: list[str]) -> Path | None:
    """Print the plan and notes, write the script (or print it for `--script -`) and submit it if asked."""
    to_stdout = request.script == "-"
    report = sys.stderr if to_stdout else sys.stdout
    if plan is not None:
        print(plan.render(), file=report)
    for note in notes:
        print(f"note: {note}", file=report)
    text = render_script(job)
    try:
        Path(job.log_dir).mkdir(parents=True, exist_ok=True)  # sbatch does not create it: without it, no logs at all
    except OSError as exc:
        raise SmolalignError(f"--log-dir {job.log_dir}: cannot be made ({exc.strerror or exc})") from None
    if to_stdout:
        sys.stdout.write(text)
        return None
    path = script_path(request, job.job_name)

    write_atomically(path, text)
    path.chmod(0o755)
    print(f"wrote {path} (logs in {job.log_dir})")
    if request.submit:
        print(submit(path))
    else:
        print(f"submit it with: sbatch {shlex.quote(str(path))}")
    return path


def build_job(request: SlurmRequest) -> tuple[SlurmJob, object | None, list[str]]:
    """(job, plan or None with --skip-data, notes) for a request; every check that can fail runs here."""
    check_request(request)
    path = recipe_path(request.recipe)
    overrides = list(request.overrides)
    stage = recipe_stage(str(path), overrides)
    recipe = load_recipe(str(path), overrides, stage)
    named = recipe.launch.preset if recipe.launch is not None else None
    if recipe.launch is not None and recipe.launch.num_processes is not None:
        raise SmolalignError(f"launch.num_processes {recipe.launch.num_processes}: a Slurm job starts one process per "
                             "GPU of its nodes (--nodes × --gpus-per-node); set those instead")
    preset = preset_path(request.preset or named or DEFAULT_PRESET, "--preset")
    kind = distributed_type(preset)
    if kind not in MULTI_NODE_TYPES:
        raise SmolalignError(f"--preset {preset}: distributed_type {kind} does not run one process per GPU on several "
                             f"nodes; use a {', '.join(MULTI_NODE_TYPES)} config (presets ddp, zero2, zero3, "
                             "zero3_offload, fsdp2)")
    hardware = cluster_hardware(request)

    # The job runs in this environment (environment_activation), or in the image with --container, on its nodes'
    # GPUs: the preflight checks that target. Validated for the cluster: launch.global_batch_size is divided over its
    # processes, not this node's.
    where = f"the job's nodes ({request.container})" if request.container else "the job's nodes"
    nodes = Target(request.gpus_per_node, where, processes=request.gpus_per_node, server_node=True,
                   packages=IMAGE_PACKAGES if request.container else None)
    run = resolve(recipe, hardware, nodes)
    preflight(run)
    server, notes = vllm_server(run, request)
    if server is not None:  # the plan names the server node the job will start, and the run is checked against it
        run = resolve(served_by(recipe, f"http://VLLM_NODE:{server.port}"), hardware, nodes)
        preflight(run)
    plan = check_stage(run, skip_data=request.skip_data)
    if plan is not None:  # memory and time for the job's sharding (the preset), not this node's

        add_memory_and_time_rows(plan, run, steps=plan.steps, preset=preset)
    if plan is None:  # --skip-data: no plan, but the batch the job will train with is known without the data
        settings = run.settings
        notes.append(f"global batch {settings.global_batch} = per-device batch {settings.per_device_batch} × gradient "
                     f"accumulation {settings.accumulation} × {settings.world_size} processes")
    notes += run_dir_notes(run, request) + time_limit_notes(run, request, plan)
    train_args = [word for item in overrides for word in ("--set", item)]
    if request.output_dir is not None:
        train_args += ["--output-dir", str(request.output_dir.expanduser().resolve())]
    extra = [("partition", request.partition), ("time", request.time), ("account", request.account)]
    job_name = request.job_name or default_job_name(str(path), stage)
    container = container_of(request, run, path, preset, server.model if server else None)
    # In the image, a shipped recipe is the image's own: it stays a name
    shipped = container is not None and not Path(request.recipe).expanduser().is_file()
    job = SlurmJob(
        job_name=job_name, stage=stage, recipe=request.recipe if shipped else str(path),
        train_args=tuple(train_args), nodes=request.nodes,
        gpus_per_node=request.gpus_per_node, accelerate_config=str(preset),
        deepspeed=kind == "DEEPSPEED", main_process_port=request.main_process_port,
        workdir=str(Path.cwd()), activate=environment_activation(), log_dir=str(log_dir(request, job_name)),
        sbatch=tuple([(k, v) for k, v in extra if v is not None] + sbatch_options(request.sbatch)),
        signal_seconds=request.signal_before, overwrite=request.overwrite, vllm=server, setup=tuple(request.setup),
        command=shlex.join(["smolalign", *request.argv]) if request.argv else "", container=container)
    return job, plan, notes


def served_by(recipe: Recipe, base_url: str) -> Recipe:
    """`recipe` generating with the vLLM server at `base_url` (the job's server node) instead of one it starts."""
    generation = recipe.generation
    server = dataclasses.replace(generation.server, base_url=base_url)
    return dataclasses.replace(recipe, generation=dataclasses.replace(generation, server=server))


def time_limit_notes(run: Run, request: SlurmRequest, plan) -> list[str]:
    """What the time limit means for saves, from the plan's time per step (where it has one): a run shorter than
    the time between scheduled saves relies on the save at the time-limit signal, which needs a step to end within
    --signal-before."""
    limit = time_limit_seconds(request.time) if request.time else None
    step = getattr(plan, "step_seconds", None)
    if limit is None or not step:
        return []
    notes = []
    settings = run.settings
    strategy, every = str(settings["save_strategy"]).lower(), None
    if strategy == "steps" and settings.get("save_steps"):
        save_steps = settings["save_steps"]
        every = save_steps * plan.steps if save_steps < 1 and plan.steps else save_steps
        what = f"train.save_steps {save_steps:g}"
    elif strategy == "epoch" and plan.steps and settings.get("num_train_epochs"):
        every = plan.steps / settings["num_train_epochs"]
        what = "one epoch (train.save_strategy epoch)"
    run = limit - request.signal_before
    if every is not None and run < every * step:
        notes.append(f"--time {request.time} gives each run ≈ {describe_seconds(run)} before the time-limit signal, "
                     f"less than the ≈ {describe_seconds(every * step)} between scheduled saves ({what} × "
                     f"≈ {describe_seconds(step)} per step): every run ends with the save on the signal; lower "
                     "train.save_steps to lose less if a run dies")
    cycle = settings_generation_cycle(settings)  # the save on the signal waits for the generation cycle's end
    if step * cycle > request.signal_before:
        what = f"a step takes ≈ {describe_seconds(step)}" if cycle == 1 else (
            f"the {cycle}-step generation cycle the save on the signal waits for takes ≈ {describe_seconds(step * cycle)}")
        notes.append(f"{what}, longer than --signal-before {request.signal_before} s: the save on the time-limit "
                     "signal may not finish in time; raise --signal-before")
    return notes


def cluster_hardware(request: SlurmRequest) -> Hardware:
    """The hardware the plan is made for: the job's GPUs (assumed to compute in bf16), not this login node's."""
    nodes, gpus = request.nodes, request.gpus_per_node
    return Hardware("cuda", gpus, f"{nodes} node(s) × {gpus} GPU(s) under Slurm", True, nodes * gpus,
                    os.cpu_count() or 1)


def check_stage(run: Run, *, skip_data: bool):
    """The stage's own checks before loading (template, data, columns, rewards, batch rules); returns its plan."""
    stage = runner(run)
    if skip_data:
        if stage.check_batch is not None:
            stage.check_batch(run)
        return None
    return stage.check(run).plan


def vllm_server(run: Run, request: SlurmRequest) -> tuple[VllmServer | None, list[str]]:
    """The server node's settings for --vllm-nodes 1; refuses a recipe that cannot use it, or needs one."""
    recipe = run.recipe
    generation = recipe.generation
    served = run.method_spec.vllm_server
    backend = generation.backend if served else None
    if not request.vllm_nodes:
        if backend == "vllm_server" and not generation.server.base_url:
            raise SmolalignError("generation.backend vllm_server: on Slurm the server gets a node of its own; pass "
                                 "--vllm-nodes 1 (or set generation.server.base_url to a server that runs)")
        return None, []
    if not served:
        what = f"smolalign {recipe.stage}" + (f" (method {recipe.method.name})" if recipe.stage == "rl" else "")
        methods = " or ".join(k for k, spec in METHODS.items() if spec.vllm_server)
        raise SmolalignError(f"--vllm-nodes: only smolalign rl with method {methods} generates with a vLLM server; "
                             f"this recipe is for {what}")
    if backend != "vllm_server":
        raise SmolalignError(f"--vllm-nodes: generation.backend is {backend}; set it to vllm_server "
                             "(--set generation.backend=vllm_server) to generate on the server node")
    server = generation.server
    if server.base_url:
        raise SmolalignError(f"--vllm-nodes: generation.server.base_url already names a running server "
                             f"({server.base_url}); drop --vllm-nodes to use it, or unset it "
                             "(--set generation.server.base_url=null)")
    if server.tensor_parallel > request.gpus_per_node:
        raise SmolalignError(f"generation.server.tensor_parallel {server.tensor_parallel} needs more GPUs than a node "
                             f"has (--gpus-per-node {request.gpus_per_node})")
    notes = []
    if server.gpus:
        notes.append("generation.server.gpus is not used: the server has a node of its own")
    if server.tensor_parallel < request.gpus_per_node:
        notes.append(f"the vLLM node uses {server.tensor_parallel} of its {request.gpus_per_node} GPUs "
                     "(generation.server.tensor_parallel)")
    # every interface: the training nodes reach it by the node's name
    options = serve_options(run, host="0.0.0.0", port=server.port or SERVER_NODE_PORT, dtype=recipe.model.dtype)
    command = trl_serve_command(options) + vllm_serve_options(request.vllm_set)
    return VllmServer(command=tuple(command), model=options["model"], port=options["port"],
                      startup_timeout=server.startup_timeout), notes


def run_dir_notes(run: Run, request: SlurmRequest) -> list[str]:
    run_dir = run_dir_of(run, request.output_dir).expanduser().resolve()
    notes = [f"run directory {run_dir}: every node must see it (a shared filesystem)"]
    if str(run.settings["save_strategy"]).lower() == "no":
        notes.append("train.save_strategy is no: a requeued job has no checkpoint to resume from and starts over")
    checkpoint = last_checkpoint(run_dir) if run_dir.is_dir() and not request.overwrite else None
    if checkpoint is not None:
        notes.append(f"the job continues from {checkpoint} (pass --overwrite to start over)")
    return notes


def environment_activation() -> str:
    """The shell line that gives every node the Python environment running this command."""
    activate = Path(sys.prefix) / "bin" / "activate"
    if sys.prefix != sys.base_prefix and activate.is_file():
        return f"set +u; source {shlex.quote(str(activate))}; set -u  # the environment that wrote this script"
    return f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"  # the Python that wrote this script'


def script_path(request: SlurmRequest, job_name: str) -> Path:
    return Path(request.script).expanduser().resolve() if request.script else Path.cwd() / "slurm" / f"{job_name}.sbatch"


def log_dir(request: SlurmRequest, job_name: str) -> Path:
    """--log-dir, else logs/ next to the script; #SBATCH lines are not shell-parsed, so no spaces or quotes."""
    if request.log_dir is not None:
        directory = request.log_dir.expanduser().resolve()
    elif request.script == "-":
        directory = Path.cwd() / "slurm" / "logs"
    else:
        directory = script_path(request, job_name).parent / "logs"
    if _UNSAFE_PATH.search(str(directory)):
        raise SmolalignError(f"log directory {directory}: #SBATCH --output cannot hold spaces or quotes; pass --log-dir")
    return directory


def submit(path: Path) -> str:
    try:
        done = subprocess.run(["sbatch", str(path)], capture_output=True, text=True)
    except FileNotFoundError:
        raise SmolalignError(f"--submit: sbatch is not on PATH (run this on a Slurm login node, or submit {path} "
                             "there)") from None
    if done.returncode:
        raise SmolalignError(f"sbatch {path} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()
