"""What a recipe needs from the machine it will run on (a GPU, vLLM, an optional package), checked when the recipe is
validated, so `--dry-run` and a real run refuse it before any weight loads, with exit 2 and one line naming the key
and the fix.

The checks are one table, `CHECKS` (docs/scaling/preflight.md lists the same table). Each takes the recipe and the `Target` (this
machine, or the nodes of a Slurm job) and returns the problem and its fix, or None. Nothing here initialises CUDA:
GPUs are counted through NVML, so that a later `CUDA_VISIBLE_DEVICES` (the vLLM server's GPU partition) still
applies to this process.
"""

import contextlib
import contextvars
import importlib.util
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from smolalign import hardware
from smolalign.errors import SmolalignError
from smolalign.preflight_gpus import check_bf16, check_driver, check_processes
from smolalign.preflight_judges import check_judges
from smolalign.preflight_vllm import check_eval, check_pairs, check_rl_generation, needs_vllm
from smolalign.recipe.schema import Recipe

ATTENTION_DEFAULT = "flex_attention"
"""What the shipped GPU recipes name: built into torch (nothing to install in the image), and transformers builds
its mask from the packed rows' position_ids as a sparse BlockMask, so packed rows stay apart without the dense
(sequence × sequence) mask sdpa needs (65k tokens: a 4 GiB boolean mask per forward, and no flash kernel)."""

FLASH_ATTENTION = {"flash_attention_2": ("flash_attn", "pip install flash-attn --no-build-isolation"),
                   "flash_attention_3": ("flash_attn_interface", "build flash-attention's hopper/ directory")}


THIS_MACHINE = "this machine"


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
        """Whether the target is the machine this runs on (its driver, its GPUs' bf16 can be asked)."""
        return self.where == THIS_MACHINE

    def has(self, module: str) -> bool:
        return installed(module) if self.packages is None else module in self.packages


IMAGE_EXTRAS = ("vllm", "deepspeed", "liger", "plot", "reasoning-gym")
"""The extras the GPU image installs (the Dockerfile's `pip install ".[...]"`; a test keeps the two the same)."""
EXTRA_MODULES = {"vllm": ("vllm",), "deepspeed": ("deepspeed",), "liger": ("liger_kernel",), "plot": ("matplotlib",),
                 "reasoning-gym": ("reasoning_gym",), "wandb": ("wandb",), "trackio": ("trackio",),
                 "tensorboard": ("tensorboard",)}
"""What each extra makes importable, of the modules the checks look for."""
IMAGE_PACKAGES = frozenset({"torch.nn.attention.flex_attention",
                            *(module for extra in IMAGE_EXTRAS for module in EXTRA_MODULES[extra])})


@dataclass(frozen=True)
class Check:
    key: str
    needs: str
    """What the check requires, in one line (docs/scaling/preflight.md says it at length)."""
    run: Callable[[Recipe, Target], str | None]


_TARGET: contextvars.ContextVar[Target | None] = contextvars.ContextVar("preflight_target", default=None)


@contextlib.contextmanager
def on_target(target: Target) -> Iterator[None]:
    """Validate recipes inside this block for `target` instead of this machine (e.g. the nodes of a Slurm job)."""
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def for_another_machine() -> bool:
    """Whether recipes are validated for another target (a Slurm job's nodes), whose caches this machine cannot see."""
    return _TARGET.get() is not None


def this_machine() -> Target:
    gpus = hardware.visible_gpu_count()
    processes = hardware.processes_on_this_node()
    return Target(gpus, THIS_MACHINE, bf16=None, processes=processes)


def described_target(spec: str, launch=None) -> Target:
    """The machine `recipes validate --for SPEC` checks against: `NxGPU` (8xH100, 2xA100-80GB: N GPUs of a type in
    the GPU table on one node), or `launch` (the recipe's launch.num_processes × launch.gpu), running the smolalign
    GPU image (its packages: IMAGE_PACKAGES). One training process per GPU, or the recipe's launch.num_processes."""

    from smolalign.estimate.gpus import gpu_named

    if spec == "launch":
        if launch is None or not launch.gpu:
            raise SmolalignError("--for launch: the recipe has no launch.gpu; set it, or name the machine (--for 8xH100)")
        count, gpu = launch.num_processes, gpu_named(launch.gpu)
    else:
        match = re.fullmatch(r"\s*(\d+)\s*[x×]\s*(\S+)\s*", spec)
        if match is None or int(match[1]) < 1:
            raise SmolalignError(f"--for {spec}: not a machine description; use NxGPU (8xH100, 1xA100-80GB) or launch")
        count, gpu = int(match[1]), gpu_named(match[2], "--for")
    processes = launch.num_processes if launch is not None and spec != "launch" and launch.preset else count
    return Target(count, f"{count}×{gpu.name} (the smolalign image)", bf16=True, processes=processes,
                  packages=IMAGE_PACKAGES)


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_attention(recipe: Recipe, target: Target) -> str | None:
    name = recipe.model.attn_implementation
    if name in (None, "eager", "sdpa"):
        return None
    if name == "flex_attention":
        if not target.has("torch.nn.attention.flex_attention"):
            return "model.attn_implementation flex_attention: this torch has no flex attention (torch >= 2.5)"
        return None
    if name in FLASH_ATTENTION:
        module, install = FLASH_ATTENTION[name]
        if not target.has(module):
            return (f"model.attn_implementation {name}: {module} is not installed in {target.where} ({install}), or "
                    f"use {ATTENTION_DEFAULT} (built into torch, keeps packed rows apart)")
        if target.gpus < 1:
            return f"model.attn_implementation {name}: needs a CUDA GPU and {target.where} has none; use sdpa"
        return None
    if "/" in name:  # a kernel from the hub, e.g. kernels-community/flash-attn
        if not target.has("kernels"):
            return (f"model.attn_implementation {name}: hub kernels need the kernels package (pip install kernels) "
                    f"and hub access; or use {ATTENTION_DEFAULT}")
        return None
    return (f"model.attn_implementation {name!r} is not an attention implementation; use {ATTENTION_DEFAULT}, sdpa, "
            "eager or flash_attention_2")


def check_eval_command(backend: str, chart: bool) -> None:
    """`smolalign eval`'s own options, before any model loads."""
    if backend == "vllm":
        problem = needs_vllm("--backend vllm", this_machine(), "--backend transformers")
        if problem:
            raise SmolalignError(problem)
    if chart and not installed("matplotlib"):
        raise SmolalignError("--chart needs matplotlib (pip install 'smolalign[plot]'; the GPU image has it)")


def check_liger(recipe: Recipe, target: Target) -> str | None:
    if not recipe.train.get("use_liger_kernel"):
        return None
    if not target.has("liger_kernel"):
        return "train.use_liger_kernel: liger-kernel is not installed (pip install 'smolalign[liger]'); or remove it"
    if target.gpus < 1:
        return f"train.use_liger_kernel: Liger's kernels run on a GPU and {target.where} has none; remove it"
    return None


REPORT_EXTRAS = ("wandb", "trackio", "tensorboard")
"""The trackers smolalign ships as extras (pyproject's optional dependencies of the same names)."""


def check_report_to(recipe: Recipe, target: Target) -> str | None:
    wanted = recipe.train.get("report_to")
    names = [wanted] if isinstance(wanted, str) else list(wanted or [])
    names = [n for n in names if n not in ("none", "all")]
    if not names:
        return None
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    unknown = [n for n in names if n not in INTEGRATION_TO_CALLBACK]
    if unknown:
        return (f"train.report_to {', '.join(map(str, unknown))}: not a tracker transformers knows; use "
                f"{', '.join(INTEGRATION_TO_CALLBACK)}, or none")
    if target.packages is None:
        available = get_available_reporting_integrations()
    else:
        available = [n for n in names if all(target.has(m) for m in EXTRA_MODULES.get(n, (n,)))]
    missing = [n for n in names if n not in available]
    if missing:
        extras = [n for n in missing if n in REPORT_EXTRAS]
        install = [f"'smolalign[{','.join(extras)}]'"] if extras else []
        install += [n for n in missing if n not in REPORT_EXTRAS]
        return (f"train.report_to {', '.join(missing)}: not installed in {target.where} (pip install "
                f"{' '.join(install)}), or remove it")
    return None


def check_hub(recipe: Recipe, target: Target) -> str | None:
    if recipe.hub is None:
        return None
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        return f"hub.repo_id {recipe.hub.repo_id}: HF_HUB_OFFLINE is set here; unset it, or remove the hub: section"
    from huggingface_hub import get_token

    if get_token() is None:
        return (f"hub.repo_id {recipe.hub.repo_id}: no hub token (set HF_TOKEN or run `hf auth login`), or remove "
                "the hub: section")
    return None


def check_deepspeed(recipe: Recipe, target: Target) -> str | None:
    preset = recipe.launch.preset if recipe.launch else None
    if (recipe.train.get("deepspeed") or (preset or "").startswith("zero")) and not target.has("deepspeed"):
        key = "train.deepspeed" if recipe.train.get("deepspeed") else f"launch.preset {preset}"
        return f"{key}: DeepSpeed is not installed (pip install 'smolalign[deepspeed]')"
    return None


CHECKS = (
    Check("NVIDIA driver", "on a machine with one: a version that runs torch's CUDA (CUDA 13: >= 580, 12: >= 525)",
          check_driver),
    Check("model.attn_implementation", "flash_attention_2/3: flash-attn installed and a GPU; flex_attention: torch "
          "has it; a hub kernel: the kernels package", check_attention),
    Check("generation.backend", "vllm_colocate / vllm_server: vLLM installed (the CUDA build on GPUs, the CPU build on a "
          "CPU) and importable; a started server on GPUs: server.gpus that exist", check_rl_generation),
    Check("launch / --num-processes", "on GPUs: one training process per GPU, beside a started vLLM server's GPUs",
          check_processes),
    Check("pairs.*.backend", "vllm: vLLM installed and importable", check_pairs),
    Check("eval.backend", "vllm: vLLM installed and importable", check_eval),
    Check("rewards / pairs.graded.scorer / eval.rewards", "judge: its server answers", check_judges),
    Check("train.use_liger_kernel", "liger-kernel installed and a GPU", check_liger),
    Check("train.report_to", "a tracker transformers knows, installed (extras: wandb, trackio, tensorboard)",
          check_report_to),
    Check("hub.repo_id", "a hub token (HF_TOKEN or `hf auth login`) and HF_HUB_OFFLINE unset", check_hub),
    Check("model.dtype / train.bf16", "bfloat16: GPUs that compute in it (on a CPU the run is float32)", check_bf16),
    Check("launch.preset / train.deepspeed", "zero2/zero3: DeepSpeed installed", check_deepspeed),
)


def findings(recipe: Recipe, target: Target | None = None) -> list[str]:
    """What the target cannot run of the recipe's choices, one message (key and fix) per failed check."""
    target = target or _TARGET.get() or this_machine()
    return [problem for check in CHECKS if (problem := check.run(recipe, target))]


def preflight(recipe: Recipe, target: Target | None = None) -> None:
    """Refuse the recipe (SmolalignError: key and fix) if the target cannot run one of its choices."""
    problems = findings(recipe, target)
    if problems:
        raise SmolalignError(problems[0])
