"""Where a recipe will run: a `Target` (GPUs per node, training processes, bf16, the modules it can import), for this
machine or for another one (a Slurm job's nodes, the machine `recipes validate --for` describes, running the
smolalign GPU image). The target is chosen by whoever resolves the recipe (`smolalign.resolve.resolve`); the `Run`
carries it, and the preflight checks the recipe against it."""

import importlib.util
import re
from dataclasses import dataclass

from smolalign import hardware
from smolalign.errors import SmolalignError
from smolalign.generation.gpu_partition import handed_partition, training_device_count
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


def described_target(spec: str, launch=None, generation=None, stated_processes: int | None = None) -> Target:
    """The machine `recipes validate --for SPEC` checks against: `NxGPU` (8xH100, 2xA100-80GB: N GPUs of a type in
    the GPU table on one node), or `launch` (the recipe's launch.num_processes × launch.gpu), running the smolalign
    GPU image (its packages: IMAGE_PACKAGES). Its training processes are the ones the launch would start there
    (launch.planned_launch): the recipe's launch.num_processes where it states one (`stated_processes`), else one
    per GPU left once a vLLM server the run starts (`generation`) has its own."""

    if spec == "launch":
        if launch is None or not launch.gpu:
            raise SmolalignError("--for launch: the recipe has no launch.gpu; set it, or name the machine (--for 8xH100)")
        count, gpu = launch.num_processes, gpu_named(launch.gpu)
    else:
        match = re.fullmatch(r"\s*(\d+)\s*[x×]\s*(\S+)\s*", spec)
        if match is None or int(match[1]) < 1:
            raise SmolalignError(f"--for {spec}: not a machine description; use NxGPU (8xH100, 1xA100-80GB) or launch")
        count, gpu = int(match[1]), gpu_named(match[2], "--for")
    processes = stated_processes if stated_processes is not None and spec != "launch" else \
        max(training_device_count(count, generation), 1)
    return Target(count, f"{count}×{gpu.name} (the smolalign image)", bf16=True, processes=processes,
                  packages=IMAGE_PACKAGES)
