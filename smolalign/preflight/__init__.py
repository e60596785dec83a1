"""What a recipe needs from the machine it will run on (a GPU, vLLM, an optional package), checked once the recipe is
resolved for its target, so `--dry-run` and a real run refuse it before any weight loads, with exit 2 and one line
naming the key and the fix.

The checks are one table, `CHECKS` (docs/scaling/preflight.md lists the same table). Each takes the resolved run,
whose `Target` is what it is checked for (smolalign.target: this machine, or the nodes of a Slurm job), and returns
the problem and its fix, or None. The checks live with their concern: preflight.gpus (processes per GPU, bf16, the driver),
preflight.kernels (attention, Liger), preflight.vllm, preflight.packages (trackers, DeepSpeed) and
preflight.services (the hub, judges). Nothing here initialises CUDA: GPUs are counted through NVML.
"""

from collections.abc import Callable
from dataclasses import dataclass

from smolalign.errors import SmolalignError
from smolalign.preflight.gpus import check_bf16, check_driver, check_processes
from smolalign.preflight.kernels import check_attention, check_liger
from smolalign.preflight.packages import check_deepspeed, check_report_to
from smolalign.preflight.services import check_hub, check_judges
from smolalign.preflight.vllm import check_eval, check_pairs, check_rl_generation
from smolalign.resolve import Run


@dataclass(frozen=True)
class Check:
    key: str
    needs: str
    """What the check requires, in one line (docs/scaling/preflight.md says it at length)."""
    run: Callable[[Run], str | None]


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
    Check("rewards / pairs.graded.scorer / pairs.verifier.rewards / eval.rewards", "judge: its server answers",
          check_judges),
    Check("train.use_liger_kernel", "liger-kernel installed and a GPU", check_liger),
    Check("train.report_to", "a tracker transformers knows, installed (extras: wandb, trackio, tensorboard)",
          check_report_to),
    Check("hub.repo_id", "a hub token (HF_TOKEN or `hf auth login`), HF_HUB_OFFLINE unset, the hub "
          "answering from this machine", check_hub),
    Check("model.dtype / train.bf16", "bfloat16: GPUs that compute in it (not checked on a CPU: precision follows it)", check_bf16),
    Check("launch.preset / train.deepspeed", "zero2/zero3: DeepSpeed installed", check_deepspeed),
)


def findings(run: Run) -> list[str]:
    """What the run's target cannot run of its recipe's choices, one message (key and fix) per failed check."""
    return [problem for check in CHECKS if (problem := check.run(run))]


def preflight(run: Run) -> None:
    """Refuse the run (SmolalignError: key and fix) if its target cannot run one of the recipe's choices."""
    problems = findings(run)
    if problems:
        raise SmolalignError(problems[0])
