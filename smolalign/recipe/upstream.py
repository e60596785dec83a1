"""Where the keys of TRL, alignment-handbook and open-r1 configs live in a smolalign recipe (their reward names are
in `rewards/upstream.py`).

The one table of upstream names: `smolalign recipes import` translates with it, and validation reads it so that
`model_name_or_path` or `train.warmup_ratio` written in a smolalign recipe is answered with its home, not only a
spelling suggestion. Only the stdlib is imported here.
"""

RENAMED = {
    # ModelConfig (TRL) / ModelArguments (alignment-handbook)
    "model_name_or_path": "model.source",
    "model_revision": "model.revision",
    "torch_dtype": "model.dtype",
    "dtype": "model.dtype",
    "attn_implementation": "model.attn_implementation",
    "trust_remote_code": "model.trust_remote_code",
    "load_in_4bit": "model.quantization: 4bit",
    "load_in_8bit": "model.quantization: 8bit",
    "use_peft": "a peft: section (its keys are peft.LoraConfig's)",
    "lora_r": "peft.r",
    "lora_alpha": "peft.lora_alpha",
    "lora_dropout": "peft.lora_dropout",
    "lora_target_modules": "peft.target_modules",
    "lora_target_parameters": "peft.target_parameters",
    "lora_modules_to_save": "peft.modules_to_save",
    "lora_task_type": "peft.task_type",
    "use_rslora": "peft.use_rslora",
    "use_dora": "peft.use_dora",
    # ScriptArguments and dataset mixtures
    "dataset_name": "data.sources[].path",
    "dataset_config": "data.sources[].name",
    "dataset_train_split": "data.sources[].split",
    "dataset_mixture": "data.sources (one entry per dataset: path, name, split, columns, weight), data.seed and "
                       "data.eval_split",
    "datasets": "data.sources",
    "test_split_size": "data.eval_split",
    "dataset_prompt_column": "data.sources[].columns: {YOUR_COLUMN: prompt}",
    "dataset_text_field": "data.sources[].columns: {YOUR_COLUMN: text}",
    "system_prompt": "data.system_prompt",
    # Trainer fields TRL renamed or dropped, and fields smolalign sets from a section of its own
    "warmup_ratio": "train.warmup_steps (a float below 1 is a ratio of the total steps)",
    "max_seq_length": "train.max_length",
    "max_prompt_length": "nowhere in TRL 1.16: train.max_length caps prompt plus answer (po), rl prompts are not "
                         "truncated (filter long ones from the data), pairs.max_prompt_tokens drops long prompts of "
                         "generated pairs",
    "chat_template": "template.name (a shipped template, a .jinja file, or model for the tokenizer's own)",
    "chat_template_path": "template.name",
    "eos_token": "nowhere: smolalign sets EOS to the template's end-of-turn token",
    "reward_funcs": "rewards: [{name, weight, params}]",
    "reward_weights": "rewards[].weight",
    "use_vllm": "generation.backend: vllm_colocate or vllm_server",
    "vllm_mode": "generation.backend: vllm_colocate or vllm_server",
    "loss_type": "method: (po), e.g. method: apo_zero",
    "num_processes": "launch.num_processes",
    "model_init_kwargs": "model: (dtype, attn_implementation, trust_remote_code, revision, quantization); smolalign "
                         "loads the model and its tokenizer itself",
    # Hub pushes: TRL's Trainer pushes its checkpoint folder; smolalign pushes the final model/ (fixed template, EOS,
    # the recipe and manifest as card) once the run has ended
    "push_to_hub": "a hub: section (repo_id, private, revision)",
    "hub_model_id": "hub.repo_id",
    "hub_private_repo": "hub.private",
    "hub_revision": "hub.revision",
    "hub_strategy": "nowhere: smolalign pushes the final model once, when the run has ended (a hub: section)",
    "hub_always_push": "nowhere: smolalign pushes the final model once, when the run has ended (a hub: section)",
    "hub_token": "nowhere: set HF_TOKEN or run `hf auth login`",
    # alignment-handbook before its TRL-ScriptArguments rewrite (dataset_mixer recipes)
    "dataset_mixer": "data.sources (one entry per dataset: path, split, weight)",
    "dataset_splits": "data.sources[].split (a test split: data.eval_split holds out rows instead)",
    "dataset_configs": "data.sources[].name",
    "use_flash_attention_2": "model.attn_implementation: flash_attention_2",
    "tokenizer_name_or_path": "model.tokenizer",
    "text_column": "data.sources[].columns: {YOUR_COLUMN: text}",
}
"""Upstream key -> its smolalign home, in the words a message shows."""

OWNED_TRAIN_KEYS = ("chat_template_path", "eos_token", "dataset_text_field", "model_init_kwargs", "push_to_hub",
                    "hub_model_id", "hub_private_repo", "hub_revision", "hub_strategy", "hub_always_push", "hub_token")
"""TRL config fields that smolalign sets itself: written in `train:`, TRL would apply them on top of smolalign's
template and EOS handling (or push the trainer's checkpoint folder, without them, to the hub), so they are refused
with their home instead."""


def rename_hint(key: str) -> str | None:
    """'KEY is written HOME in a smolalign recipe' for an upstream key, else None."""
    home = RENAMED.get(str(key))
    if home is None:
        return None
    if home.startswith("nowhere"):
        return f"{key} is a TRL / alignment-handbook / open-r1 key with no smolalign equivalent ({home})"
    return f"{key} is a TRL / alignment-handbook / open-r1 key: in a smolalign recipe it is {home}"
