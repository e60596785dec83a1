"""Where a recipe will run: a `Target` (GPUs per node, training processes, bf16, the modules it can import), for this
machine or for another one (a Slurm job's nodes, the machine `recipes validate --for` describes, running the
smolalign GPU image). The target is chosen by whoever resolves the recipe (`smolalign.resolve.resolve`); the `Run`
carries it, and the preflight checks the recipe against it."""

import dataclasses
import importlib.util
import re
from dataclasses import dataclass

from smolalign import hardware
from smolalign.errors import SmolalignError
from smolalign.gpu_partition import handed_partition, training_device_count
from smolalign.gpus import gpu_named

THIS_MACHINE = "this machine"


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Target:
    """Where the recipe will run."""

    gpus: int
    """CUDA devices each training node sees."""
    where: str
    bf16: bool | None = None
    """Whether those GPUs compute in bfloat16 (None: not known here)."""
    processes: int = 1
    """Training processes per node."""
    server_node: bool = False
    """A started vLLM server gets a node of its own (Slurm's --vllm-nodes), not GPUs beside training."""
    packages: frozenset[str] | None = None
    """The modules the target can import (the GPU image's, for `recipes validate --for`); None: this machine's."""

    @property
    def here(self) -> bool:
        """Whether the target is the machine this runs on (its driver, its GPUs' bf16, its caches can be asked)."""
        return self.where == THIS_MACHINE

    def has(self, module: str) -> bool:
        return installed(module) if self.packages is None else module in self.packages


IMAGE_EXTRAS = ("vllm", "deepspeed", "liger", "plot", "reasoning-gym", "wandb", "trackio", "tensorboard")
"""The extras the GPU image installs (the Dockerfile's `pip install ".[...]"`; a test keeps the two the same)."""
EXTRA_MODULES = {"vllm": ("vllm",), "deepspeed": ("deepspeed",), "liger": ("liger_kernel",), "plot": ("matplotlib",),
                 "reasoning-gym": ("reasoning_gym",), "wandb": ("wandb",), "trackio": ("trackio",),
                 "tensorboard": ("tensorboard",)}
"""What each extra makes importable, of the modules the checks look for."""
IMAGE_PACKAGES = frozenset({"torch.nn.attention.flex_attention",
                            *(module for extra in IMAGE_EXTRAS for module in EXTRA_MODULES[extra])})


def this_machine() -> Target:
    """This machine: the GPUs this process sees (and, in a training process started on the vLLM server's GPU
    partition, the server's, which it does not see), the training processes its launcher started on this node."""
    handed = handed_partition()
    gpus = hardware.visible_gpu_count() + (len(handed.server) if handed is not None else 0)
    return Target(gpus, THIS_MACHINE, bf16=None, processes=hardware.processes_on_this_node())


def launch_plan(section, training_gpus: int, *, launch: str | None = None,
                num_processes: int | None = None) -> tuple[str | None, int]:
    """(preset, processes) of a train verb on a node whose `training_gpus` are left for training, or (None, 1) to
    run in one process: the one rule of both the launch (launch.planned_launch, this machine) and `recipes validate
    --for` (a described one). `section` is the recipe's `launch:` (a LaunchSection, or None).

    The preset: --launch, else the recipe's `launch.preset`, else `ddp` where several GPUs are left for training (one
    process seeing them all would be torch's DataParallel, which TRL's trainers refuse). The processes:
    --num-processes, else the recipe's `launch.num_processes`, else one per GPU left for training (1 on a CPU);
    more than one without a launcher is refused, naming what to add."""
    if num_processes is not None and num_processes < 1:
        raise SmolalignError(f"--num-processes {num_processes}: must be at least 1")
    asked_preset = section.preset if section is not None else None
    asked_processes = section.num_processes if section is not None else None
    preset = launch or asked_preset or ("ddp" if training_gpus > 1 else None)
    if preset is None:
        refuse_processes_without_launcher(num_processes, asked_processes)
        return None, 1
    if num_processes is None:
        num_processes = asked_processes or max(training_gpus, 1)
    return str(preset), num_processes


def refuse_processes_without_launcher(asked: int | None, recipe_processes) -> None:
    """More than one process asked for (--num-processes, the recipe's launch.num_processes) where nothing would
    start them (no --launch, no launch.preset, not several GPUs): refused with what to add, never run as one."""
    if asked is not None and asked > 1:
        raise SmolalignError(f"--num-processes {asked} needs a launcher to start them: add --launch ddp (or zero2, "
                             f"zero3, fsdp2), or set launch.preset")
    if asked is None and isinstance(recipe_processes, int) and recipe_processes > 1:
        raise SmolalignError(f"launch.num_processes {recipe_processes} needs a launcher to start them: set "
                             "launch.preset (ddp, zero2, zero3, fsdp2) or add --launch ddp")


def described_target(spec: str, launch=None, generation=None) -> tuple[Target, str | None]:
    """The machine `recipes validate --for SPEC` checks against, and the preset the launch would use there: `NxGPU`
    (8xH100, 2xA100-80GB: N GPUs of a type in the GPU table on one node), or `launch` (the recipe's
    launch.num_processes × launch.gpu), running the smolalign GPU image (its packages: IMAGE_PACKAGES). Its training
    processes and preset are the ones the launch would start there (`launch_plan` on the recipe's `launch`), with a
    vLLM server the run starts (`generation`) on GPUs of its own."""

    if spec == "launch":
        if launch is None or not launch.gpu:
            raise SmolalignError("--for launch: the recipe has no launch.gpu; set it, or name the machine (--for 8xH100)")
        count, gpu = launch.num_processes or 1, gpu_named(launch.gpu)
    else:
        match = re.fullmatch(r"\s*(\d+)\s*[x×]\s*(\S+)\s*", spec)
        if match is None or int(match[1]) < 1:
            raise SmolalignError(f"--for {spec}: not a machine description; use NxGPU (8xH100, 1xA100-80GB) or launch")
        count, gpu = int(match[1]), gpu_named(match[2], "--for")
    if spec == "launch":  # the recipe's num_processes named the machine's GPUs
        launch = dataclasses.replace(launch, num_processes=None)
    preset, processes = launch_plan(launch, training_device_count(count, generation))
    return Target(count, f"{count}×{gpu.name} (the smolalign image)", bf16=True, processes=processes,
                  packages=IMAGE_PACKAGES), preset
