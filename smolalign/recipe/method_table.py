"""Every training method smolalign runs, in one table: the stage (CLI verb) it belongs to, TRL's config and trainer
classes, the stage module that checks, plans and runs it, and the `train:` keys smolalign sets itself.

Validation, the stages, the CLI and `launch slurm` all read this table; nothing else maps a method to a class or a
module. Classes are named as "module:attribute" so that reading the table imports nothing (trl loads in seconds).
"""

import importlib
import os
from dataclasses import dataclass, field
from types import ModuleType

from smolalign.errors import SmolalignError
from smolalign.recipe.upstream import OWNED_TRAIN_KEYS, RENAMED

EVERY_METHOD_OWNS = {key: RENAMED[key] for key in OWNED_TRAIN_KEYS}
"""TRL fields that would override smolalign's template, EOS and model loading in any trainer."""
PO_KEYS_OWNED = {
    "loss_type": "set the loss with method: (e.g. method: apo_zero, or method: {sigmoid: 1.0, sft: 0.5})",
    "loss_weights": "give weights with method: {sigmoid: 1.0, sft: 0.5}",
    "precompute_ref_log_probs": "use reference: precomputed",
}
RL_KEYS_OWNED = {
    "reward_weights": "give each reward a weight in rewards:",
    "chat_template_kwargs": "set them in template.kwargs",
    "use_vllm": "choose the backend in generation.backend",
    "vllm_mode": "choose the backend in generation.backend",
}
ONLINE_DPO_KEYS_OWNED = {
    **RL_KEYS_OWNED,
    "reward_model_path": "name the reward model in rewards: (e.g. [{name: model:PATH}])",
    # GRPO's names, refused with online DPO's own rather than a did-you-mean:
    "num_generations": "online DPO always samples 2 answers per prompt",
    "max_completion_length": "online DPO's answer budget is train.max_new_tokens",
}
REWARD_KEYS_OWNED = {
    "pad_token": "smolalign sets the pad token with the tokenizer, which the saved reward model keeps",
}


@dataclass(frozen=True)
class MethodSpec:
    stage: str
    """The CLI verb that runs it: sft, po or rl."""
    config: str
    """TRL's config dataclass, "module:Class"; `train:` is checked against it and its defaults fill the settings."""
    trainer: str
    """The trainer class, "module:Class" (smolalign's subclass where it replaces TRL's dataset preparation)."""
    runner: str
    """The stage module: `check_before_loading(recipe, hardware)` and `run(recipe, ...)`."""
    owned: dict[str, str] = field(default_factory=dict)
    """`train:` keys smolalign sets from this method's own sections, each with where to set it instead."""
    consumed: tuple[str, ...] = ()
    """`train:` keys smolalign's data pipeline applies itself; they are not passed to the TRL config."""
    prompt_groups: bool = False
    """The trainer samples each prompt num_generations times (GRPO): its steps count groups, not rows."""
    vllm_server: bool = False
    """The trainer can generate with a `trl vllm-serve` server (TRL's VLLMClient: its weights synced each step)."""

    @property
    def refused(self) -> dict[str, str]:
        """Every `train:` key smolalign refuses for this method, with where to set it instead."""
        return {**EVERY_METHOD_OWNS, **self.owned}


_DISTILL = "smolalign.stages.distill"
_GOLD = MethodSpec("rl", "trl.experimental.gold:GOLDConfig", "trl.experimental.gold:GOLDTrainer", _DISTILL,
                   RL_KEYS_OWNED)
METHODS: dict[str, MethodSpec] = {
    "sft": MethodSpec("sft", "trl:SFTConfig", "trl:SFTTrainer", "smolalign.stages.sft",
                      consumed=("assistant_only_loss", "completion_only_loss")),
    "dpo": MethodSpec("po", "trl:DPOConfig", "smolalign.stages.po_trainers:PreparedDPOTrainer",
                      "smolalign.stages.po", PO_KEYS_OWNED),
    "kto": MethodSpec("po", "trl:KTOConfig", "smolalign.stages.po_trainers:PreparedKTOTrainer",
                      "smolalign.stages.po", PO_KEYS_OWNED),
    "orpo": MethodSpec("po", "trl.experimental.orpo:ORPOConfig", "smolalign.stages.po_trainers:PreparedORPOTrainer",
                       "smolalign.stages.po", PO_KEYS_OWNED),
    "reward": MethodSpec("po", "trl:RewardConfig", "smolalign.stages.po_trainers:PreparedRewardTrainer",
                         "smolalign.stages.po", REWARD_KEYS_OWNED),
    "grpo": MethodSpec("rl", "trl:GRPOConfig", "trl:GRPOTrainer", "smolalign.stages.rl", RL_KEYS_OWNED,
                       prompt_groups=True, vllm_server=True),
    "online_dpo": MethodSpec("rl", "trl.experimental.online_dpo:OnlineDPOConfig",
                             "trl.experimental.online_dpo:OnlineDPOTrainer", "smolalign.stages.online_dpo",
                             ONLINE_DPO_KEYS_OWNED, vllm_server=True),
    "distill": MethodSpec("rl", "trl:DistillationConfig", "trl:DistillationTrainer", _DISTILL, RL_KEYS_OWNED),
    "gold": _GOLD,
    "auto": _GOLD,  # GOLD, with ULD exactly when the tokenizers differ; its config is a superset of distill's
}
"""Keyed by `Method.trainer` (sft has no method: key)."""


def method_spec(stage: str, method=None) -> MethodSpec:
    """The table row for a stage and its parsed method (None for sft)."""
    key = "sft" if stage == "sft" else getattr(method, "trainer", None)
    spec = METHODS.get(key)
    if spec is None or spec.stage != stage:
        raise SmolalignError(f"no {stage} method {key!r}; one of "
                             f"{', '.join(k for k, s in METHODS.items() if s.stage == stage)}")
    return spec


def load(reference: str):
    """The object a "module:attribute" reference names (TRL's experimental trainers are imported quietly)."""
    module_name, _, attribute = reference.partition(":")
    if module_name.startswith(("trl.experimental", "smolalign.stages.po_trainers")):
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    return getattr(importlib.import_module(module_name), attribute)


def config_class(stage: str, method=None) -> type:
    return load(method_spec(stage, method).config)


def trainer_class(stage: str, method=None) -> type:
    return load(method_spec(stage, method).trainer)


def stage_module(recipe) -> ModuleType:
    """The module that checks, plans and runs this recipe's method."""
    return importlib.import_module(method_spec(recipe.stage, recipe.method).runner)


def run_stage(recipe, **options):
    """Run a validated recipe with its method's stage module; returns the saved model's directory (None for a dry
    run). The launcher's variables are as they were before, whatever the run's vLLM engine wrote; the time-limit
    signal is caught from the start (smolalign.runs.save_on_signal)."""
    from smolalign.launch import check_not_data_parallel, kept_process_variables
    from smolalign.runs.save_on_signal import listening

    check_not_data_parallel(recipe)
    with kept_process_variables(), listening():  # the time-limit signal, kept from the stage's start
        return stage_module(recipe).run(recipe, **options)
