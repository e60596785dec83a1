"""The trainer class each method runs on: TRL's, or smolalign's subclass where it replaces TRL's dataset preparation
(`stages.po_trainers`), its loss's precision (`stages.distill_trainer`) or its pass over prompts shared by several
answers (`stages.grpo_trainer`). Each is named by a function that imports it when called: TRL's trainers load in
seconds, and GRPO's and online DPO's import vLLM where it is installed, which a run of another method never needs.

The stage modules ask this table for their trainer; `stages.registry` maps each method to its stage.
"""

from collections.abc import Callable

from smolalign.recipe.method_table import method_key, quiet_experimental


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


TRAINERS: dict[str, Callable[[], type]] = {
    "sft": sft_trainer,
    "dpo": dpo_trainer,
    "kto": kto_trainer,
    "orpo": orpo_trainer,
    "reward": reward_trainer,
    "grpo": grpo_trainer,
    "online_dpo": online_dpo_trainer,
    "distill": distillation_trainer,
    "gold": gold_trainer,
    "auto": gold_trainer,
}
"""Keyed as `recipe.method_table.METHODS`."""


def trainer_class(stage: str, method=None) -> type:
    """The trainer class for a stage and its parsed method (None for sft)."""
    return TRAINERS[method_key(stage, method)]()
