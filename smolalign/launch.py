"""Running a stage on several processes: `smolalign sft|po|rl RECIPE --launch PRESET --num-processes N` re-runs the
same command under `accelerate launch` with a preset from recipes/accelerate/ (ddp, zero2, zero3, zero3_offload,
fsdp2) or an accelerate config file.

On a machine without a GPU the processes are started by torchrun on the CPU (gloo; the CPU's precision, float32
under DeepSpeed), because accelerate starts a single process when told to use the CPU. Data parallel needs nothing
more. For the DeepSpeed presets the preset becomes a DeepSpeed JSON config handed to the trainer
(`SMOLALIGN_DEEPSPEED_CONFIG`) and DeepSpeed's CPU accelerator: real ZeRO partitioning over gloo, the way a CI
machine can test it. FSDP presets need GPUs here.

Without --launch the same happens when the recipe has a `launch:` section, or when this machine has several GPUs for
training (`planned_launch`: one process per GPU). The command resolves its recipe first and decides from that `Run`
(a recipe that does not parse or resolve is refused once, before any process starts); each launched process
resolves it again for itself. Inside the launched processes `SMOLALIGN_LAUNCHED` is set, and a
process any launcher started (accelerate, torchrun, srun) runs the stage instead of launching again. A run that
starts its vLLM server on this machine's GPUs hands the training processes the GPU partition in their environment;
with one training process, that process is a child started on it (`run_on_partition`).
"""

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from smolalign import hardware
from smolalign.assets import asset_dir
from smolalign.deepspeed_settings import accelerate_settings, deepspeed_config
from smolalign.errors import SmolalignError
from smolalign.gpu_partition import handed_partition, partition_for_children, training_device_count
from smolalign.hardware import processes_on_this_node
from smolalign.ports import free_port
from smolalign.preflight.gpus import processes_problem
from smolalign.recipe.typecheck import suggest
from smolalign.resolve import Run
from smolalign.target import THIS_MACHINE, launch_plan

LAUNCHED = "SMOLALIGN_LAUNCHED"
DEEPSPEED_CONFIG = "SMOLALIGN_DEEPSPEED_CONFIG"
OPTIONS_WITH_VALUE = ("--launch", "--num-processes")


def presets() -> dict[str, Path]:
    return {p.stem: p for p in sorted((asset_dir("recipes") / "accelerate").glob("*.yaml"))}


def preset_path(name_or_path: str, option: str = "--launch") -> Path:
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path.resolve()
    known = presets()
    if name_or_path in known:
        return known[name_or_path]
    raise SmolalignError(f"{option} {name_or_path}: no such accelerate config or preset{suggest(name_or_path, known)} "
                         f"(presets: {', '.join(known)})")


def training_gpus(generation=None) -> int:
    """GPUs of this machine left for training processes (the CUDA devices this process sees, counted without
    starting CUDA, less a started vLLM server's unless this process was started on the GPU partition already)."""
    visible = hardware.visible_gpu_count()
    return visible if handed_partition() is not None else training_device_count(visible, generation)


def partition_for(run: Run, processes: int):
    """The GPU partition (gpu_partition.GpuPartition) the `processes` training processes of `run` are started on,
    or None when they need none."""
    return partition_for_children(run.recipe.generation, processes)


def run_on_partition(argv: list[str], gpus) -> int:
    """Run `smolalign ARGV` as one training process in a child started on `gpus` (a GpuPartition): which GPUs a
    process sees is fixed by its environment before CUDA starts in it, and a process that saw the vLLM server's GPUs
    too would train on all of them (torch's DataParallel). Returns the child's exit code."""
    command = [sys.executable, "-m", "smolalign", *strip_launch_options(argv)]
    print(f"training on GPU(s) {','.join(gpus.training)}, the vLLM server on {','.join(gpus.server)}: "
          f"{' '.join(command[1:])}", file=sys.stderr)
    return run_child(command, {**os.environ, **gpus.training_env()})


def planned_launch(run: Run, launch: str | None, num_processes: int | None) -> tuple[str | None, int]:
    """(preset, processes) for a run of a train verb that no launcher started, or (None, 1) to run in this process:
    the recipe's `launch:` and this machine's GPUs left for training, by target.launch_plan."""
    recipe = run.recipe
    return launch_plan(recipe.launch, training_gpus(recipe.generation), launch=launch, num_processes=num_processes)


def check_not_data_parallel(recipe, argv: list[str]) -> None:
    """A training process must see one GPU: one process that sees several runs torch's DataParallel, which TRL's
    trainers refuse, and only after the data is prepared and the model loaded. Refused here with the command
    (`smolalign ARGV`, launched) that runs one process per GPU."""
    processes = processes_on_this_node()
    gpus = training_gpus(recipe.generation)
    if processes > 1 or gpus < 2:
        return
    command = " ".join(["smolalign", *strip_launch_options(argv), "--launch", "ddp", "--num-processes", str(gpus)])
    raise SmolalignError(f"one training process would see {gpus} GPUs, and TRL's trainers refuse torch's "
                         f"DataParallel: run `{command}`, or give this process one GPU (CUDA_VISIBLE_DEVICES=0)")


def is_launched() -> bool:
    return os.environ.get(LAUNCHED) == "1"


def is_first_rank() -> bool:
    """Whether this process is the run's first (RANK 0, or the only one): where what happens once is done when no
    trainer is there to ask (`is_world_process_zero`)."""
    return int(os.environ.get("RANK", "0")) == 0


def under_launcher() -> bool:
    """Whether a launcher started this process as one rank of a run: smolalign's own relaunch, `accelerate launch`,
    torchrun or srun (each sets WORLD_SIZE, or accelerate's sharding variables). The run's processes and sharding
    are then the launcher's, not the recipe's `launch:` section."""
    return is_launched() or "WORLD_SIZE" in os.environ or launched_sharding() is not None


PROCESS_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_SIZE",
                     "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
"""What makes accelerate set up a process group (torchrun's and MPI's variables)."""


@contextlib.contextmanager
def kept_process_variables():
    """Put PROCESS_VARIABLES back as they were when the block ends. TRL's colocated vLLM writes RANK, WORLD_SIZE,
    MASTER_ADDR and MASTER_PORT into this process's environment and leaves them there: every process started from
    this one afterwards (a sweep's next cell, a launch) would take itself for a rank of a launched run and wait on
    the port TRL picked, which another run on the machine may hold by then."""
    saved = {name: os.environ.get(name) for name in PROCESS_VARIABLES}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def launched_sharding() -> dict | None:
    """How the launcher that started this process shards the model: {"zero": the DeepSpeed zero_optimization
    section (stage None when the launcher does not say)} or {"fsdp": its version}; None when it shards nothing."""
    if os.environ.get(DEEPSPEED_CONFIG):  # smolalign's own --launch on a CPU machine
        return {"zero": json.loads(Path(os.environ[DEEPSPEED_CONFIG]).read_text()).get("zero_optimization", {})}
    if os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true" and os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE"):
        from accelerate.utils.deepspeed import HfDeepSpeedConfig  # a path, or the JSON itself

        return {"zero": HfDeepSpeedConfig(os.environ["ACCELERATE_DEEPSPEED_CONFIG_FILE"]).config.get(
            "zero_optimization", {})}
    if os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true":
        return {"zero": {"stage": os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE"),
                         **{f"offload_{kind}": {"device": os.environ.get(
                             f"ACCELERATE_DEEPSPEED_OFFLOAD_{kind.upper()}_DEVICE", "none")}
                            for kind in ("optimizer", "param")}}}
    if os.environ.get("ACCELERATE_USE_FSDP") == "true":
        return {"fsdp": os.environ.get("FSDP_VERSION", "1")}
    return None


SAFE_PATH = {"PYTHONSAFEPATH": "1", "SMOLALIGN_SAFE_PATH": "1"}
"""For every `python -m smolalign` smolalign starts: `-m` puts the working directory first on the module path, so a
team's `rewards.py` there hid smolalign's `rewards` package in launched processes (the `smolalign` command does
not put it there). The launched process takes it off its environment as it starts (`smolalign.__main__`), so what it
starts in turn does not inherit it."""


def run_child(command: list[str], env: dict[str, str]) -> int:
    """Run a launcher or a training child to its end with `env` as its whole environment (and SAFE_PATH: neither it
    nor the processes it starts read modules from the working directory first); returns its exit code."""
    return subprocess.run(command, env={**env, **SAFE_PATH}).returncode


def read_preset(preset: Path) -> dict:
    return yaml.safe_load(preset.read_text()) or {}


def distributed_type(preset: Path) -> str:
    return str(read_preset(preset).get("distributed_type", "NO"))


def temporary_config(preset: Path, text: str, suffix: str) -> Path:
    """A config file written for one launch (the caller removes it when the launch ends)."""
    handle, path = tempfile.mkstemp(prefix=f"smolalign-{preset.stem}-", suffix=suffix)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    return Path(path)


def written_accelerate_config(preset: Path, num_processes: int) -> tuple[Path, Path | None]:
    """(the accelerate config `preset` launches with on GPUs, the DeepSpeed JSON it names for a DeepSpeed preset),
    written for one launch: smolalign's own and a Slurm job's nodes (`python -m smolalign.accelerate_config`) run
    the DeepSpeed config the CPU path runs, its buckets sized from the model."""
    settings = read_preset(preset)
    deepspeed_file = None
    if str(settings.get("distributed_type", "NO")) == "DEEPSPEED":
        deepspeed_file = temporary_config(preset, json.dumps(deepspeed_config(settings, on_gpu=True), indent=2),
                                          ".json")
    config = temporary_config(preset, yaml.safe_dump(accelerate_settings(settings, num_processes, deepspeed_file)),
                              ".yaml")
    return config, deepspeed_file


def launch_command(config: Path, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config),
            "--main_process_port", str(free_port()), "-m", "smolalign", *strip_launch_options(argv)]


def cpu_command(num_processes: int, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(num_processes),
            "--master_port", str(free_port()), "-m", "smolalign", *strip_launch_options(argv)]


def strip_launch_options(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in OPTIONS_WITH_VALUE:
            skip = True
            continue
        if any(arg.startswith(option + "=") for option in OPTIONS_WITH_VALUE):
            continue
        out.append(arg)
    return out


def relaunch(run: Run, preset_name: str, num_processes: int, argv: list[str]) -> int:
    """Run `smolalign ARGV` (the command that resolved `run`) under accelerate on `num_processes` processes; returns
    the launcher's exit code."""
    if num_processes < 1:
        raise SmolalignError("--num-processes must be at least 1")
    preset = preset_path(preset_name)

    settings = read_preset(preset)
    gpus = partition_for(run, num_processes)
    env = {**os.environ, LAUNCHED: "1", **(gpus.training_env() if gpus else {})}
    config_file = deepspeed_file = None
    if hardware.detect_hardware().on_gpu:
        problem = processes_problem(num_processes, hardware.visible_gpu_count(), run.recipe.generation,
                                    THIS_MACHINE, "--num-processes")
        if problem:
            raise SmolalignError(problem)
        config_file, deepspeed_file = written_accelerate_config(preset, num_processes)
        command = launch_command(config_file, argv)
        print(f"launching {num_processes} process(es) with {preset.name}: accelerate launch {' '.join(command[3:])}",
              file=sys.stderr)
    else:
        kind = str(settings.get("distributed_type", "NO"))
        if kind not in ("MULTI_GPU", "NO", "DEEPSPEED"):
            raise SmolalignError(f"--launch {preset.stem}: {kind} needs GPUs here; on the CPU use --launch ddp "
                                 "or a DeepSpeed preset")
        command = cpu_command(num_processes, argv)
        if kind == "DEEPSPEED":
            if importlib.util.find_spec("deepspeed") is None:
                raise SmolalignError(f"--launch {preset.stem} needs DeepSpeed: pip install 'smolalign[deepspeed]'")
            config_file = temporary_config(preset, json.dumps(deepspeed_config(settings), indent=2), ".json")
            env.update({DEEPSPEED_CONFIG: str(config_file), "DS_ACCELERATOR": "cpu"})
        print(f"launching {num_processes} process(es) on the CPU (gloo{', DeepSpeed ' + preset.stem if config_file else ''}): "
              f"{' '.join(command[1:])}", file=sys.stderr)
    try:
        return run_child(command, env)
    finally:
        for written in (config_file, deepspeed_file):
            if written is not None:
                written.unlink(missing_ok=True)
