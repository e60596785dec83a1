"""What each training method smolalign runs is, in one table, one row per method: the stage (CLI verb) it belongs
to and the stage module that runs it (`stages.registry.STAGES`), TRL's config class, the trainer class (TRL's, or
smolalign's subclass in `smolalign.trainers`), the data and reference it trains on, and the `train:` keys smolalign
sets itself. Code reads these facts where it would otherwise compare method names. Adding a method is a row here and
its stage module (or a row that names an existing one).

Each config and trainer class is named by a function that imports it when called: trl loads in seconds, GRPO's and
online DPO's trainers import vLLM where it is installed, and `--help` (or a dry run) never imports a trainer.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from smolalign.errors import SmolalignError
from smolalign.recipe.upstream import OWNED_TRAIN_KEYS, RENAMED

EVERY_METHOD_OWNS = {key: RENAMED[key] for key in OWNED_TRAIN_KEYS}
"""TRL fields that would override smolalign's template, EOS and model loading in any trainer."""
SFT_KEYS_OWNED = {key: "smolalign tokenizes, packs and splits the data itself (data:, train.packing), so TRL's own "
                       "dataset preparation, which this option steers, never runs"
                  for key in ("dataset_kwargs", "eval_packing", "shuffle_dataset")}
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
    "vllm_server_base_url": "name a running server in generation.server.base_url",
    "vllm_server_host": "name a running server in generation.server.base_url",
    "vllm_server_port": "set generation.server.port (a started server) or generation.server.base_url",
    "vllm_group_port": "set generation.server.group_port, or leave it unset for a free port per run",
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


def quiet_experimental() -> None:
    """TRL warns on every import from trl.experimental; smolalign chose those classes on purpose."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def sft_config() -> type:
    from trl import SFTConfig
    return SFTConfig


def dpo_config() -> type:
    from trl import DPOConfig
    return DPOConfig


def kto_config() -> type:
    from trl import KTOConfig
    return KTOConfig


def orpo_config() -> type:
    quiet_experimental()
    from trl.experimental.orpo import ORPOConfig
    return ORPOConfig


def reward_config() -> type:
    from trl import RewardConfig
    return RewardConfig


def grpo_config() -> type:
    from trl import GRPOConfig
    return GRPOConfig


def online_dpo_config() -> type:
    quiet_experimental()
    from trl.experimental.online_dpo import OnlineDPOConfig
    return OnlineDPOConfig


def distillation_config() -> type:
    from trl import DistillationConfig
    return DistillationConfig


def gold_config() -> type:
    quiet_experimental()
    from trl.experimental.gold import GOLDConfig
    return GOLDConfig


def sft_trainer() -> type:
    from trl import SFTTrainer
    return SFTTrainer


def dpo_trainer() -> type:
    from smolalign.trainers.preference import PreparedDPOTrainer
    return PreparedDPOTrainer


def kto_trainer() -> type:
    from smolalign.trainers.preference import PreparedKTOTrainer
    return PreparedKTOTrainer


def orpo_trainer() -> type:
    from smolalign.trainers.preference import PreparedORPOTrainer
    return PreparedORPOTrainer


def reward_trainer() -> type:
    from smolalign.trainers.preference import PreparedRewardTrainer
    return PreparedRewardTrainer


def grpo_trainer() -> type:
    from smolalign.trainers.grpo import SharedPromptGRPOTrainer
    return SharedPromptGRPOTrainer


def online_dpo_trainer() -> type:
    quiet_experimental()
    from smolalign.trainers.online_dpo import UnpaddedRewardsOnlineDPOTrainer
    return UnpaddedRewardsOnlineDPOTrainer


def distillation_trainer() -> type:
    from smolalign.trainers.distillation import MixedPrecisionDistillationTrainer
    return MixedPrecisionDistillationTrainer


def gold_trainer() -> type:
    quiet_experimental()
    from trl.experimental.gold import GOLDTrainer
    return GOLDTrainer


@dataclass(frozen=True)
class MethodSpec:
    stage: str
    """The CLI verb that runs it: sft, po or rl."""
    config_class: Callable[[], type]
    """TRL's config dataclass (imported when called); `train:` is checked against it and its defaults fill the
    settings."""
    trainer: Callable[[], type]
    """The trainer class (imported when called), which the run's stage builds."""
    owned: dict[str, str] = field(default_factory=dict)
    """`train:` keys smolalign sets from this method's own sections, each with where to set it instead."""
    consumed: tuple[str, ...] = ()
    """`train:` keys smolalign's data pipeline applies itself; they are not passed to the TRL config."""
    prompt_groups: bool = False
    """The trainer samples each prompt num_generations times (GRPO): its steps count groups, not rows."""
    vllm_server: bool = False
    """The trainer can generate with a `trl vllm-serve` server (TRL's VLLMClient: its weights synced each step)."""
    pairs: bool = False
    """Trains on chosen/rejected pairs, both answers of a pair in the same batch."""
    unpaired: bool = False
    """Trains on single answers labelled desirable or not (KTO): each pair becomes two rows, and prompt/completion/
    label data is accepted."""
    keeps_columns: bool = False
    """The trainer reads the prepared rows' own columns (prompt_ids, chosen_ids, ...), which TRL's unused-column
    filter would drop: remove_unused_columns is off."""
    combines_losses: bool = False
    """Sums a list of loss terms, each with a weight (DPO's loss_type and loss_weights); else one term at most."""
    scorer: bool = False
    """Trains a sequence classifier whose one output is the score (a reward model): the model gets a score head, which
    LoRA trains in full."""
    reference_free: str = ""
    """Why this po method trains without a reference model (`reference:` is refused with it); empty where
    `reference:` picks one."""
    policy_reference: bool = False
    """Trains against a frozen copy of the starting policy that TRL makes (the base with the adapter disabled under
    peft:); a recipe has no `reference:` key for it."""
    beta_reference: bool = False
    """Holds a frozen copy of the policy for its KL term when train.beta > 0 (none under peft:, where the adapter is
    disabled instead)."""
    samples_pairs: bool = False
    """Samples two answers per prompt and trains on them as a pair, scored together; train.max_length bounds prompt +
    answer, train.max_new_tokens the answer."""
    beta_per_epoch: bool = False
    """TRL's config takes train.beta as a list, one per epoch: one number stands for every epoch (a longer list is
    refused: TRL 1.16 indexes it with a fractional epoch)."""
    distills: bool = False
    """Learns from a teacher model (`teacher:` required, `rewards:` refused); the other rl methods learn from
    `rewards:`."""
    cross_tokenizer: bool = False
    """Distills across tokenizers (ULD) when the teacher's differs; else the teacher must share the student's."""
    off_policy: bool = False
    """Learns from the data's own completions a share 1 − train.lmbda of the time; else the student samples every
    sequence."""
    runs_on: str = ""
    """The stage module that runs it (a key of `stages.registry.STAGES`) where that is not its verb's own."""

    @property
    def stage_module(self) -> str:
        """The key of the stage that runs it in `stages.registry.STAGES`."""
        return self.runs_on or self.stage

    @property
    def refused(self) -> dict[str, str]:
        """Every `train:` key smolalign refuses for this method, with where to set it instead."""
        return {**EVERY_METHOD_OWNS, **self.owned}

    @property
    def peft_task_type(self) -> str:
        """The task LoRA adapters are built for: a reward model's (SEQ_CLS, whose new score head trains in full and
        is saved beside the adapters), else a causal language model's."""
        return "SEQ_CLS" if self.scorer else "CAUSAL_LM"

    @property
    def preference(self) -> bool:
        """Trains on preference data: pairs, or answers labelled desirable or not."""
        return self.pairs or self.unpaired

    @property
    def generates(self) -> bool:
        """The policy samples its own training answers from prompts while it trains (every rl method)."""
        return self.stage == "rl"


_GOLD = MethodSpec("rl", gold_config, gold_trainer, RL_KEYS_OWNED, distills=True, cross_tokenizer=True,
                   off_policy=True, runs_on="distill")
METHODS: dict[str, MethodSpec] = {
    "sft": MethodSpec("sft", sft_config, sft_trainer, SFT_KEYS_OWNED,
                      consumed=("assistant_only_loss", "completion_only_loss")),
    "dpo": MethodSpec("po", dpo_config, dpo_trainer, PO_KEYS_OWNED, pairs=True, combines_losses=True),
    "kto": MethodSpec("po", kto_config, kto_trainer, PO_KEYS_OWNED, unpaired=True),
    "orpo": MethodSpec("po", orpo_config, orpo_trainer, PO_KEYS_OWNED, pairs=True, keeps_columns=True,
                       reference_free="orpo is reference-free"),
    "reward": MethodSpec("po", reward_config, reward_trainer, REWARD_KEYS_OWNED, pairs=True, scorer=True,
                         reference_free="a reward model trains without a reference"),
    "grpo": MethodSpec("rl", grpo_config, grpo_trainer, RL_KEYS_OWNED, prompt_groups=True, vllm_server=True,
                       beta_reference=True),
    "online_dpo": MethodSpec("rl", online_dpo_config, online_dpo_trainer, ONLINE_DPO_KEYS_OWNED, vllm_server=True,
                             policy_reference=True, samples_pairs=True, beta_per_epoch=True, runs_on="online_dpo"),
    "distill": MethodSpec("rl", distillation_config, distillation_trainer, RL_KEYS_OWNED, distills=True,
                          runs_on="distill"),
    "gold": _GOLD,
    "auto": _GOLD,  # GOLD, with ULD exactly when the tokenizers differ; its config is a superset of distill's
}
"""Keyed by `Method.trainer` (sft has no method: key)."""


def method_key(stage: str, method=None) -> str:
    """The table key for a stage and its parsed method (None for sft)."""
    key = "sft" if stage == "sft" else getattr(method, "trainer", None)
    spec = METHODS.get(key)
    if spec is None or spec.stage != stage:
        raise SmolalignError(f"no {stage} method {key!r}; one of "
                             f"{', '.join(k for k, s in METHODS.items() if s.stage == stage)}")
    return key


def method_spec(stage: str, method=None) -> MethodSpec:
    """The table row for a stage and its parsed method (None for sft)."""
    return METHODS[method_key(stage, method)]
