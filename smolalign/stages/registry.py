"""How each method runs, one row per method: its `Stage` (the steps of a run that differ, which
`stages.lifecycle.run_lifecycle` runs) and its trainer class, TRL's or smolalign's subclass where it replaces TRL's
dataset preparation (`stages.po_trainers`), its loss's precision (`stages.distill_trainer`) or its pass over prompts
shared by several answers (`stages.grpo_trainer`). The CLI, sweeps and `launch slurm` reach a stage only through this
table, and a stage gets its trainer class from its row (`OpenRun.trainer`).

What each method is (its verb, TRL config, data, reference and the `train:` keys smolalign owns) is
`recipe.method_table`'s: parsing a recipe needs those facts, and the recipe layer sits below the stages. Adding a
method is a row there, a row here, and its stage module (or a row that names an existing one).

Each trainer is named by a function that imports it when called: TRL's trainers load in seconds, and GRPO's and online
DPO's import vLLM where it is installed, which a run of another method (or a dry run) never needs.
"""

from collections.abc import Callable
from dataclasses import dataclass

from smolalign.launch import kept_process_variables
from smolalign.recipe.method_table import method_key, quiet_experimental
from smolalign.resolve import Run
from smolalign.runs.save_on_signal import listening
from smolalign.stages import distill, online_dpo, po, rl, sft
from smolalign.stages.lifecycle import Stage, run_lifecycle


def sft_trainer() -> type:
    from trl import SFTTrainer
    return SFTTrainer


def dpo_trainer() -> type:
    from smolalign.stages.po_trainers import PreparedDPOTrainer
    return PreparedDPOTrainer


def kto_trainer() -> type:
    from smolalign.stages.po_trainers import PreparedKTOTrainer
    return PreparedKTOTrainer


def orpo_trainer() -> type:
    from smolalign.stages.po_trainers import PreparedORPOTrainer
    return PreparedORPOTrainer


def reward_trainer() -> type:
    from smolalign.stages.po_trainers import PreparedRewardTrainer
    return PreparedRewardTrainer


def grpo_trainer() -> type:
    from smolalign.stages.grpo_trainer import SharedPromptGRPOTrainer
    return SharedPromptGRPOTrainer


def online_dpo_trainer() -> type:
    quiet_experimental()
    from trl.experimental.online_dpo import OnlineDPOTrainer
    return OnlineDPOTrainer


def distillation_trainer() -> type:
    from smolalign.stages.distill_trainer import MixedPrecisionDistillationTrainer
    return MixedPrecisionDistillationTrainer


def gold_trainer() -> type:
    quiet_experimental()
    from trl.experimental.gold import GOLDTrainer
    return GOLDTrainer


@dataclass(frozen=True)
class Runner:
    """How one method runs."""

    stage: Stage
    trainer: Callable[[], type]
    """The trainer class, imported when called."""


RUNNERS: dict[str, Runner] = {
    "sft": Runner(sft.STAGE, sft_trainer),
    "dpo": Runner(po.STAGE, dpo_trainer),
    "kto": Runner(po.STAGE, kto_trainer),
    "orpo": Runner(po.STAGE, orpo_trainer),
    "reward": Runner(po.STAGE, reward_trainer),
    "grpo": Runner(rl.STAGE, grpo_trainer),
    "online_dpo": Runner(online_dpo.STAGE, online_dpo_trainer),
    "distill": Runner(distill.STAGE, distillation_trainer),
    "gold": Runner(distill.STAGE, gold_trainer),
    "auto": Runner(distill.STAGE, gold_trainer),  # GOLD, with ULD exactly when the tokenizers differ
}
"""Keyed as `recipe.method_table.METHODS`."""


def runner(run: Run) -> Runner:
    """The row of a run's method."""
    return RUNNERS[method_key(run.recipe.stage, run.recipe.method)]


def run_stage(resolved: Run, **options):
    """Run a resolved run with its method's stage and trainer; returns the saved model's directory (None for a dry
    run). The launcher's variables are as they were before, whatever the run's vLLM engine wrote; the time-limit
    signal is caught from the start (smolalign.runs.save_on_signal)."""
    row = runner(resolved)
    with kept_process_variables(), listening():  # the time-limit signal, kept from the stage's start
        return run_lifecycle(row.stage, resolved, trainer=row.trainer, **options)
