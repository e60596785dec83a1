"""The claims smolalign makes, each with the tests that prove it and a mutation that switches the feature off. The
teeth tier (`make test-teeth`, tests/teeth/run.py) applies each mutation to a copy of the repository and requires
every listed test to fail there (or to be skipped for a reason .ci/skips does not accept); docs/claims.md is
written from this list (`python tests/teeth/run.py --write-table`), so the table cannot drift from what runs.

`old` must occur exactly once in `file`: a mutation that no longer applies is reported, never silently skipped."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    claim: str
    """Short id of the claim."""
    says: str
    """The claim, as the documentation states it."""
    where: str
    """Where it is stated: documentation pages relative to docs/ (with an anchor where the page is long),
    separated by "; " (docs/claims.md links them)."""
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    """pytest node ids that must each fail under the mutation."""
    why: str
    """What the mutation does, and why the tests see it."""


M = Mutation
RESUME = "tests/integration/test_resume.py::"
SANDBOX = "tests/unit/test_sandbox.py::"
RG = "tests/unit/test_reasoning_gym.py::"
WS = "tests/integration/test_weight_sync_check.py::"
WSV = "tests/unit/test_weight_sync_verdicts.py::"

MUTATIONS = [
    # ---------------------------------------------------------------------------------------------- resume
    M("resume", "--resume continues from the last complete checkpoint: the checkpoint untouched, only later steps "
      "logged (with the uninterrupted run's values), optimizer, scheduler and RNG state restored, the uninterrupted "
      "run's weights (bit for bit on one process and under ZeRO-3, 1e-6 under DDP)",
      "checkpoints.md#starting-over-and-resuming; scaling/index.md", "smolalign/stages/lifecycle.py",
      "result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)",
      "result = trainer.train(resume_from_checkpoint=None)",
      (f"{RESUME}test_resume_continues_from_the_checkpoint[sft]",
       f"{RESUME}test_resume_continues_from_the_checkpoint[grpo]",
       f"{RESUME}test_resume_reads_the_optimizer_state[dpo]",
       f"{RESUME}test_resume_reads_the_optimizer_state[distill]",
       f"{RESUME}test_resume_reads_the_schedule_and_the_rng[sft]",
       "tests/integration/test_launch.py::test_two_processes_on_cpu",
       "tests/integration/test_zero3_cpu.py::test_zero3_resumes_from_its_checkpoint"),
      "a restart from step 0: steps 1-2 logged again, and a perturbed optimizer state, schedule or RNG state changes "
      "nothing (a deterministic restart ends on the uninterrupted run's weights, which the old tests compared)"),
    M("ddp_resume_on_cpu", "a multi-process run on the CPU resumes (the optimizer state is not loaded onto cpu:1)",
      "scaling/index.md", "smolalign/stages/lifecycle.py",
      "    if checkpoint is not None:\n        _plain_cpu_device(trainer.args)",
      "    if False:\n        _plain_cpu_device(trainer.args)",
      ("tests/integration/test_launch.py::test_two_processes_on_cpu",),
      "transformers maps the optimizer state to cpu:1 on rank 1, which torch refuses: the resumed run fails"),
    M("resume_skips_damaged_checkpoint", "--resume skips a checkpoint cut off while saving and uses the previous "
      "complete one", "checkpoints.md#starting-over-and-resuming", "smolalign/runs/rundir.py",
      "        problem = damage(path)", "        problem = None",
      ("tests/unit/test_rundir.py::test_resume_without_a_checkpoint_starts_fresh_and_skips_a_cut_off_save",),
      "the newest checkpoint is taken whatever state it is in"),
    # ---------------------------------------------------------------------------------------------- ZeRO-3
    M("zero3_shards", "--launch zero3 shards the model as it loads: each of 2 ranks holds half the parameters",
      "scaling/index.md", "recipes/accelerate/zero3.yaml", "  zero_stage: 3", "  zero_stage: 2",
      ("tests/integration/test_zero3_cpu.py::test_zero3_shards_the_model_as_it_loads",),
      "ZeRO-2 keeps whole parameters on every rank"),
    M("zero3_equals_ddp", "ZeRO-3 trains to the weights of plain data parallel within 1e-5, both moving from the "
      "start by more than 1e-3; the saved model equals DeepSpeed's own consolidation", "scaling/index.md",
      "smolalign/stages/lifecycle.py",
      "        state_dict = trainer.accelerator.get_state_dict(trainer.model_wrapped)", "        state_dict = None",
      ("tests/integration/test_zero3_cpu.py::test_zero3_trains_to_the_weights_of_plain_data_parallel",
       "tests/integration/test_zero3_cpu.py::test_zero3_model_directory_loads_and_equals_deepspeeds_consolidation"),
      "model/ is written from rank 0's slices instead of the gathered weights"),
    # ---------------------------------------------------------------------------------------------- data
    M("packing_never_leaks", "packing (bfd) never leaks across documents: position ids restart, each document's "
      "loss is its loss alone", "recipes/data.md", "smolalign/recipe/train_section.py",
      'train["packing"], train["packing_strategy"] = True, packing',
      'train["packing"], train["packing_strategy"] = True, "wrapped"',
      ("tests/integration/test_packing_loss.py::test_trainer_loss_on_a_packed_batch_matches_per_document_losses",
       "tests/unit/test_data_preview.py::test_packed_documents_restart_position_ids"),
      "TRL's wrapped packing cuts documents and lets them attend across boundaries"),
    M("masks_equal_trl", "the assistant-only loss masks equal TRL's own (same ids, same trained positions)",
      "recipes/data.md", "smolalign/data/encode.py",
      "labels = ids if spans is None else masked_labels(ids, offsets, spans, len(text))", "labels = ids",
      ("tests/unit/test_masks_match_trl.py::test_conversation_masks_equal_trl",
       "tests/unit/test_data_preview.py::test_multi_turn_trains_exactly_the_assistant_answers"),
      "the loss mask is all ones: prompts and system turns are trained"),
    M("end_of_turn_trained", "every trained span ends with the end-of-turn token, or the run is refused",
      "recipes/data.md", "smolalign/data/encode.py",
      "                problem = self.end_of_turn_problem(ids, labels)", '                problem = ""',
      ("tests/unit/test_data_pipeline.py::test_end_of_turn_outside_the_trained_span_is_refused",),
      "the check never runs"),
    M("eos_is_end_of_turn", "the saved model's EOS (tokenizer, config, generation config) is the template's "
      "end-of-turn token, whatever the source's EOS was", "checkpoints.md", "smolalign/models/load.py",
      "    if eot is not None:\n        tokenizer.eos_token = eot", "    if False:\n        tokenizer.eos_token = eot",
      ("tests/integration/test_sft_run.py::test_a_model_whose_eos_is_not_the_end_of_turn_gets_it",),
      "the source's EOS is kept: the model would not stop after its answer"),
    M("held_out_rows_never_trained", "data.eval_split holds out distinct rows of the mixture, and every copy of a "
      "held-out row (a source weighted above 1) leaves training: the evaluation never reads a row the model trained "
      "on", "recipes/data.md", "smolalign/data/mixture.py",
      "    distinct = mixed if len(first) == len(mixed) else mixed.select(list(first.values()))",
      "    distinct = mixed",
      tuple(f"tests/unit/test_data_pipeline.py::test_no_held_out_row_is_trained_on_when_a_source_repeats[{case}]"
            for case in ("2.0-0.1-4", "1.5-6-6", "3.0-39-39")),
      "the held-out rows are drawn from the weighted mixture: a repeated row's copies land on both sides"),
    M("sources_of_one_dataset_apart", "several sources of one dataset (its splits) are counted apart, and each row "
      "is named by its source's path and split", "recipes/data.md", "smolalign/inputs/data_sources.py",
      '        labels.append(label if label not in labels else f"{label} (source {index + 1})")',
      "        labels.append(source.path)",
      ("tests/unit/test_data_pipeline.py::test_sources_of_one_folder_keep_their_own_names",),
      "sources are named by path alone: the counts of two splits overwrite each other, their rows share names"),
    M("source_weighted_to_nothing_refused", "a weight that leaves a source no row is refused", "recipes/data.md",
      "smolalign/data/mixture.py", "    if not rows:\n        raise SmolalignError(f\"data source {label}: weight",
      "    if False:\n        raise SmolalignError(f\"data source {label}: weight",
      ("tests/unit/test_data_pipeline.py::test_a_source_its_weight_leaves_no_row_is_refused",),
      "the source is dropped without a word: the mixture has one source less than the recipe lists"),
    M("json_kwargs_sources_mix", "a source whose chat_template_kwargs hold `{}` (typed Json by datasets) mixes with "
      "a source without them", "recipes/data.md", "smolalign/data/mixture.py",
      "    return dataset.map(lambda row: {c: JSON_PREFIX + json.dumps(row[c]) for c in todo}, features=features)",
      "    return dataset.map(lambda row: {c: JSON_PREFIX + json.dumps(row[c]) for c in todo})",
      ("tests/unit/test_data_pipeline.py::test_sources_with_and_without_template_kwargs_mix",),
      "the column keeps its Json type, which does not concatenate with the other source's text: a traceback"),
    M("hub_source_keyed_by_commit", "a hub dataset is identified (prepared-data cache, manifest) by the fingerprint "
      "of the rows datasets read, which follows the commit: a dataset updated on the hub is prepared again",
      "recipes/data.md", "smolalign/inputs/data_sources.py",
      '    return f"{fingerprint_of(source)}:{load_source(source)._fingerprint}"',
      "    return fingerprint_of(source)",
      ("tests/unit/test_hub_sources.py::test_the_source_is_identified_by_the_commit_read",
       "tests/unit/test_hub_sources.py::test_the_manifest_stamps_the_commit_read"),
      "keyed by id, config, split and the pinned name: rows tokenized before a hub update are reused after it"),
    M("hub_revision_read", "a hub source's `revision:` is the commit datasets reads", "recipes/data.md",
      "smolalign/inputs/data_sources.py", "split=source.split, revision=source.revision)", "split=source.split)",
      ("tests/unit/test_hub_sources.py::test_the_revision_reaches_datasets",),
      "the newest commit is read whatever the recipe pins"),
    M("pairs_sampled_under_system_prompt", "pairs are sampled under `data.system_prompt`, the prompt they train "
      "under, and the pairs' key holds it", "verbs/po.md", "smolalign/pairs/prompts.py",
      "    return recipe.data.system_prompt if recipe.data is not None else None", "    return None",
      ("tests/unit/test_pairs_cache_key.py::test_the_pairs_are_sampled_under_the_system_prompt_they_train_under",),
      "the generators never see the system prompt every pair then trains under"),
    M("precomputed_reference_per_settings", "`reference: precomputed` reads reference log-probs computed under the "
      "run's own truncation and ld_alpha, not those a run with other settings left beside the same prepared rows",
      "verbs/po.md", "smolalign/trainers/preference.py",
      "        if not args.precompute_ref_log_probs:\n            return dataset",
      "        if True:\n            return dataset",
      ("tests/integration/test_precomputed_reference.py::"
       "test_a_changed_truncation_reads_reference_log_probs_of_its_own",),
      "TRL names the log-probs' file by the rows and the weights only: a keep_end run reads keep_start's"),
    M("kto_unbalanced_labels_warned", "KTO data whose desirable and undesirable rows its weights do not balance is "
      "warned about, with the weights that would (the KTO paper's Eq. 8, as TRL's own preparation warns)",
      "verbs/po.md", "smolalign/data/prepare_preference.py",
      "    if not (round(low, 2) <= good <= round(high, 2) or round(low_bad, 2) <= bad <= round(high_bad, 2)):",
      "    if False:",
      tuple(f"tests/unit/test_kto_balance.py::{t}" for t in (
          "test_unbalanced_labels_are_warned_about_with_the_weights_that_balance_them[train0-True]",
          "test_the_warning_is_given_again_when_the_rows_come_from_the_cache")),
      "smolalign's preparation replaces TRL's, whose warning is then lost: 7 desirable to 1 trains unbalanced"),
    M("reward_sequences_are_scored_ones", "a reward model trains on the sequences a `model:` reward scores and TRL's "
      "RewardTrainer tokenizes: the whole rendered conversation (what follows the end-of-turn token included), in "
      "each row's think mode", "verbs/po.md; rewards.md", "smolalign/data/prepare_preference.py",
      "                                whole_turns=run.method_spec.scorer)", "                                whole_turns=False)",
      ("tests/unit/test_reward_sequences.py::test_reward_training_sequences_are_trls_and_the_scorers",),
      "training stops at the end-of-turn token, where the scorer reads the newline after it"),
    M("reward_model_scores_in_the_rows_mode", "a `model:` reward renders each conversation in its row's think mode "
      "(chat_template_kwargs)", "rewards.md", "rewards/reward_model.py",
      "        modes = list(chat_template_kwargs) if chat_template_kwargs is not None else [None] * len(completions)",
      "        modes = [None] * len(completions)",
      ("tests/integration/test_reward_model.py::test_each_row_is_scored_in_its_own_mode",),
      "every row is rendered in the template's default mode: a no_think answer gets think mode's system prompt"),
    M("reward_plain_pairs_as_conversations", "a reward model trains on plain-text pairs as the one-turn conversation "
      "a `model:` reward scores them as", "verbs/po.md", "smolalign/data/preference.py",
      "        if plain and self.whole_turns:  # a reward model is scored on a conversation: rendered as one below",
      "        if False:",
      ("tests/unit/test_reward_sequences.py::"
       "test_plain_text_pairs_train_as_the_one_turn_conversation_they_are_scored_as",),
      "the bare text prompt + answer + EOS is trained, where the scorer renders a chat conversation"),
    M("lora_bias_merged_by_peft", "a LoRA bias (lora_bias: true) is merged as peft merges it", "checkpoints.md",
      "smolalign/models/lora_merge.py",
      "module.use_dora.get(a, False) or module.lora_bias.get(a, False) for a",
      "module.use_dora.get(a, False) for a",
      ("tests/unit/test_lora_merge.py::test_a_lora_bias_is_merged_as_peft_merges_it",),
      "the stochastic merge adds the weights' update only: LoRA's bias is dropped"),
    M("resume_epoch_order_across_processes", "a resume inside an epoch reads the uninterrupted order with the batches "
      "sharded over processes (accelerate's wrappers hand set_epoch down)", "checkpoints.md#starting-over-and-resuming",
      "smolalign/stages/epoch_order.py", "        for wrapper in (BatchSamplerShard, SkipBatchSampler):",
      "        for wrapper in ():",
      ("tests/unit/test_epoch_order.py::test_a_resume_inside_an_epoch_reads_its_order_through_accelerates_wrappers[2]",),
      "with two processes the skipped, sharded loader never reaches the sampler: the first epoch's order is read"),
    M("lora_merge_keeps_small_updates", "LoRA adapters merged into a bf16 base keep their updates in expectation "
      "(each merged weight rounded stochastically, not to the nearest)", "checkpoints.md",
      "smolalign/models/load.py", "        model = merge_adapters(model)", "        model = model.merge_and_unload()",
      ("tests/integration/test_lora_merge_saved.py::test_a_lora_run_over_a_bf16_base_saves_its_small_updates",),
      "peft's merge rounds each weight to the nearest bf16: every update below half a spacing is lost"),
    M("lora_adapter_source_refused", "a LoRA adapter's folder as a model source is refused, naming `smolalign "
      "convert`, which merges it into its base", "verbs/convert.md", "smolalign/models/config.py",
      '    if kind == "dir" and (base := adapter_base(location)) is not None:',
      '    if False and (base := adapter_base(location)) is not None:',
      ("tests/integration/test_convert_cli.py::test_a_lora_adapter_is_merged_by_convert_and_refused_as_a_model",),
      "the adapter folder's missing config.json is reported as an unreadable config, with no way forward"),
    M("gold_merges_the_same_text", "GOLD across tokenizers compares the student's and the teacher's predictions of "
      "the same text where one side splits a token (uld_token_merge_strategy bayesian unless the recipe sets it)",
      "verbs/rl.md#on-policy-distillation-method-distill-gold-auto", "smolalign/stages/distill.py",
      '        train.setdefault("uld_token_merge_strategy", ULD_MERGE)\n', "",
      ("tests/integration/test_distill_run.py::test_gold_compares_predictions_of_the_same_text_across_tokenizers",),
      "TRL's observed merge: the student after a whole split token against the teacher after its first piece"),
    M("gold_needs_completions", "GOLD without a completion column is refused, at any lmbda (TRL tokenizes every "
      "prompt with its completion)", "verbs/rl.md#on-policy-distillation-method-distill-gold-auto",
      "smolalign/stages/distill.py", "    if off_policy and not has_completion:",
      "    if off_policy and lmbda < 1.0 and not has_completion:",
      ("tests/integration/test_distill_run.py::test_gold_without_completions_is_exit_2[1.0]",),
      "prompt rows alone pass the dry run at lmbda 1.0 and the run dies on a KeyError in TRL"),
    M("gold_rows_without_completion_refused", "GOLD refuses prompt rows without a completion (a source without "
      "them mixed with one that has them), naming a row and the count",
      "verbs/rl.md#on-policy-distillation-method-distill-gold-auto", "smolalign/stages/distill.py",
      "        if missing:  # a source without completions", "        if False:  # a source without completions",
      ("tests/integration/test_distill_run.py::test_gold_with_a_source_without_completions_is_exit_2",),
      "the dry run passes; TRL adds None to a prompt once the models loaded: a TypeError"),
    M("gold_teacher_tokenizer_checked", "GOLD aligns with the teacher tokenizer smolalign loaded and checked (its end "
      "of turn the template's, its revision the recipe's), not the teacher folder's own",
      "verbs/rl.md#on-policy-distillation-method-distill-gold-auto", "smolalign/stages/distill.py",
      "        teacher_tokenizer.save_pretrained(words)\n",
      "        teacher_tokenizer.save_pretrained(words)\n        words = run.source(\"teacher\").location\n",
      ("tests/integration/test_distill_run.py::test_gold_aligns_with_the_teacher_tokenizer_smolalign_checked",),
      "TRL reloads the teacher folder's tokenizer: another end of turn, or the hub's newest revision"),
    M("gold_data_completions_cut_warned", "GOLD's check warns when the data's completions with the longest prompt are "
      "over train.max_length (the prompt's start, its system turn first, would be cut)",
      "verbs/rl.md#on-policy-distillation-method-distill-gold-auto", "smolalign/data/check.py",
      "                        if run.method_spec.off_policy and row.get(\"completion\") is not None]",
      "                        if False]",
      ("tests/integration/test_distill_run.py::test_gold_warns_when_the_datas_completions_cut_the_prompts",),
      "only max_completion_length is counted: a long reference completion cuts the prompt's start without a word"),
    # ---------------------------------------------------------------------------------------------- think modes
    M("think_flag_template", "a /no_think system flag sets the mode in SmolLM3's template, whatever enable_thinking "
      "says", "recipes/templates.md", "chat_templates/smollm3.jinja",
      '{%- if flag.no_think -%}{%- set reasoning_mode = "/no_think" -%}',
      '{%- if false -%}{%- set reasoning_mode = "/no_think" -%}',
      ("tests/unit/test_templates.py::test_no_think_flag_renders_empty_think_blocks_everywhere",
       "tests/unit/test_think_mode.py::test_template_and_rewards_agree_on_every_row"),
      "the template ignores the flag; the rewards' rule still reads it"),
    M("think_flag_rule", "one rule reads a row's mode for training, rewards and evaluation, and agrees with the "
      "template on every row", "recipes/templates.md", "rewards/think_mode.py",
      "    mode = flag_mode(messages)", "    mode = None",
      ("tests/unit/test_think_mode.py::test_template_and_rewards_agree_on_every_row",),
      "the Python rule ignores system flags"),
    M("no_think_prefill", "/no_think prefills an empty think block before every answer and at the generation "
      "prompt", "recipes/templates.md", "chat_templates/smollm3.jinja",
      '{%- if reasoning_mode == "/no_think" -%}{{- "<think>\\n\\n</think>\\n" -}}{%- endif -%}',
      '{%- if false -%}{{- "<think>\\n\\n</think>\\n" -}}{%- endif -%}',
      ("tests/unit/test_templates.py::test_no_think_flag_renders_empty_think_blocks_everywhere",),
      "no empty think block is rendered"),
    M("row_mode_reaches_prompt", "a row's enable_thinking reaches its GRPO prompt as a /think or /no_think flag",
      "verbs/rl.md", "smolalign/data/prompts.py",
      "            messages = with_mode_flag(messages, mode, instructions)", "            messages = list(messages)",
      ("tests/integration/test_rl_run.py::test_each_rows_think_mode_reaches_its_prompt",),
      "the row's mode is dropped"),
    M("row_mode_refused_without_flags", "with a template that reads no /think or /no_think flag, a row asking for a "
      "mode of its own is refused (exit 2 naming the row), not silently rendered in another mode",
      "recipes/templates.md", "smolalign/data/prompts.py",
      "        if own and not template_reads_flags:", "        if False:",
      ("tests/integration/test_rl_run.py::test_per_row_modes_exit_2_with_a_template_that_has_none",
       "tests/unit/test_think_mode.py::test_per_row_modes_are_refused_for_a_template_without_flags"),
      "a flag is pasted into a template that ignores it"),
    M("chat_think_flag", "smolalign chat --think/--no-think prompts the model in the mode asked for",
      "verbs/chat.md", "smolalign/chat.py",
      "**({} if think is None else {MODE_KWARG: think})", "**({} if think is None else {MODE_KWARG: True})",
      ("tests/integration/test_chat.py::test_chat_prompts_in_the_mode_asked_for[False]",),
      "--no-think is ignored"),
    # ---------------------------------------------------------------------------------------------- rewards
    M("grpo_reward_weights", "GRPO sums the rewards with their recipe weights", "verbs/rl.md",
      "smolalign/stages/rl.py", 'fixed: dict = {"reward_weights": [r.weight for r in recipe.rewards]}',
      'fixed: dict = {"reward_weights": [1.0 for r in recipe.rewards]}',
      ("tests/integration/test_rl_run.py::test_builtin_rewards_and_weights_reach_trl",),
      "every weight becomes 1"),
    M("tool_turn_limit", "GRPO with tools stops an answer at tools.max_turns calls, counted in the logs",
      "verbs/rl.md#tools-multi-turn-grpo-tools", "smolalign/stages/rl.py",
      '        fixed["max_tool_calling_iterations"] = recipe.tools.max_turns',
      '        fixed["max_tool_calling_iterations"] = None',
      ("tests/integration/test_tool_rl.py::test_tool_loop_trains_only_the_models_tokens_and_reports_every_failure",),
      "no turn limit: the answer that keeps calling the python tool is not stopped"),
    M("tool_result_never_the_answer", "a math reward never reads a tool's output as the model's answer (an answer "
      "cut off after a tool result has none)", "verbs/rl.md#tools-multi-turn-grpo-tools", "rewards/text.py",
      'if last.get("role", "assistant") != "assistant" or last.get("tool_calls"):',
      'if False:',
      ("tests/unit/test_tools.py::test_a_trajectory_that_ends_on_a_tool_result_has_no_answer",),
      "the last message is read whatever its role: the tool's printed result scores as the answer"),
    M("tool_time_limit", "a team's tool that runs past tools.timeout returns an error to the model, counted",
      "verbs/rl.md#tools-multi-turn-grpo-tools", "smolalign/tools/team.py",
      "        thread.join(self.timeout)", "        thread.join()",
      ("tests/unit/test_tools.py::test_a_teams_tools_are_held_to_their_limits",),
      "the call waits for the tool however long it takes"),
    M("eval_environment_per_answer", "eval --environment gives each answer its own environment instance, reset "
      "first", "verbs/eval.md#with-an-environment-environment", "smolalign/tools/team.py",
      "    environment = factory()\n    try:\n        observation",
      "    environment = getattr(factory, \"_shared\", None) or setattr(factory, \"_shared\", factory()) "
      "or factory._shared\n    try:\n        observation",
      ("tests/integration/test_eval_tools.py::"
       "test_eval_with_an_environment_resets_one_per_answer_offers_its_methods_and_scores_its_reward",),
      "one instance serves every answer: the second answer's try is not its first"),
    M("cpu_bf16_training_autocast", "on a CPU with AMX or AVX512-BF16, training computes under bf16 autocast over "
      "float32 weights, saved in float32", "checkpoints.md#precision", "smolalign/hardware.py",
      '    return requested == "auto" and cpu_bf16_pays(hardware, width)', "    return False",
      ("tests/integration/test_cpu_precision.py::"
       "test_sft_computes_in_the_precision_the_cpu_decides_and_saves_float32[1-auto-computes0]",),
      "training computes in float32 on every CPU"),
    M("cpu_bf16_narrow_float32", "on a CPU with bf16, a model narrower than 384 trains and generates in float32, "
      "the faster precision there", "checkpoints.md#precision", "smolalign/hardware.py",
      "    return forced or width is None or width >= CPU_BF16_MIN_WIDTH", "    return True",
      ("tests/integration/test_cpu_precision.py::"
       "test_on_a_bf16_cpu_a_model_narrower_than_384_trains_and_generates_in_float32[64 wide]",),
      "every width computes in bf16 on a bf16 CPU"),
    M("bf16_updates_kept", "bf16 weights trained without a launcher's float32 masters (a GPU's default, "
      "model.dtype bfloat16) learn at float32's pace: AdamW computes each update in float32 and rounds it into the "
      "weights stochastically (30 SFT steps of a 384-wide model end within 2% of float32's loss)",
      "checkpoints.md#precision", "smolalign/stages/lifecycle.py", "    keep_low_precision_updates(trainer)\n", "",
      ("tests/integration/test_update_precision.py::test_bf16_weights_learn_at_the_pace_of_float32",
       "tests/integration/test_update_precision.py::test_preference_and_grpo_runs_train_bf16_weights_with_it_too"),
      "plain AdamW on bf16 weights: the loss ends 14% above float32's (5.93 against 5.20), and po and rl keep bf16 "
      "moments"),
    M("bf16_stochastic_rounding", "an AdamW update far below bf16's spacing reaches bf16 weights on average (stochastic "
      "rounding, not rounding to the nearest)", "checkpoints.md#precision", "smolalign/stages/stochastic_rounding.py",
      "                    p.copy_(round_stochastically(weight, generator))",
      "                    p.copy_(weight)",
      ("tests/integration/test_update_precision.py::"
       "test_an_update_far_below_bf16s_spacing_reaches_the_weights_on_average",
       "tests/integration/test_update_precision.py::test_bf16_weights_learn_at_the_pace_of_float32"),
      "the float32 update is rounded to the nearest bf16: weights of 1.0 never move by 1e-4 steps"),
    M("bf16_fused_rounding", "on a CUDA GPU each bf16 tensor's AdamW step is one fused Triton kernel (22 bytes a "
      "parameter against the torch operations' ~126): torch's AdamW moments, the weight rounded stochastically",
      "checkpoints.md#precision", "smolalign/stages/stochastic_rounding_kernel.py",
      "    noise = (tl.randint(seed, offsets.to(tl.uint32)) & 0xFFFF).to(tl.int32)\n",
      "    noise = (tl.randint(seed, offsets.to(tl.uint32)) & 0).to(tl.int32) + 0x8000\n",
      ("tests/integration/test_stochastic_rounding_kernel.py::"
       "test_an_update_far_below_bf16s_spacing_reaches_the_weights_on_average",
       "tests/integration/test_stochastic_rounding_kernel.py::test_the_seed_decides_the_noise"),
      "the kernel rounds to the nearest bf16 (half a spacing added, no noise): an update far below the spacing is "
      "lost and the seed changes nothing"),
    M("bf16_resume_float32_moments", "a bf16-weights run resumes with float32 AdamW moments and ends on the "
      "uninterrupted run's weights bit for bit (torch casts loaded optimizer state to the weights' dtype)",
      "checkpoints.md#precision", "smolalign/stages/stochastic_rounding.py",
      "                self.state[p][key] = value.to(device=p.device, dtype=torch.float32)\n",
      "                pass\n",
      ("tests/unit/test_stochastic_rounding.py::test_a_resumed_optimizer_rounds_as_the_uninterrupted_one",
       "tests/integration/test_update_precision.py::"
       "test_a_bf16_run_resumes_with_float32_moments_to_the_uninterrupted_weights"),
      "the loaded moments stay torch's bf16 casts: the first step after the resume refuses them (a lerp of bf16 "
      "moments with a float32 gradient)"),
    M("bf16_rounding_follows_the_step", "the stochastic rounding's noise is drawn from the run's seed, the step and the "
      "tensor, so a resumed optimizer rounds as the uninterrupted one", "checkpoints.md#precision",
      "smolalign/stages/stochastic_rounding.py",
      "                    generator = torch.Generator(device=p.device).manual_seed(seed)\n",
      "                    generator = None\n",
      ("tests/unit/test_stochastic_rounding.py::test_a_resumed_optimizer_rounds_as_the_uninterrupted_one",),
      "the noise comes from the process's random stream, which a new process does not continue"),
    M("float16_trains_float32_masters", "model.dtype float16 on a GPU trains float32 master weights under fp16 autocast "
      "and generates in float16 (float16 weights cannot train: torch's loss scaler refuses their gradients)",
      "checkpoints.md#precision", "smolalign/hardware.py",
      '        return "float16" if adapters and hardware.on_gpu else "float32"\n',
      '        return "float16"\n',
      ("tests/unit/test_precision_on_a_gpu.py::test_a_float16_recipe_trains_float32_masters_and_keeps_frozen_weights_float16",),
      "the trainer loads float16 weights and stops at its first step (\"Attempting to unscale FP16 gradients\")"),
    M("continuous_batching_refused", "GRPO's train.use_transformers_continuous_batching is refused before anything "
      "loads where the run trains float32 parameters under autocast (TRL casts the training model to bf16 in place)",
      "checkpoints.md#precision", "smolalign/stages/rl.py", "    check_continuous_batching(run)\n", "",
      ("tests/integration/test_update_precision.py::"
       "test_grpo_with_continuous_batching_over_float32_masters_is_refused_before_loading",),
      "the dry run passes, and the run would train its float32 masters as bf16 weights with bf16 moments"),
    M("qlora_fsdp_float32_masters", "under FSDP, QLoRA's bf16 adapters become float32 master weights before training "
      "(accelerate's upcast skips a model holding 4-bit weights)", "checkpoints.md#precision",
      "smolalign/stages/low_precision_updates.py", "        upcast_to_float32(trainer.model, low)\n", "",
      ("tests/integration/test_update_precision.py::"
       "test_qloras_bf16_adapters_get_stochastic_rounding_alone_and_float32_masters_under_fsdp",),
      "the adapters stay bf16 under FSDP and train with plain AdamW, rounded to the nearest"),
    M("launcher_masters_not_compensated_twice", "under DeepSpeed's ZeRO or FSDP, which keep float32 masters, AdamW keeps "
      "torch's (no double compensation)", "checkpoints.md#precision", "smolalign/stages/low_precision_updates.py",
      "    if not low or sharding is not None:\n", "    if not low:\n",
      ("tests/integration/test_update_precision.py::"
       "test_float32_weights_lora_and_launchers_masters_keep_torchs_adamw",),
      "the stochastic-rounding AdamW is handed to a trainer whose launcher already keeps float32 masters"),
    M("plan_names_the_update_rounding", "the dry run's dtype row says how bf16 trained parameters keep their updates: "
      "stochastic rounding with AdamW, rounding to the nearest with another train.optim, a launcher's float32 masters",
      "checkpoints.md#precision", "smolalign/hardware.py", "    if compensates_updates(trained, False, optim):\n",
      "    if True:\n",
      ("tests/unit/test_precision.py::test_the_plan_names_the_optimizer_that_updates_bf16_weights",),
      "the plan claims stochastic rounding for adafactor and 8-bit AdamW, which round to the nearest"),
    M("sweep_stale_cells_refused", "a sweep cell on disk that ran another recipe than the cell's recipe now is "
      "refused before any cell runs, naming the changed keys", "verbs/sweep.md", "smolalign/sweep/run.py",
      "        refuse_stale_cells([_array_cell(sweep)] if request.array_task else runs)\n", "        pass\n",
      ("tests/integration/test_sweep.py::test_two_cells_run_evaluate_compare_and_resume",),
      "the finished cells are skipped and compared as if they had trained with the edited recipe"),
    M("sweep_dropped_set_refused", "a sweep cell started with a --set the sweep no longer passes is refused as "
      "stale", "verbs/sweep.md", "smolalign/sweep/cells.py",
      "        written = _paths(run.resolved.recipe.raw) | _set_before(run.run_dir)",
      "        written = _paths(run.resolved.recipe.raw)",
      ("tests/integration/test_sweep.py::test_two_cells_run_evaluate_compare_and_resume",),
      "the cell trained with the dropped --set is skipped and compared beside cells without it"),
    M("sweep_set_of_a_grid_key_refused", "a sweep's --set of a key its grid sets is refused: the cells' values "
      "would replace it", "verbs/sweep.md", "smolalign/sweep/run.py",
      "    refuse_overridden_axes(request.overrides, cells[0].overrides)\n", "",
      ("tests/unit/test_bad_input_sweep.py::test_refused[set-of-a-grid-key]",
       "tests/unit/test_bad_input_sweep.py::test_refused[set-seed-with-seeds]"),
      "the sweep runs with the grid's values and the --set value is never used"),
    M("sweep_compiled_kernels_kept", "a sweep keeps compiled kernels under SMOLALIGN_CACHE/compile too: a Slurm array "
      "task trains its cell in the sweep command's own process", "scaling/memory.md", "smolalign/cli/sweep.py",
      "    keep_compiled_kernels()  # before anything imports TRL", "    pass  # before anything imports TRL",
      ("tests/integration/test_compiled_kernels_kept.py::"
       "test_a_train_commands_compile_caches_are_under_smolalign_cache[sweep-args1]",),
      "an array task compiles into torch's default in the job's private temporary directory, lost with the job"),
    M("plan_states_generation_first_step", "the plan states a GRPO run's first step with transformers' generate apart "
      "from the step time (30 s measured on an H200 against 7.5 s later)", "scaling/memory.md",
      "smolalign/estimate/plan_rows.py", "            if not backend.startswith(\"vllm\"):\n", "            if False:\n",
      ("tests/unit/test_step_time.py::test_the_plan_states_the_first_steps_wait_apart_from_the_step_time"
       "[grpo-sdpa-transformers-the first step takes longer than the rest (generation warms up): 30 s]",),
      "the plan gives 7.5 s a step and a newcomer's first step waits four times that unannounced"),
    M("compiled_kernels_kept", "a train command keeps what TorchInductor and Triton compile (flex attention's kernels) "
      "under SMOLALIGN_CACHE/compile, which outlives a container and a Slurm job's /tmp",
      "scaling/memory.md", "smolalign/cli/train.py",
      "    keep_compiled_kernels()  # before anything imports TRL", "    pass  # before anything imports TRL",
      ("tests/integration/test_compiled_kernels_kept.py::"
       "test_a_train_commands_compile_caches_are_under_smolalign_cache",),
      "torch keeps its default, torchinductor_<user> in the temporary directory (set into the environment when TRL "
      "is imported)"),
    M("precompiled_header_kept", "on a CPU, a run that compiles keeps TorchInductor's precompiled C++ header with its "
      "other compiled kernels under SMOLALIGN_CACHE/compile, not in the job's temporary directory",
      "scaling/memory.md", "smolalign/stages/library_patches.py",
      '        patches.enter_context(precompiled_header_kept(accelerator, bool(run.settings.train.get("torch_compile"))))\n',
      "",
      ("tests/unit/test_compile_cache.py::"
       "test_a_run_that_compiles_on_a_cpu_keeps_the_precompiled_header_with_its_kernels[cpu-compiling]",
       "tests/integration/test_compiled_kernels_kept.py::test_a_runs_compiled_graphs_land_in_smolalign_cache"),
      "torch precompiles the header into torchinductor_<user> under the temporary directory: ~10 s again in every "
      "job whose /tmp is its own"),
    M("gpu_float32_masters", "model.dtype float32 on a GPU trains float32 master weights under bf16 (fp16) autocast; "
      "pure float32 only with train.bf16: false", "checkpoints.md#precision", "smolalign/hardware.py",
      '    return {"bf16": hardware.bf16, "fp16": not hardware.bf16}', '    return {"bf16": dtype == "bfloat16", '
      '"fp16": False}',
      tuple(f"tests/unit/test_precision_on_a_gpu.py::test_the_trainer_config_on_a_gpu_carries_the_intended_precision"
            f"[{case}-{stage}]" for case in ("H100-float32", "V100-auto") for stage in ("sft", "po", "rl")),
      "float32 weights train in pure float32 on a GPU, 2.9x slower than under autocast on an H200"),
    M("plan_precision_for_launch_gpu", "a dry run made on a CPU for launch.gpu states the GPU's precision in its "
      "dtype row, as its memory rows do", "scaling/memory.md", "smolalign/plan.py",
      "    planned = hardware_planned_for(run)\n", "    planned = hardware\n",
      tuple("tests/unit/test_precision_on_a_gpu.py::test_a_plan_for_a_gpu_made_on_a_cpu_states_the_gpus_precision"
            f"[{case}]" for case in ("auto-bfloat16 weights, bf16 compute; AdamW rounds each update into them "
                                     "stochastically (float32 moments)", "float32-float32 master weights, bf16 autocast")),
      "the plan for an H100 made on a laptop states the laptop's precision (float32 weights under CPU autocast) beside "
      "memory sized for the GPU's bf16 weights"),
    M("cpu_deepspeed_planned_float32", "on a CPU, the plan of a DeepSpeed run states float32 without autocast, as it "
      "trains", "checkpoints.md#precision", "smolalign/hardware.py",
      "    if sharded:  # on a CPU, DeepSpeed over gloo (FSDP presets need GPUs): stages/trainer_config.py turns bf16 off\n",
      "    if False:\n",
      ("tests/unit/test_precision_on_a_gpu.py::test_deepspeed_on_a_cpu_is_planned_without_autocast",),
      "the plan promises bf16 autocast to a DeepSpeed run on a bf16 CPU that trains in float32"),
    M("resume_of_a_finished_run_refused", "--resume of a run whose newest checkpoint reached train.max_steps, or the "
      "last step of the epochs of an unchanged recipe, is refused before anything is written; a raised "
      "train.max_steps resumes", "checkpoints.md#starting-over-and-resuming",
      "smolalign/runs/rundir.py",
      "        refuse_resuming_a_finished_run(checkpoint, max_steps, unchanged, resolved)\n",
      "        pass\n",
      ("tests/integration/test_resume_finished.py::test_a_finished_run_is_refused_and_left_as_it_was",
       *(f"tests/integration/test_resume_finished.py::test_a_run_that_ends_by_epochs_trains_no_step_past_its_end[{case}]"
         for case in ("at-an-epochs-end", "inside-an-epoch"))),
      "transformers' Trainer trains one step past the end and saves over the finished model"),
    M("gold_renders_with_template_kwargs", "GOLD renders its prompts with the recipe's template.kwargs and each "
      "row's think mode", "verbs/rl.md#on-policy-distillation-method-distill-gold-auto", "smolalign/stages/distill.py",
      "        keep.append(\"chat_template_kwargs\")\n", "",
      ("tests/integration/test_distill_run.py::test_gold_renders_prompts_with_the_recipes_template_kwargs",),
      "a no_think recipe's prompts are rendered in think mode: GOLD gets no kwargs"),
    M("resume_under_another_method_refused", "a --resume whose recipe changed method is refused before anything "
      "loads, dry run or not", "checkpoints.md#starting-over-and-resuming", "smolalign/runs/rundir.py",
      '    "method": "the steps after the checkpoint would train another loss',
      '    "not a key": "the steps after the checkpoint would train another loss',
      tuple(f"tests/integration/test_resume_refusals.py::test_a_resume_under_another_method_is_refused[{m}]"
            for m in ("apo_zero", "kto")),
      "a DPO run resumes as APO-zero or KTO with a warning: another loss on rows counted for DPO"),
    M("weights_only_checkpoint_not_resumed", "--resume refuses a checkpoint saved with train.save_only_model (no "
      "optimizer, schedule or RNG state)", "checkpoints.md#starting-over-and-resuming", "smolalign/runs/rundir.py",
      "            refuse_a_weights_only_checkpoint(checkpoint)\n", "            pass\n",
      ("tests/integration/test_resume_refusals.py::test_a_weights_only_checkpoint_is_not_resumed",),
      "transformers resumes with a new optimizer and the schedule from its start, without a word"),
    M("train_loss_of_every_rank", "the manifest's mean training loss counts every process, the steps after the "
      "last logging step included", "checkpoints.md#starting-over-and-resuming", "smolalign/runs/metrics.py",
      "            trainer._tr_loss = nested_gather(trainer._tr_loss, trainer.args.parallel_mode).mean()",
      "            trainer._tr_loss = trainer._tr_loss",
      ("tests/integration/test_launch.py::test_two_processes_on_cpu",),
      "transformers adds the unlogged tail from rank 0 alone: the mean depends on logging_steps"),
    M("launched_ranks_read_smolalign_first", "launched processes read smolalign's own packages before the working "
      "directory's modules (a team's rewards.py there)", "scaling/index.md", "smolalign/launch.py",
      "    return subprocess.run(command, env={**env, **SAFE_PATH}).returncode",
      "    return subprocess.run(command, env=env).returncode",
      ("tests/integration/test_launch.py::test_a_rewards_file_in_the_working_directory_does_not_hide_smolaligns",),
      "python -m on each rank puts the working directory first: rewards.py hides the rewards package"),
    M("resume_under_another_global_batch_refused", "a --resume whose global batch differs from the run's start "
      "(another process count) is refused", "checkpoints.md#starting-over-and-resuming", "smolalign/runs/rundir.py",
      "            refuse_another_global_batch(run_dir, global_batch)\n", "",
      ("tests/integration/test_launch.py::test_two_processes_on_cpu",),
      "a 2-process run resumed on one process trains another schedule on other rows, in silence"),
    M("resume_epoch_order", "a resume in a later epoch reads the prompts of GRPO and distillation (TRL's "
      "RepeatSampler) in the uninterrupted run's order, and ends on its weights",
      "checkpoints.md#starting-over-and-resuming", "smolalign/stages/epoch_order.py",
      '        patches.enter_context(added(RepeatSampler, "set_epoch", set_epoch))', "        pass",
      (*(f"tests/integration/test_resume_epochs.py::test_a_resume_in_the_second_epoch_reads_the_uninterrupted_order"
         f"[{stage}]" for stage in ("grpo", "distill")),
       "tests/unit/test_epoch_order.py::test_each_epoch_reads_trls_own_order_read_or_skipped"),
      "the sampler's own generator goes on from the start: the resumed epoch reads the first epoch's order"),
    M("resume_into_another_shape_refused", "a --resume whose recipe changed peft, model.quantization or train.optim "
      "is refused before anything loads, dry run or not", "checkpoints.md#starting-over-and-resuming",
      "smolalign/runs/rundir.py", "        refuse_an_incompatible_resume(run_dir, changes)\n", "",
      tuple(f"tests/integration/test_resume_finished.py::"
            f"test_a_resume_whose_checkpoint_cannot_load_is_refused_before_loading[{case}]"
            for case in ("lora-added", "another-optimizer")),
      "the dry run passes; the run loads the model and dies loading the checkpoint into another shape"),
    M("resume_at_the_last_step_trains_nothing", "--resume of a run whose checkpoint holds its last step (by "
      "train.max_steps or by epochs) saves that checkpoint's weights as the model without training a step", "checkpoints.md#starting-over-and-resuming",
      "smolalign/stages/lifecycle.py", "        trainer.add_callback(no_step_callback())\n", "        pass\n",
      ("tests/integration/test_resume_finished.py::"
       "test_a_run_cut_off_in_its_final_save_saves_the_checkpoints_weights_without_a_step",
       *(f"tests/integration/test_resume_finished.py::test_a_run_that_ends_by_epochs_trains_no_step_past_its_end[{case}]"
         for case in ("at-an-epochs-end", "inside-an-epoch"))),
      "the model saved is one step past train.max_steps, trained on a batch the run never planned"),
    M("files_readable_as_the_umask_says", "a run's files and its saved model's weights get the permissions the umask "
      "gives a new file", "checkpoints.md#starting-over-and-resuming", "smolalign/atomic.py",
      "        os.chmod(staging, created_mode())\n", "",
      ("tests/unit/test_file_permissions.py::test_a_file_written_atomically_has_the_mode_open_gives[umask-022]",),
      "a run's manifest, card and curves are readable by their owner only (0600)"),
    M("recipe_names_its_verb", "a recipe run with another verb is refused naming the verb it is for, not as an unknown "
      "key", "verbs/index.md", "smolalign/recipe/validate.py",
      "    # The recipe's own stage first: another verb's sections (method:, rewards:, pairs:) would read as unknown "
      "keys\n",
      '    reject_unknown(raw, (*SECTIONS, *STAGE_SECTIONS.get(stage, ())), "")\n',
      tuple(f"tests/unit/test_recipe.py::test_a_recipe_run_with_another_verb_names_its_own[{case}]" for case in (
          "quickstart/po_graded-sft-po", "quickstart/distill-sft-rl", "quickstart/online_dpo-po-rl",
          "quickstart/po_graded-rl-po")),
      "`smolalign sft` of a po recipe says `unknown key method`"),
    M("prompt_budget_checked", "a po dry run refuses prompts that alone fill train.max_length in every checked row "
      "(preference data, or pairs still to generate), before any pair is generated", "verbs/po.md",
      "smolalign/data/check.py", "    if max_length is None or not len(lengths):\n        return\n",
      "    return\n",
      ("tests/integration/test_pairs_dry_run.py::"
       "test_prompts_that_fill_max_length_are_refused_before_any_pair_is_generated",
       "tests/integration/test_pairs_dry_run.py::test_pairs_whose_prompts_fill_max_length_are_refused_by_the_dry_run"),
      "the dry run passes, and the run generates its pairs and then drops every row for its prompt's length"),
    M("nothing_left_to_train_refused", "an SFT run whose checked rows would all be dropped with no trained token is "
      "refused before it loads, packed or not", "verbs/index.md", "smolalign/data/prepare.py",
      "    if len(encoded) == 0:\n        cut = ", "    if False:\n        cut = ",
      tuple(f"tests/integration/test_nothing_left_to_train.py::"
            f"test_an_sft_run_that_would_drop_every_row_is_refused_before_loading[{case}]"
            for case in ("unpacked", "packed")),
      "the dry run passes; the run loads the model, writes its run directory and dies in the trainer on an empty "
      "dataset (packed: the dry run itself dies with a traceback)"),
    M("held_out_rows_checked", "the check before loading renders a sample of the held-out split too, and refuses "
      "one that would be left with no row", "verbs/index.md", "smolalign/data/check.py",
      '        check_sample(held_out_rows, "checked held-out")\n', "        pass\n",
      ("tests/integration/test_nothing_left_to_train.py::test_a_held_out_split_left_with_no_row_is_refused",),
      "a held-out split whose every row is dropped passes, and the run evaluates nothing in silence"),
    M("reward_model_length_drops_before_loading", "a reward model's pairs with a side longer than train.max_length "
      "are dropped when the data is prepared, before the model loads; every checked pair too long is refused",
      "verbs/po.md", "smolalign/data/prepare_preference.py",
      "    return longest > max_length if whole else prompt >= max_length\n",
      "    return prompt >= max_length\n",
      ("tests/integration/test_nothing_left_to_train.py::"
       "test_a_reward_model_whose_every_pair_is_too_long_is_refused_and_some_are_dropped_before_loading",),
      "the dry run passes; the run loads the classifier and dies on an empty dataset, or trains on cut sequences"),
    M("reward_param_types_checked", "a built-in reward's parameter of the wrong type (a string for a number, true for "
      "an integer) is refused naming the reward and the parameter", "rewards.md", "rewards/registry.py",
      "        if expected and not (isinstance(value, expected)", "        if False and not (isinstance(value, expected)",
      ("tests/unit/test_bad_input_checks.py::test_refused[reward-param-wrong-type]",
       "tests/unit/test_bad_input_checks.py::test_refused[reward-param-bool-for-int]"),
      "math_accuracy with timeout_seconds 'x' reads every gold answer as unparseable; ngram_size true counts as 1"),
    M("code_reward_rows_checked", "a row whose tests the code reward cannot run is refused before anything loads, "
      "naming the row", "rewards.md", "rewards/code.py",
      "        self.row_problem = functools.partial(tests_problem, test_column)\n", "",
      tuple(f"tests/unit/test_data_check.py::test_code_reward_rows_whose_tests_cannot_run_are_refused_before_loading"
            f"[{case}]" for case in ("10000", "0")),
      "the dry run passes; the run loads the model, generates, and dies at the first reward call"),
    M("reward_model_eval_refused", "an eval: section on a reward model run is refused before anything loads",
      "verbs/po.md", "smolalign/stages/po.py",
      "    if run.method_spec.scorer and run.recipe.evaluation is not None:\n", "    if False:\n",
      ("tests/integration/test_po_run.py::test_an_eval_section_on_a_reward_model_is_refused",),
      "the run trains the reward model, then evaluates its backbone's generations as its 'after', head left out"),
    M("context_bound_warned", "a sequence bound past the model's max_position_embeddings is warned about before "
      "loading (sft/po: train.max_length; grpo: the longest checked prompt + max_completion_length)",
      "verbs/index.md", "smolalign/data/check_warnings.py", "    if positions and bound > positions:\n", "    if False:\n",
      ("tests/integration/test_sequence_bounds.py::test_a_max_length_past_the_models_positions_is_warned_about",
       "tests/integration/test_sequence_bounds.py::"
       "test_grpo_prompts_and_answers_past_the_models_positions_are_warned_about"),
      "the run trains on positions the model never saw, in silence"),
    M("prompt_cut_for_the_loss_warned", "online DPO and GOLD prompts whose start would be cut for the loss are warned "
      "about before loading", "verbs/rl.md", "smolalign/data/check_warnings.py",
      "    if not (max_length and answer) or longest_prompt + max(answer, longest_data_answer) <= max_length:\n",
      "    if True:\n",
      ("tests/integration/test_sequence_bounds.py::test_online_dpo_prompts_cut_for_the_loss_are_warned_about",),
      "the loss reads cut prompts the policy answered whole, in silence"),
    M("pairs_thresholds_checked", "a pairs threshold no score can meet (graded margin, unpaired threshold, verifier "
      "threshold) is refused before anything generates", "verbs/po.md", "smolalign/pairs/thresholds.py",
      '        bounds = getattr(reward, "score_range", None)\n', "        bounds = None\n",
      (*(f"tests/unit/test_pairs_thresholds.py::test_a_graded_margin_wider_than_the_scorer_spans_is_refused[{case}]"
         for case in ("one", "two-weighted", "a-negative-weight")),
       "tests/unit/test_pairs_thresholds.py::test_an_unpaired_threshold_labelling_every_candidate_alike_is_refused",
       "tests/unit/test_pairs_thresholds.py::test_a_verifier_threshold_out_of_the_rewards_reach_is_refused"),
      "the dry run passes; the run samples and scores every answer, then drops every prompt"),
    M("pair_generators_checked", "a po dry run checks that the models which would generate its pairs exist",
      "verbs/po.md", "smolalign/stages/po.py", "        check_generator_sources(recipe.pairs)\n", "",
      ("tests/integration/test_pairs_dry_run.py::test_a_missing_generator_is_refused_by_the_dry_run",),
      "the dry run plans pairs from a folder that is not there and exits 0; the real run fails after loading"),
    M("bf16_moments_counted", "the plan's memory estimate counts the float32 moments of bf16 weights (8 bytes a "
      "parameter, not 4)", "checkpoints.md#precision", "smolalign/estimate/memory.py",
      "    state_bytes = 4 if compensates_updates(setup.dtype, False, optim) else b", "    state_bytes = b",
      ("tests/unit/test_precision_on_a_gpu.py::test_the_memory_estimate_counts_float32_moments_where_they_are_kept",
       "tests/integration/test_estimate.py::test_plain_and_ddp_states_in_bf16"),
      "the estimate counts bf16 moments, half what the optimizer holds"),
    M("cpu_bf16_generation", "on a CPU with AMX or AVX512-BF16, eval and chat generate with bfloat16 weights",
      "checkpoints.md#precision", "smolalign/hardware.py",
      '    if requested == "auto" and cpu_bf16_pays(hardware, width):\n        return "bfloat16"\n',
      "",
      ("tests/integration/test_cpu_precision.py::"
       "test_eval_and_chat_generate_in_the_precision_the_cpu_decides[1-generates0]",),
      "generation loads float32 weights on every CPU"),
    M("cpu_generation_copy", "on a CPU with bf16, trainers that sample while training generate from a bfloat16 "
      "copy of the float32 policy, refreshed before each generation", "checkpoints.md#precision",
      "smolalign/stages/library_patches.py", "patches.enter_context(bf16_generation_copy(accelerator))",
      "patches.enter_context(bf16_generation_copy(\"cuda\"))",
      ("tests/integration/test_generation_copy.py::test_a_grpo_run_samples_in_bf16_and_trains_float32_weights",),
      "runs never install the copy: GRPO generates with the float32 weights under autocast"),
    M("cpu_autocast_eager_attention", "on a CPU with bf16, models trained under autocast use smolalign's attention "
      "(eager for short sequences) unless the recipe names one", "checkpoints.md#precision", "smolalign/hardware.py",
      "    return CPU_AUTOCAST_ATTENTION if weights == \"float32\" and cpu_autocast(requested, hardware, width) else None",
      "    return None",
      ("tests/integration/test_cpu_precision.py::"
       "test_sft_computes_in_the_precision_the_cpu_decides_and_saves_float32[1-auto-computes0]",),
      "training keeps transformers' default, SDPA"),
    M("cpu_attention_sdpa_when_long", "under CPU autocast, attention over more than 512 keys runs SDPA, with the "
      "mask packing and padding need", "checkpoints.md#precision", "smolalign/models/cpu_attention.py",
      "    if eager is None or key.shape[-2] > LONGEST_EAGER_KEYS:", "    if eager is None:",
      ("tests/integration/test_cpu_attention.py::"
       "test_a_padded_batch_gets_the_logits_of_the_implementation_for_its_length[513-sdpa]",
       "tests/integration/test_cpu_attention.py::"
       "test_packed_documents_longer_than_the_eager_limit_keep_their_own_logits"),
      "every length runs eager attention"),
    M("cpu_attention_eager_when_short", "under CPU autocast, attention over at most 512 keys runs eager",
      "checkpoints.md#precision", "smolalign/models/cpu_attention.py",
      "    if eager is None or key.shape[-2] > LONGEST_EAGER_KEYS:", "    if True:",
      ("tests/integration/test_cpu_attention.py::"
       "test_a_padded_batch_gets_the_logits_of_the_implementation_for_its_length[512-eager]",),
      "every length runs SDPA"),
    M("cpu_scored_positions", "on a CPU, TRL's fused LM head projects only the positions it scores",
      "checkpoints.md#precision", "smolalign/stages/library_patches.py",
      "patches.enter_context(scored_positions_only(accelerator))", "patches.enter_context(scored_positions_only(\"cuda\"))",
      ("tests/integration/test_scored_positions.py::test_an_sft_run_from_the_cli_projects_only_the_tokens_it_trains",),
      "runs keep TRL's CPU choice: every position of the batch is projected"),
    M("grpo_shared_prompts", "on a CPU, GRPO runs each distinct prompt of a batch through the model once and its "
      "answers on that prompt's key/value cache: the same log-probabilities and gradients as TRL's pass over every "
      "row whole", "checkpoints.md#precision", "smolalign/recipe/method_table.py",
      "    from smolalign.trainers.grpo import SharedPromptGRPOTrainer",
      "    from trl import GRPOTrainer as SharedPromptGRPOTrainer",
      ("tests/integration/test_grpo_shared_prompts.py::test_a_grpo_run_from_the_cli_shares_its_prompts",),
      "TRL's GRPOTrainer as it comes: every answer's row runs its prompt again"),
    M("grpo_shared_prefill", "on a CPU with bf16, GRPO's rollouts read each distinct prompt once for the answers "
      "that repeat it: the same sequences as transformers' generate",
      "checkpoints.md#precision", "smolalign/stages/generation_copy.py",
      "    twin.generate = types.MethodType(generate_sharing_prompts, twin)", "    pass",
      ("tests/integration/test_shared_prefill.py::test_a_grpo_run_reads_each_prompt_once_for_its_rollouts",),
      "every rollout row runs its prompt again before its first token"),
    M("gguf_read_once", "transformers' GGUF loaders share one reader per file and one weight-name table per model "
      "shape: a first run's dry-run read and conversion of a GGUF model parse the file once each, to the same "
      "metadata and tensor bytes",
      "verbs/convert.md#gguf-files", "smolalign/models/gguf_read.py",
      "    gguf.GGUFReader, gguf.get_tensor_name_map = shared_reader, functools.lru_cache(maxsize=None)(name_map)\n",
      "    pass\n",
      ("tests/integration/test_gguf_read.py::test_the_shared_reader_reads_what_ggufs_own_reader_reads",
       "tests/integration/test_gguf_read.py::test_a_first_run_parses_the_bundled_file_once_per_command_step"),
      "transformers' own loaders: a new reader for every read, six for a first run"),
    M("gguf_plain_array", "the shared GGUF reader slices a plain array view of the mapped file, not a numpy.memmap",
      "verbs/convert.md#gguf-files", "smolalign/models/gguf_read.py",
      "            readers[key] = plain_reader_class(path, mode)",
      "            readers[key] = reader_class(path, mode)",
      ("tests/integration/test_gguf_read.py::test_the_shared_reader_reads_what_ggufs_own_reader_reads",),
      "the shared reader's data is gguf's memmap again"),
    M("shared_prefill_positions", "a prompt read once for its copies keeps the positions generation gives it (left "
      "padding counted out)",
      "checkpoints.md#precision", "smolalign/trainers/shared_prefill.py",
      "    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generation computes them",
      "    positions = torch.arange(width - 1).expand_as(mask)",
      ("tests/integration/test_shared_prefill.py::test_the_same_sequences_as_transformers_generate[False]",
       "tests/integration/test_shared_prefill.py::test_the_same_sequences_as_transformers_generate[True]"),
      "left-padded prompts cached at shifted positions: other answers"),
    M("distill_mixed_precision", "on-policy distillation (method distill) trains the student under the run's mixed "
      "precision: on a CPU with bf16, its loss's forward computes in bf16 over float32 weights",
      "checkpoints.md#precision", "smolalign/recipe/method_table.py",
      "    from smolalign.trainers.distillation import MixedPrecisionDistillationTrainer",
      "    from trl import DistillationTrainer as MixedPrecisionDistillationTrainer",
      ("tests/integration/test_cpu_precision.py::"
       "test_distillation_trains_the_student_in_the_precision_the_cpu_decides[1-computes0]",),
      "TRL's DistillationTrainer as it comes: its forward redirection sets autocast aside, the student trains in "
      "float32"),
    M("vllm_cpu_sampler", "on a CPU, vLLM's engine samples through smolalign's sampler: the top-p nucleus among the "
      "most likely tokens and each token drawn from one uniform number of its request's generator, reruns repeating",
      "vllm-cpu.md", "smolalign/generation/vllm_engine.py",
      "inspected_here(hardware), fast_cpu_sampling(hardware.accelerator):",
      "inspected_here(hardware), fast_cpu_sampling(\"cuda\"):",
      ("tests/integration/test_vllm_generation.py::"
       "test_sampled_vllm_answers_come_from_smolaligns_draw_and_repeat",),
      "engines keep vLLM's sampler: every row's vocabulary sorted for a top-p, an exponential drawn for every word"),
    M("judges_asked_first", "a judge whose server does not answer is refused before anything loads, named by its "
      "recipe key, wherever the recipe names it (GRPO's rewards, a graded scorer, a verifier, eval:)",
      "scaling/preflight.md", "smolalign/preflight/services.py",
      "                function.probe()\n", "                pass\n",
      ("tests/unit/test_preflight.py::test_every_judge_the_run_built_is_asked_before_anything_loads",),
      "the run starts and every judged answer scores None"),
    M("rewards_built_once", "parsing a recipe imports neither TRL nor peft and builds nothing; every reward a recipe "
      "names is built once, when it is resolved, and every step of the run uses that one",
      "architecture.md#parse-resolve-run", "smolalign/recipe/method_keys.py",
      '    rewards = tuple(build(RewardSection, item, f"rewards.{i}") for i, item in enumerate(listed))\n',
      '    rewards = tuple(build(RewardSection, item, f"rewards.{i}") for i, item in enumerate(listed))\n'
      '    [__import__("rewards.registry").registry.resolve_reward(r.name, r.params) for r in rewards]\n',
      ("tests/unit/test_parse_only_parses.py::test_parsing_a_recipe_imports_no_trainer_library_and_builds_no_reward",
       "tests/unit/test_parse_only_parses.py::test_a_dry_run_builds_each_reward_of_its_recipe_once"),
      "parse builds the rewards and throws them away, as it used to"),
    M("program_exit_frozen", "the smolalign program freezes what a command left alive before the interpreter exits: "
      "its last garbage collection has nothing to walk, and the command's exit code is kept",
      "architecture.md#parse-resolve-run", "smolalign/cli/__init__.py",
      "        gc.freeze()\n", "        pass\n",
      ("tests/unit/test_cli.py::test_the_program_leaves_the_last_collection_nothing_to_walk[args0-0]",
       "tests/unit/test_cli.py::test_the_program_leaves_the_last_collection_nothing_to_walk[args1-2]"),
      "the interpreter's last collection walks every object the command left, as Python does by default"),
    M("program_exit_collected", "before freezing, the smolalign program collects what a command dropped, so that it is "
      "destroyed in order (a launched rank's closed process group, left to the end of the process, aborted it)",
      "architecture.md#parse-resolve-run", "smolalign/cli/__init__.py",
      "        gc.collect()\n", "        pass\n",
      ("tests/unit/test_cli.py::test_the_program_leaves_the_last_collection_nothing_to_walk[args0-0]",
       "tests/unit/test_cli.py::test_the_program_leaves_the_last_collection_nothing_to_walk[args1-2]"),
      "what the command dropped in a cycle is frozen with the rest and never destroyed"),
    M("vllm_inspection_here", "on a CPU, an engine's model class is inspected in smolalign's process: vLLM's registry "
      "starts no Python of its own for it (11 s on 2 cores on a machine's first engine of an architecture), and "
      "caches what its own process finds",
      "vllm-cpu.md", "smolalign/generation/vllm_inspection.py",
      "    registry._run_in_subprocess = _run_here\n", "    pass\n",
      ("tests/integration/test_vllm_model_inspection.py::test_a_cpu_engine_inspects_its_model_class_here",
       "tests/integration/test_vllm_model_inspection.py::test_the_inspection_here_finds_what_vllms_own_process_finds"),
      "the registry's inspection runs in a Python of its own again, as vLLM does to keep CUDA out of its caller"),
    M("vllm_inspection_here_colocated", "on a CPU, the engine TRL builds next to its trainer has its model class "
      "inspected in smolalign's process too",
      "vllm-cpu.md", "smolalign/generation/trl_on_cpu.py",
      "        with inspected_here(hardware):\n", "        with contextlib.nullcontext():\n",
      ("tests/integration/test_vllm_rl.py::test_grpo_generates_with_the_current_policy",),
      "TRL's colocated engine is built with vLLM's registry as it comes: its inspection starts a Python"),
    M("weight_sync_checked", "after every weight sync into vLLM (colocated or server; full weights or LoRA; GRPO, "
      "online DPO, distillation) the engine's log-probs of a probe are compared with the policy's, logged as sync/* "
      "every step, and a stale engine stops the run (exit 1) at the first check after an update",
      "scaling/vllm.md#checked-weight-syncs", "smolalign/stages/generating.py",
      "        check_weight_syncs(trainer, self.watchdog)\n", "        pass\n",
      (f"{WS}test_grpo_whose_weights_reach_the_engine_passes_every_check[full]",
       f"{WS}test_grpo_whose_weights_reach_the_engine_passes_every_check[lora]",
       f"{WS}test_a_sync_that_never_reaches_the_engine_stops_the_run_at_the_first_check[grpo]",
       f"{WS}test_a_sync_that_never_reaches_the_engine_stops_the_run_at_the_first_check[online_dpo]",
       f"{WS}test_a_sync_that_never_reaches_the_engine_stops_the_run_at_the_first_check[distill]",
       f"{WS}test_a_lora_adapter_that_never_merges_into_the_engine_stops_the_run"),
      "no check: nothing sync/* is logged, and runs whose engine never receives the weights train on to the end"),
    M("weight_sync_stale_verdict", "an engine that scores the probe like an earlier policy, or like neither, and not "
      "within the tolerance of the current one, is stale", "scaling/vllm.md#checked-weight-syncs",
      "smolalign/stages/weight_sync.py",
      "        if gap <= self.tolerance:\n            return {**values, \"sync/verified\": 0}",
      "        if True:\n            return {**values, \"sync/verified\": 0}",
      (f"{WS}test_a_sync_that_never_reaches_the_engine_stops_the_run_at_the_first_check[grpo]",
       f"{WS}test_a_lora_adapter_that_never_merges_into_the_engine_stops_the_run",
       f"{WSV}test_an_engine_left_on_the_old_policy_is_stale",
       f"{WSV}test_an_engine_like_neither_policy_stops_the_run"),
      "every sync outside the tolerance counts as not yet decidable: a stale engine is never reported"),
    M("weight_sync_timeout", "a weight sync into vLLM longer than generation.sync_timeout fails the run with exit 1, "
      "naming the server's log", "scaling/vllm.md#checked-weight-syncs", "smolalign/runs/watchdog.py",
      "        if self.sync_timeout and syncing is not None and",
      "        if False and self.sync_timeout and syncing is not None and",
      (f"{WS}test_a_sync_that_hangs_fails_the_run_after_the_sync_timeout",
       "tests/unit/test_watchdog_interrupts.py::"
       "test_a_weight_sync_longer_than_the_sync_timeout_fails_the_run_naming_the_servers_log"),
      "the sync is not timed: a hung sync waits out its hang (or the 30-minute stall timeout)"),
    M("watchdog_interrupts_blocking_calls", "the watchdog's interrupt ends a blocking call the main thread waits in "
      "(a sleep, a socket read), at once", "scaling/vllm.md#checked-weight-syncs", "smolalign/runs/watchdog.py",
      "    if callable(signal.getsignal(signal.SIGINT)):\n", "    if False:\n",
      ("tests/unit/test_watchdog_interrupts.py::test_a_main_thread_blocked_in_a_call_is_interrupted_at_once",),
      "only `_thread.interrupt_main`'s flag is set, which the blocked thread reads once its call returns"),
    M("one_number_draw", "a token drawn from one uniform number is the first whose cumulative probability exceeds it "
      "(times the row's total); a token of probability 0 never comes out",
      "vllm-cpu.md", "smolalign/generation/draw.py",
      "torch.searchsorted(cumulative, targets.unsqueeze(1), right=True)",
      "torch.searchsorted(cumulative, targets.unsqueeze(1), right=False)",
      ("tests/unit/test_draw.py::test_the_ends_of_the_unit_interval_pick_the_first_and_last_possible_tokens",),
      "a uniform number on a boundary takes the token before it, of probability 0 at the start of a row"),
    M("vllm_engine_reuse", "smolalign eval on vLLM evaluates checkpoints of one model in one engine, each model's "
      "weights reloaded in place: each model's answers are the ones an engine of its own gives",
      "verbs/eval.md", "smolalign/generation/vllm_engine.py",
      '    llm.collective_rpc("reload_weights", kwargs={"weights_path": model_dir})', "    pass",
      ("tests/integration/test_vllm_generation.py::test_one_engine_evaluates_checkpoints_of_one_model",),
      "the engine goes on with the first model's weights: every later model answers as the first"),
    M("transformers_sampling_training", "on a CPU, trainers that sample with transformers and a top-p find its "
      "nucleus among the most likely tokens instead of sorting the vocabulary",
      "checkpoints.md#precision", "smolalign/stages/library_patches.py",
      "patches.enter_context(fast_sampling(accelerator))", "patches.enter_context(fast_sampling(\"cuda\"))",
      ("tests/integration/test_transformers_sampler.py::test_a_grpo_run_with_a_top_p_finds_its_rollouts_nucleus",),
      "rollouts keep transformers' sort of every row's vocabulary"),
    M("transformers_one_number_draw", "on a CPU, transformers' generation draws each sampled token from one uniform "
      "number of the global generator instead of an exponential for every word",
      "checkpoints.md#precision", "smolalign/generation/transformers_sampler.py",
      'replaced(torch, "multinomial", one_uniform_per_row)',
      'replaced(torch, "multinomial", lambda torch_multinomial: torch_multinomial)',
      ("tests/integration/test_transformers_sampler.py::test_generation_draws_each_token_from_one_uniform_number",),
      "generation keeps torch.multinomial: 49,152 exponentials a row and token"),
    M("transformers_sampling_generators", "on a CPU, eval and pairs with transformers find a top-p nucleus as "
      "training does, among the most likely tokens",
      "checkpoints.md#precision", "smolalign/pairs/backends.py",
      "with torch.no_grad(), fast_sampling(self.device.type):", "with torch.no_grad(), fast_sampling(\"cuda\"):",
      ("tests/integration/test_transformers_sampler.py::test_eval_with_transformers_samples_through_the_nucleus",),
      "eval and pairs keep transformers' sort"),
    M("online_dpo_reward_weights", "online DPO picks the chosen answer by the weighted sum of its rewards",
      "verbs/rl.md#online-dpo-method-online_dpo", "smolalign/stages/online_dpo.py",
      '"reward_weights": [r.weight for r in recipe.rewards]', '"reward_weights": [1.0 for r in recipe.rewards]',
      ("tests/integration/test_online_dpo_run.py::test_reward_weights_make_the_score_that_picks_the_chosen_answer",),
      "every weight becomes 1"),
    M("math_accuracy_reads_the_answer", "math_accuracy scores the answer after the think block (an unclosed think "
      "block scores 0)", "rewards.md", "rewards/math.py",
      "        answer = answer_part(text)", "        answer = text",
      ("tests/unit/test_rewards.py::test_math_accuracy",), "the reasoning is scored too"),
    M("math_accuracy_final_statement", "math_accuracy reads an answer stated after the working over the boxed results "
      "before it (a boxed 255 in the working, then \"The final answer is 10,455\": 10455 is read)", "rewards.md; math-answers.md",
      "rewards/final_answer.py",
      "    final = [box for box in every_box if box[0] >= after]",
      "    final = every_box",
      ("tests/unit/test_math_answers.py::test_reads_the_final_answer[boxed-working-then-final-statement]",
       "tests/unit/test_math_answers.py::test_reads_the_final_answer[answer-is-after-a-box]",
       "tests/unit/test_math_answers.py::test_open_r1_and_math_verify_cases[mv-intermediate-boxes-then-final-answer]"),
      "every box outranks the statements, as math-verify ranks them: the working's boxed 255 is read"),
    M("think_format_per_mode", "think_format scores each row in its own mode", "rewards.md", "rewards/format.py",
      '            mode = self.mode if self.mode != "auto" else row_mode(prompt, row_kwargs, self.default_mode)',
      "            mode = self.default_mode",
      ("tests/unit/test_rewards.py::test_think_format_per_mode",), "every row is scored in the default mode"),
    M("soft_overlong", "soft_overlong is DAPO's: 0 up to max - cache, linear to -1 at max", "rewards.md",
      "rewards/length.py", "        return (max_length - cache - length) / cache", "        return 0.0",
      ("tests/unit/test_rewards.py::test_soft_overlong_at_and_around_thresholds",
       "tests/unit/test_rewards_match_trl.py::test_soft_overlong_is_trls_soft_overlong_punishment"),
      "no penalty in the window"),
    M("math_accuracy_equals_trl", "math_accuracy gives TRL's accuracy_reward's verdicts on final answers both read "
      "alike (LaTeX, fractions, roots, boxed)", "recipes/import.md; rewards.md",
      "rewards/math.py", "extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()],",
      "extraction_config=[ExprExtractionConfig()],",
      ("tests/unit/test_rewards_match_trl.py::test_math_accuracy_agrees_with_trls_accuracy_reward",),
      "LaTeX is no longer parsed: gold answers in LaTeX go unscored"),
    M("code_reward_nonce", "assert tests pass only when a fresh nonce is printed after the asserts (sys.exit(0) "
      "tricks score 0)", "rewards.md; sandbox.md", "rewards/code.py",
      'e.status == "ok" and nonce in e.stdout.split()', 'e.status == "ok"',
      (f"{SANDBOX}test_exiting_before_the_asserts_scores_zero",),
      "exiting before the asserts passes them"),
    M("sandbox_failure_unscored", "a sandbox failure scores None, never 0", "rewards.md", "rewards/code.py",
      '    if not executions or any(e.status == "sandbox_error" for e in executions):', "    if not executions:",
      ("tests/unit/test_code_reward.py::test_sandbox_error_is_unscored",), "a sandbox failure scores as a wrong answer"),
    M("team_reward_checked", "a team's reward is checked the same way by training, eval, graded pairs and rewards "
      "test: its signature and one number per completion (exit 2 naming it)", "rewards.md",
      "rewards/registry.py", "    if is_user_reward(name):\n        check_reward_signature(name, reward, columns)",
      "    if False:\n        check_reward_signature(name, reward, columns)",
      ("tests/unit/test_bad_input_checks.py::test_refused[reward-no-kwargs]",
       "tests/unit/test_bad_input_checks.py::test_refused[rewards-test-no-kwargs]",
       "tests/unit/test_bad_input_checks.py::test_refused[eval-reward-no-kwargs]"),
      "no caller checks a team's reward before using it"),
    M("reasoning_gym_scores_as_the_task", "the reasoning_gym reward equals the task's own score_answer on the answer "
      "after the last </think> (its last <answer> tag when it has one)", "rewards.md; reasoning-gym.md",
      "rewards/reasoning_gym.py", "        text = answer_part(completion_text(completion))",
      "        text = completion_text(completion)",
      tuple(f"{RG}test_the_reward_scores_as_the_tasks_own_scorer[{task}]" for task in
            ("arc_agi", "basic_arithmetic", "chain_sum", "complex_arithmetic", "decimal_arithmetic", "leg_counting",
             "number_sorting", "prime_factorization")) + (f"{RG}test_rewards_test_scores_a_sources_rows",),
      "the reasoning is scored too: a gold answer in the think block, or a closing tag, reaches the scorer"),
    M("reasoning_gym_rows_keep_tuples", "a reasoning_gym:TASK row carries the library's entry as it is, tuples "
      "included, so a scorer that compares with them scores the gold answer 1", "reasoning-gym.md",
      "rewards/reasoning_gym.py", "    return json.dumps(_tagged(value))", "    return json.dumps(value)",
      (f"{RG}test_the_reward_scores_as_the_tasks_own_scorer[arc_agi]",
       f"{RG}test_source_rows_are_the_librarys_entries[complex_arithmetic]",
       f"{RG}test_source_rows_are_the_librarys_entries[arc_agi]"),
      "tuples become lists: arc_agi's gold grid scores 0.05"),
    # ---------------------------------------------------------------------------------------------- sandbox
    M("sandbox_pool_never_idles", "a program that hangs holds one worker while the others keep every core busy (two "
      "workers per core): the rest of the batch runs meanwhile", "rewards.md; sandbox.md",
      "rewards/sandbox.py", "WORKERS_PER_CORE = 2", "WORKERS_PER_CORE = 1",
      (f"{SANDBOX}test_hanging_executions_do_not_stall_the_pool",),
      "one worker per core: a hang idles its core for the rest of the batch"),
    M("sandbox_no_network", "sandboxed code has no network: not the host's localhost services or abstract sockets",
      "sandbox.md", "rewards/sandbox.py",
      'return argv + ["--net", "--pid",', 'return argv + ["--pid",',
      (f"{SANDBOX}test_no_network_to_the_host[unshare]",), "the unshare level keeps the host's network"),
    M("sandbox_no_network_bwrap", "the same at the bubblewrap level", "sandbox.md", "rewards/sandbox.py",
      'argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]',
      'argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]',
      (f"{SANDBOX}test_no_network_to_the_host[bwrap]",), "bwrap keeps the host's network (as root)"),
    M("sandbox_host_files_invisible", "sandboxed code sees only a read-only system view at both levels: not the "
      "host's /tmp, home or project", "rewards.md; sandbox.md", "rewards/sandbox.py",
      'entries += [("dir", "/tmp"), ("dir", _SANDBOX_DIR)]', 'entries += [("bind", "/tmp"), ("dir", _SANDBOX_DIR)]',
      (f"{SANDBOX}test_the_hosts_files_are_invisible[bwrap]", f"{SANDBOX}test_the_hosts_files_are_invisible[unshare]"),
      "the host's /tmp is bound into the view"),
    M("sandbox_fresh_root", "the unshare level pivots into its own root", "sandbox.md",
      "rewards/_sandbox_worker.py",
      '    check(libc().syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")  # the old root now lies under the new one\n'
      '    check(libc().umount2(b".", MNT_DETACH), "the host\'s root")\n',
      "",
      (f"{SANDBOX}test_the_hosts_files_are_invisible[unshare]",),
      "without the pivot the level does not come up (a skip .ci/skips refuses)"),
    M("sandbox_minimal_environment", "sandboxed code sees only PATH, HOME, TMPDIR and LANG, not the parent's "
      "environment", "sandbox.md", "rewards/sandbox.py",
      '    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}',
      '    return {**os.environ, "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, '
      '"LANG": "C.UTF-8"}',
      (f"{SANDBOX}test_cannot_read_the_parents_environment[unshare]",), "the parent's environment is passed on"),
    M("sandbox_process_limit", "a fork bomb is contained: a process budget per sandbox, which other sandboxes do not "
      "share", "sandbox.md", "rewards/sandbox.py",
      "    if with_nproc:\n        processes = limits.processes + shared",
      "    if False:\n        processes = limits.processes + shared",
      (f"{SANDBOX}test_process_limit_counts_only_this_sandbox[unshare]",), "no RLIMIT_NPROC"),
    M("sandbox_ipc_namespace", "no kernel object (SysV IPC, message queues) of one execution reaches the next",
      "sandbox.md", "rewards/_sandbox_worker.py",
      '            check(libc().unshare(CLONE_NEWIPC), "unshare")', '            check(0, "unshare")',
      (f"{SANDBOX}test_no_kernel_objects_carry_over[unshare]",), "executions share the worker's IPC namespace"),
    # ---------------------------------------------------------------------------------------------- vLLM
    M("vllm_greedy_equals_transformers", "eval and pairs with the vLLM backend answer greedily what transformers "
      "answers, token for token, on the same model in the same precision, from the same rendered prompts (the real "
      "engine, its CPU build here)", "verbs/eval.md; vllm-cpu.md", "smolalign/pairs/backends.py",
      "        texts = [render(self.template, p.messages, add_generation_prompt=True, special_tokens=self.specials,",
      "        texts = [render(self.template, p.messages, add_generation_prompt=False, special_tokens=self.specials,",
      ("tests/integration/test_vllm_generation.py::test_greedy_vllm_answers_are_the_transformers_answers",),
      "the engine is prompted without the assistant turn's opening"),
    M("vllm_samples_per_prompt", "sampled vLLM answers follow the model's distribution, each prompt with its own "
      "seed (as transformers', within sampling noise)", "verbs/eval.md", "smolalign/pairs/backends.py",
      "        seeds = random.Random(seed).sample(range(2**31), len(prompts))",
      "        seeds = [seed] * len(prompts)",
      ("tests/integration/test_vllm_generation.py::test_strong_and_weak_answers_come_from_the_engine",),
      "every prompt draws the same random numbers"),
    M("colocated_engine_follows_the_policy", "a colocated vLLM engine generates with the current policy: at every "
      "weight sync its log-probs of a fixed completion equal the trainer's within 1e-4 (GRPO, online DPO, "
      "distillation)", "scaling/vllm.md#on-a-cpu; vllm-cpu.md", "smolalign/generation/trl_on_cpu.py",
      '    patches.enter_context(replaced(custom_ops, "_supports_onednn", lambda supported: False))\n', "",
      ("tests/integration/test_vllm_rl.py::test_grpo_generates_with_the_current_policy",),
      "oneDNN prepacks the engine's weights and TRL's sync cannot write them"),
    M("server_engine_follows_the_policy", "GRPO in server mode syncs its weights into the real vLLM server (on a CPU "
      "through the filesystem): the server's log-probs equal the trainer's at every sync", "scaling/vllm.md#on-a-cpu; vllm-cpu.md", "smolalign/generation/trl_on_cpu.py",
      '                self._pending["lm_head.weight"] = self._pending["model.embed_tokens.weight"].clone()',
      "                pass",
      ("tests/integration/test_vllm_server.py::test_grpo_in_server_mode_syncs_its_weights_into_the_server",),
      "the tied head keeps its old weights in the server"),
    M("server_port_checked", "a server smolalign is to start needs its port free: exit 2 naming the port, in the "
      "dry run too", "scaling/vllm.md", "smolalign/generation/server.py",
      "    if port is not None and not generation.server.base_url and port_in_use(port):", "    if False:",
      ("tests/integration/test_vllm_server.py::test_a_port_in_use_is_exit_2_naming_it",), "the port is not checked"),
    M("server_is_ours", "a server smolalign did not start is never used, even healthy on the same port",
      "scaling/vllm.md", "smolalign/generation/server.py",
      "                if not serves(handle.base_url, served_name):", "                if False:",
      ("tests/integration/test_vllm_server_lifecycle.py::test_a_server_smolalign_did_not_start_is_not_taken_for_its_own",),
      "any healthy server on the port is taken"),
    M("server_dies_with_its_run", "a run killed outright (SIGKILL) leaves no vLLM server behind", "scaling/vllm.md", "smolalign/generation/server.py",
      "                                   preexec_fn=die_with_parent)\n    try:\n        reaper = Reaper(process.pid)",
      "                                   )\n    try:\n        reaper = None",
      ("tests/integration/test_vllm_server.py::test_a_trainer_killed_outright_leaves_no_server",),
      "neither the parent-death signal nor the reaper: the server outlives its run"),
    M("server_stopped_at_the_end", "a started server is stopped when the run ends or fails: no process of its "
      "group (its engine core included) is left and its port is free", "scaling/vllm.md",
      "smolalign/generation/server.py", "    finally:\n        stop_server(handle)", "    finally:\n        pass",
      ("tests/integration/test_vllm_server_lifecycle.py::test_a_run_that_ends_leaves_no_process_of_the_server[normal]",
       "tests/integration/test_vllm_server_lifecycle.py::test_a_run_that_ends_leaves_no_process_of_the_server[exception]"),
      "the server and its engine core keep running after the run"),
    M("server_stopped_on_sigterm", "SIGTERM to a run stops its server through the run's finally blocks",
      "scaling/vllm.md", "smolalign/generation/server.py",
      "    previous = signal.signal(signal.SIGTERM, terminate)", "    previous = signal.getsignal(signal.SIGTERM)",
      ("tests/integration/test_vllm_server_lifecycle.py::test_a_run_that_is_stopped_or_killed_leaves_no_process_of_the_server[SIGTERM]",),
      "the run dies at SIGTERM without stopping its server"),
    M("server_group_reaped", "a run killed outright or ended by the watchdog's hard exit leaves no process of its "
      "server's group (vLLM's engine core included)", "scaling/vllm.md", "smolalign/generation/server_process.py",
      "if not os.read(0, 1):", "if False:",
      ("tests/integration/test_vllm_server_lifecycle.py::test_a_run_that_is_stopped_or_killed_leaves_no_process_of_the_server[SIGKILL]",
       "tests/integration/test_vllm_server_lifecycle.py::test_a_run_that_is_stopped_or_killed_leaves_no_process_of_the_server[watchdog hard exit]",
       "tests/integration/test_vllm_server.py::test_a_trainer_killed_outright_leaves_no_engine_process"),
      "no reaper: the parent-death signal kills the server's own process, its engine core is left running"),
    M("server_group_killed_after_its_server_died", "a server that died mid-run leaves no engine core behind",
      "scaling/vllm.md", "smolalign/generation/server_process.py",
      "    if process is None:\n        return\n\n    if process.poll() is None:",
      "    if process is None or process.poll() is not None:\n        return\n\n    if process.poll() is None:",
      ("tests/integration/test_vllm_server_lifecycle.py::test_a_server_that_dies_mid_run_fails_the_run",),
      "a server whose own process exited is taken as stopped"),
    M("driver_checked", "a driver too old for torch's CUDA (13.x: 580, 12.x: 525) is refused before anything loads",
      "scaling/preflight.md", "smolalign/preflight/gpus.py",
      '    if needed is None or int(driver.split(".")[0]) >= needed:', "    if True:",
      ("tests/unit/test_preflight.py::test_a_driver_too_old_for_torchs_cuda_is_refused[cuda13-driver550]",
       "tests/unit/test_preflight.py::test_a_driver_too_old_for_torchs_cuda_is_refused[cuda13-smi575]",
       "tests/unit/test_preflight.py::test_a_driver_too_old_for_torchs_cuda_is_refused[cuda12-smi470]",
       "tests/unit/test_preflight.py::test_a_driver_too_old_refuses_the_dry_run"),
      "no driver check: the run finds no GPU or fails at the first CUDA call"),
    M("vllm_really_imports", "an installed vLLM that fails to import is refused at preflight with its error",
      "scaling/preflight.md", "smolalign/preflight/vllm.py",
      "    if target.here and (problem := vllm_import_problem()):", "    if False:",
      ("tests/unit/test_preflight.py::test_a_vllm_that_fails_to_import_is_refused_with_its_error",),
      "only find_spec is asked: a vLLM that does not import passes"),
    M("memory_overrun_refused", "a plan whose peak is above 95% of the device's memory is refused (exit 2) unless "
      "launch.allow_memory_overrun is set", "scaling/memory.md", "smolalign/estimate/plan_rows.py",
      "and final and not allowed:", "and final and not allowed and False:",
      ("tests/integration/test_estimate_cli.py::test_a_peak_above_95_percent_of_the_device_is_refused[above]",), "a plan that does not fit runs"),
    M("cpu_memory_overrun_warned", "training on this CPU (sft, po), a plan whose peak is above 95% of this machine's "
      "memory is warned about", "scaling/memory.md", "smolalign/estimate/plan_rows.py",
      "    if ram is not None and estimate.peak > MEMORY_REFUSED * budget and not allowed:\n",
      "    if False:\n",
      ("tests/integration/test_estimate_cli.py::"
       "test_a_peak_above_95_percent_of_this_machines_memory_is_warned_about_on_a_cpu[above]",),
      "a plan of 98 GB on a 23 GB machine passes its dry run in silence, and the run is killed for memory"),
    M("one_deepspeed_config", "a DeepSpeed preset runs with the same bucket sizes on GPUs and on the CPU, sized from "
      "the model", "scaling/index.md", "smolalign/launch.py",
      '    if str(settings.get("distributed_type", "NO")) == "DEEPSPEED":\n        deepspeed_file',
      "    if False:\n        deepspeed_file",
      ("tests/unit/test_deepspeed_buckets.py::test_gpus_and_the_cpu_get_the_same_buckets_sized_from_the_model[zero2]",
       "tests/unit/test_deepspeed_buckets.py::test_gpus_and_the_cpu_get_the_same_buckets_sized_from_the_model[zero3]",
       "tests/unit/test_deepspeed_buckets.py::test_gpus_and_the_cpu_get_the_same_buckets_sized_from_the_model[zero3_offload]"),
      "on GPUs accelerate gets the preset's own DeepSpeed settings: DeepSpeed's default buckets"),
    M("plan_counts_zero_buckets", "the plan's memory counts DeepSpeed's buckets under ZeRO", "scaling/index.md",
      "smolalign/estimate/memory.py", "    return elements * b", "    return 0",
      ("tests/unit/test_deepspeed_buckets.py::test_the_plan_counts_the_zero_buckets[zero3-preset]",
       "tests/unit/test_deepspeed_buckets.py::test_the_plan_counts_the_zero_buckets[zero2-deepspeed-defaults]"),
      "the buckets are left out of the estimate"),
    M("docker_run_line", "the documented docker run line gives NCCL a large /dev/shm, runs as the caller's uid and "
      "mounts the HF cache and the working directory where the image expects them", "scaling/containers.md",
      "docs/scaling/containers.md", "docker run --rm --gpus all --ipc=host", "docker run --rm --gpus all",
      ("tests/unit/test_dockerfile.py::test_the_documented_docker_run_lines_work_with_this_image",), "Docker's 64 MB /dev/shm"),
    M("image_any_user", "the image runs as any user: HOME and HF_HOME are writable by every uid",
      "scaling/containers.md", "Dockerfile", "    && chmod 1777 /home/smolalign /cache /cache/huggingface /workspace",
      "    && true",
      ("tests/unit/test_dockerfile.py::test_the_image_runs_as_any_user_with_writable_home_and_hf_cache",), "root-only folders"),
    # ---------------------------------------------------------------------------------------------- model cards
    M("model_card", "every run writes a model card with huggingface_hub (base model, data, tags, what was trained, a "
      "quick start that runs), in the run directory and in model/, pushed with the model", "checkpoints.md", "smolalign/stages/lifecycle.py",
      "        write_cards(run_dir, hub.repo_id if hub is not None else None)\n", "",
      ("tests/integration/test_model_card.py::test_a_run_writes_a_card_the_hub_reads",),
      "no card is written (TRL's stub, or nothing, is left)"),
    M("model_card_evaluation", "a run's evaluation goes into its card's model-index", "checkpoints.md",
      "smolalign/runs/card.py", "        eval_results=results or None)", "        eval_results=None)",
      ("tests/integration/test_model_card.py::test_a_run_writes_a_card_the_hub_reads",
       "tests/integration/test_model_card.py::test_eval_card_puts_its_results_into_the_runs_card"),
      "the results stay out of the metadata"),
    M("model_card_lineage", "a chain of runs names its parent run as base_model and keeps the lineage",
      "checkpoints.md", "smolalign/runs/card.py",
      '    if path.is_dir() and (path.parent / MANIFEST_FILE).is_file():  # <run>/model of an earlier run',
      "    if False:",
      ("tests/integration/test_model_card.py::test_a_chain_of_runs_names_its_parent_and_keeps_the_lineage",),
      "an earlier run's model is taken for any directory"),
    # ---------------------------------------------------------------------------------------------- checkpoints
    M("nanotron_bit_exact", "nanotron checkpoints convert bit for bit, and as nanotron's official converter does on "
      "a checkpoint nanotron wrote", "verbs/convert.md", "smolalign/checkpoints/nanotron_hf.py",
      '            slice_rows(f"{hf}.mlp.gate_proj.weight", gate_up, 0, inter),',
      '            slice_rows(f"{hf}.mlp.gate_proj.weight", gate_up, inter, 2 * inter),',
      ("tests/integration/test_checkpoints_nanotron.py::test_real_nanotron_checkpoint_converts_bit_identically",),
      "gate_proj gets the up half of the fused tensor"),
    M("dcp_rope", "torchtitan DCP checkpoints convert to the original model (RoPE permutation undone)",
      "verbs/convert.md", "smolalign/checkpoints/dcp.py",
      "    return unpermute_rope(tensor, permute) if permute else tensor", "    return tensor",
      ("tests/integration/test_checkpoints_dcp.py::test_torchtitan_dcp_converts_to_the_original_model",),
      "q/k keep torchtitan's layout"),
    M("safetensors_byte_ranges", "a truncated safetensors file is refused by name before any weight is read",
      "verbs/convert.md", "smolalign/checkpoints/files.py",
      "    if offsets[1] > data_bytes:", "    if False:",
      ("tests/unit/test_bad_input_files.py::test_refused[nanotron-truncated-weights]",),
      "the header's byte ranges are not checked against the file's size"),
    M("dcp_byte_ranges", "a cut torch DCP shard is refused by name before any weight is read",
      "verbs/convert.md", "smolalign/checkpoints/files.py",
      "        if offset < 0 or length < 0 or offset + length > sizes[relative]:",
      "        if offset < 0 or length < 0:",
      ("tests/unit/test_bad_input_files.py::test_damaged_real_dcp_is_refused",), "byte ranges past a shard's end pass"),
    M("torch_archive_checked", "a truncated torch archive (optimizer state, DeepSpeed states) is refused by name, and "
      "--resume skips a checkpoint holding one", "verbs/convert.md; checkpoints.md#starting-over-and-resuming",
      "smolalign/checkpoints/files.py",
      '    if magic[:1] == b"\\x80":  # torch\'s pre-1.6 pickle format: nothing to check without unpickling',
      "    if True:",
      ("tests/unit/test_bad_input_files.py::test_refused[deepspeed-states-truncated]",
       "tests/unit/test_rundir.py::test_a_truncated_file_makes_a_checkpoint_incomplete"),
      "torch archives are never checked"),
    M("dcp_metadata_allow_list", "a DCP .metadata pickle that would run code is refused", "verbs/convert.md", "smolalign/checkpoints/files.py",
      "        if not allowed:\n            raise pickle.UnpicklingError",
      "        if False:\n            raise pickle.UnpicklingError",
      ("tests/unit/test_bad_input_files.py::test_refused[dcp-metadata-runs-code]",), "any global is unpickled"),
    # ---------------------------------------------------------------------------------------------- CLI contract
    M("damaged_weights_refused", "a model whose weights file is cut off or damaged (safetensors, a GGUF header or its "
      "tensor data) is refused with one line naming the source, exit 2, by the dry run too",
      "troubleshooting.md", "smolalign/models/read_errors.py",
      '    return (type(exc).__name__ == "SafetensorError" or isinstance(exc, struct.error)\n'
      '            or (source.kind == "gguf" and isinstance(exc, ValueError) and "cannot reshape array" in str(exc)))\n',
      "    return False\n",
      ("tests/integration/test_damaged_model_files.py::test_a_cut_off_safetensors_file_is_refused[cut-off]",
       *(f"tests/integration/test_damaged_model_files.py::test_a_gguf_file_cut_off_is_refused[{case}]"
         for case in ("in-its-header", "in-its-tensors"))),
      "a SafetensorError or struct.error traceback, exit 1; a GGUF cut in its tensors says \"cannot reshape array\""),
    M("folder_without_tokenizer_named", "a model folder saved without its tokenizer is named so, in the dry run and "
      "when loading", "troubleshooting.md", "smolalign/models/read_errors.py",
      "    if source.kind == \"dir\" and folder.is_dir() and not any(", "    if False and not any(",
      ("tests/integration/test_damaged_model_files.py::test_a_model_folder_saved_without_its_tokenizer_is_named_so",),
      "transformers' words: \"Couldn't instantiate the backend tokenizer from one of: ...\""),
    M("unreachable_hub_fails_at_once", "a hub that does not answer is asked once, before the first hub source is "
      "read; the sources are then read from the local caches, and one that is not cached fails at once, naming it "
      "and the reason", "verbs/index.md", "smolalign/hub_access.py",
      "        get_session().head(endpoint, timeout=PROBE_TIMEOUT_S)\n", "        pass\n",
      ("tests/unit/test_hub_access.py::test_an_unreachable_hub_switches_the_libraries_to_their_caches",
       "tests/unit/test_hub_access.py::test_an_uncached_hub_dataset_fails_at_once",
       "tests/unit/test_hub_access.py::test_a_dry_run_without_the_hub_fails_at_once_from_the_cli"),
      "a dry run without network passes a hub model it cannot fetch, and a hub dataset fails after 23 s of "
      "huggingface_hub's retries"),
    M("bad_input_exit_2", "bad input is exit 2 with one error line naming the culprit", "verbs/index.md; troubleshooting.md",
      "smolalign/cli/__init__.py",
      '    except USER_ERRORS as exc:\n        typer.secho(f"error: {exc}", fg="red", err=True)\n        sys.exit(2)',
      '    except USER_ERRORS as exc:\n        typer.secho(f"error: {exc}", fg="red", err=True)\n        sys.exit(1)',
      ("tests/unit/test_bad_input_corpus.py::test_refused[set-no-key]",), "bad input exits 1"),
    M("resume_with_overwrite_refused", "--resume with --overwrite is refused on every verb, dry run or not",
      "checkpoints.md#starting-over-and-resuming", "smolalign/runs/rundir.py", "    if resume and overwrite:\n        raise SmolalignError",
      "    if False:\n        raise SmolalignError",
      ("tests/unit/test_bad_input_corpus.py::test_refused[sft-resume-and-overwrite-dry-run]",
       "tests/unit/test_bad_input_corpus.py::test_refused[sweep-resume-and-overwrite]"),
      "the contradiction is accepted"),
    M("eval_base_url_needs_openai", "eval's base_url without the openai backend is refused (the models would load "
      "here, the server never asked)", "verbs/eval.md", "smolalign/recipe/eval_schema.py",
      "        if self.base_url and self.backend != \"openai\":", "        if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[eval-base-url-without-openai]",),
      "eval loads the model here and never asks the server named by --base-url"),
    M("eval_max_turns_needs_tools", "eval's max_turns without tools or an environment is refused, from the command "
      "line and in a recipe", "verbs/eval.md", "smolalign/recipe/eval_schema.py",
      "        if self.max_turns is not None and not (self.tools or self.environment):", "        if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[eval-max-turns-without-tools]",
       "tests/unit/test_bad_input_corpus.py::test_refused[recipe-eval-max-turns-without-tools]"),
      "the evaluation runs without tools and max_turns is never read"),
    M("slurm_vllm_set_needs_vllm_nodes", "launch slurm --vllm-set without --vllm-nodes 1 is refused",
      "verbs/launch.md", "smolalign/slurm/options.py", "    if request.vllm_set and not request.vllm_nodes:",
      "    if False:", ("tests/unit/test_bad_input_corpus.py::test_refused[slurm-vllm-set-without-vllm-nodes]",),
      "the job is written with no vLLM server and the --vllm-set settings dropped"),
    M("local_split_refused", "a local folder's source reads the files of its split only (the splits datasets names "
      "from the file names); a split the folder lacks, or another split of a single file, is refused",
      "recipes/data.md", "smolalign/inputs/data_sources.py",
      "    return {split: chosen for split, chosen in splits.items() if chosen}\n", "    return {\"train\": files}\n",
      ("tests/unit/test_local_splits.py::test_a_downloaded_hub_dataset_reads_the_split_asked_for",
       "tests/unit/test_local_splits.py::test_train_and_validation_files_train_on_train_only",
       "tests/unit/test_local_splits.py::test_a_split_the_folder_does_not_have_is_refused_naming_those_it_has"),
      "every file of the folder is read as the training split: a downloaded dataset's test rows are trained on"),
    M("local_file_split_refused", "another split of a single local file is refused (a file is read whole)",
      "recipes/data.md", "smolalign/inputs/data_sources.py", "        if split != \"train\":\n            raise",
      "        if False:\n            raise",
      ("tests/unit/test_local_splits.py::test_a_file_is_read_whole_and_another_split_of_it_is_refused",
       "tests/unit/test_bad_input_corpus.py::test_refused[eval-split-of-a-local-file]",
       "tests/unit/test_bad_input_corpus.py::test_refused[recipe-split-of-a-local-file]"),
      "the whole file is read as the split asked for: a held-out split evaluates on every row"),
    M("generation_keys_for_another_backend_refused", "generation.server.* without backend vllm_server, and train.vllm_* "
      "keys the generation backend does not read, are refused naming the key", "scaling/vllm.md",
      "smolalign/recipe/validate.py", "        check_generation_keys(generation, train)\n", "        pass\n",
      ("tests/unit/test_bad_input_corpus.py::test_refused[rl-vllm-key-with-transformers]",
       "tests/unit/test_bad_input_corpus.py::test_refused[rl-colocate-key-with-a-server]"),
      "train.vllm_gpu_memory_utilization with transformers generation, or a server's size in a colocated engine's key, "
      "runs without it"),
    M("generation_server_needs_its_backend", "generation.server.* without backend vllm_server is refused",
      "scaling/vllm.md", "smolalign/recipe/generation_schema.py", "        if self.backend != \"vllm_server\":\n",
      "        if False:\n", ("tests/unit/test_bad_input_corpus.py::test_refused[rl-server-keys-without-server]",),
      "a server's base_url with the default backend: GRPO generates with transformers, slowly, without a word"),
    M("pairs_side_keys_for_its_backend", "a pairs side's base_url, api_key_env, timeout, tensor_parallel or template "
      "on a backend that does not read it is refused", "verbs/po.md", "smolalign/recipe/generation_schema.py",
      "            if getattr(self, name) != _GENERATOR_DEFAULTS[name] and self.backend not in backends:",
      "            if False:", ("tests/unit/test_bad_input_corpus.py::test_refused[pairs-openai-keys-on-transformers]",),
      "a strong side with a server's base_url but no backend: openai loads the model here"),
    M("held_out_rows_nothing_evaluates_warned", "data.eval_split rows that nothing evaluates (train.eval_strategy "
      "\"no\", a distillation trainer) are warned about before anything loads", "recipes/data.md",
      "smolalign/stages/lifecycle.py", "    warn_held_out_unused(run)\n", "",
      ("tests/integration/test_held_out_rows.py::test_held_out_rows_nothing_evaluates_are_warned_about",
       "tests/integration/test_held_out_rows.py::test_a_distillation_recipe_with_held_out_rows_is_warned_about"),
      "the held-out rows are lost to training and never evaluated, without a word"),
    M("eval_greedy_samples_refused", "eval's samples > 1 with temperature 0 (K copies of one answer reported as "
      "pass@K) is refused", "verbs/eval.md", "smolalign/recipe/eval_schema.py",
      "        if self.temperature == 0 and self.samples > 1:", "        if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[eval-greedy-samples]",),
      "pass@3 of three identical greedy answers is reported as if sampled"),
    M("sft_preparation_keys_refused", "SFT's TRL dataset-preparation options (dataset_kwargs, eval_packing, "
      "shuffle_dataset), which never run, are refused naming them", "troubleshooting.md", "smolalign/recipe/method_table.py",
      '    "sft": MethodSpec("sft", sft_config, sft_trainer, SFT_KEYS_OWNED,', '    "sft": MethodSpec("sft", sft_config, sft_trainer, {},',
      ("tests/unit/test_bad_input_corpus.py::test_refused[sft-dataset-preparation-option]",),
      "train.eval_packing: false is accepted and the held-out split is packed anyway"),
    M("local_model_revision_refused", "a revision of a local model source is refused (it has no commits)",
      "troubleshooting.md", "smolalign/models/sources.py",
      '    if revision not in (None, "main") and source.kind != "hub":', "    if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[revision-of-a-local-model]",),
      "model.revision is dropped: the folder's weights train whatever revision was asked"),
    M("slurm_num_processes_refused", "launch.num_processes in a Slurm job, and sweep --slurm --num-processes, are "
      "refused (the job starts one process per GPU of its nodes)", "verbs/launch.md", "smolalign/slurm/job.py",
      "    if recipe.launch is not None and recipe.launch.num_processes is not None:", "    if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[slurm-launch-num-processes]",),
      "the job runs 8 processes per node where the recipe asked for 4"),
    M("sync_ref_model_contradictions_refused", "train.sync_ref_model with reference: precomputed or with peft: is "
      "refused before anything loads (TRL refused it when building the trainer)", "verbs/po.md",
      "smolalign/recipe/validate.py", '    if stage == "po" and train.get("sync_ref_model"):',
      '    if False and train.get("sync_ref_model"):',
      ("tests/unit/test_bad_input_corpus.py::test_refused[po-sync-ref-model-precomputed]",),
      "the dry run passes; the run generates its pairs, loads the weights and TRL refuses"),
    M("template_kwargs_the_template_reads", "a template kwarg the template never reads (a typo: enable_thinkng) is "
      "refused with the nearest it reads", "recipes/templates.md", "smolalign/templates/registry.py",
      "        if key != MODE_KWARG and key not in read:", "        if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[template-kwarg-no-template-reads]",
       "tests/unit/test_bad_input_corpus.py::test_refused[template-render-kwarg-no-template-reads]"),
      "enable_thinkng: false renders as unset: the run trains in think mode without a word"),
    M("prompt_row_kwargs_dropped_warned", "prompt rows' chat_template_kwargs other than enable_thinking, which an rl "
      "trainer does not render per row, are warned about before loading", "recipes/templates.md",
      "smolalign/data/check.py", "        warn_row_kwargs_dropped(rows)\n", "",
      ("tests/integration/test_prompt_row_kwargs.py::test_row_kwargs_grpo_does_not_render_are_warned_about",),
      "the rows' custom instructions are dropped from every prompt without a word"),
    M("online_dpo_template_kwargs_refused", "online DPO refuses template.kwargs other than enable_thinking (its TRL "
      "trainer renders with none)", "recipes/templates.md", "smolalign/stages/online_dpo.py",
      "    if dropped:  # the mode travels", "    if False:  # the mode travels",
      ("tests/integration/test_prompt_row_kwargs.py::test_online_dpo_refuses_template_kwargs_it_cannot_render",),
      "template.kwargs.date never reaches online DPO's prompts"),
    M("graded_keys_for_their_rows", "pairs.graded.threshold on pairs and margin on unpaired rows (each read only by "
      "the other) are refused", "verbs/po.md", "smolalign/recipe/generation_schema.py",
      "        if self.threshold != _UNPAIRED_THRESHOLD and not self.unpaired:", "        if False:",
      ("tests/unit/test_graded_pick_and_refusals.py::test_refused[graded-threshold-on-pairs]",),
      "a threshold meant as the chosen answer's minimum is ignored: pairs are picked by score alone"),
    M("chat_mode_flag_without_modes_warned", "chat --think/--no-think on a model whose template has no reasoning modes "
      "is warned about", "verbs/chat.md", "smolalign/chat.py",
      "    if think is not None and not template.is_hybrid:",
      "    if False:", ("tests/integration/test_chat_modes.py::"
                        "test_a_mode_flag_on_a_template_without_modes_is_warned_about[chatml-True]",),
      "--no-think on a plain ChatML model changes nothing, in silence"),
    M("held_out_file_names_refused", "a local file whose name says it is held out (testset.jsonl, Test.jsonl) but "
      "that datasets would read as the training split is refused", "recipes/data.md",
      "smolalign/inputs/data_sources.py", "        if word and word.group(2) not in split.lower():",
      "        if False:",
      tuple(f"tests/unit/test_local_splits.py::test_a_held_out_file_datasets_would_read_as_training_rows_is_refused"
            f"[{case}]" for case in ("set-suffix", "capitals", "inside-a-train-folder")),
      "testset.jsonl beside trainset.jsonl is trained on"),
    M("sweep_stale_cells_by_written_keys", "a sweep compares a cell's recipe with the keys the recipe writes, so a "
      "default changed between versions is not taken for an edit", "verbs/sweep.md", "smolalign/sweep/cells.py",
      " for path in written)]", " for path in written) or True]", (
          "tests/integration/test_sweep.py::test_two_cells_run_evaluate_compare_and_resume",),
      "every finished cell is refused as stale after an upgrade"),
    M("help_without_torch", "smolalign --help imports no torch", "verbs/index.md", "smolalign/cli/__init__.py",
      "import logging", "import logging\nimport torch  # noqa",
      ("tests/unit/test_cli.py::test_help_does_not_import_heavy_libraries",), "torch is imported at start"),
    M("preflight_gpu_only_kernels", "choices a target cannot run (Liger's kernels without a GPU) are refused in the "
      "dry run, naming the key", "scaling/preflight.md", "smolalign/preflight/kernels.py",
      '    if target.gpus < 1:\n        return f"train.use_liger_kernel', '    if False:\n        return f"train.use_liger_kernel',
      ("tests/unit/test_preflight.py::test_optional_packages_and_gpu_only_kernels",), "Liger on a CPU passes"),
    M("global_batch_kept", "launch.global_batch_size fixes the global batch over any process count",
      "scaling/index.md", "smolalign/recipe/settings.py",
      "    if launch is not None and launch.global_batch_size is not None:", "    if False:",
      ("tests/integration/test_launch.py::test_global_batch_is_kept_over_any_process_count[4-2-4]",),
      "the accumulation ignores the process count"),
    M("memory_estimate", "the predicted peak memory of an SFT step is within 10% of the process's real high-water "
      "mark, on held-out model shapes too",
      "scaling/memory.md", "smolalign/estimate/memory.py",
      "        est.peak = held + max(gradients, activations)", "        est.peak = held + gradients",
      ("tests/integration/test_estimate_accuracy.py::test_peak_memory_within_the_stated_error[small]",),
      "activations are left out of the peak"),
    M("pairs_resume", "a killed pair generation resumes without redoing finished prompts", "verbs/po.md#pairs-from-a-strong-and-a-weak-model",
      "smolalign/pairs/output.py", "        return (prompt_key, side) in self.done", "        return False",
      ("tests/integration/test_pairs.py::test_a_killed_run_resumes_without_redoing_finished_prompts",),
      "every answer is generated again"),
    M("verified_pairs_chosen_right", "with pairs.verifier, every chosen answer is one the verifier scored right and "
      "every rejected one it scored wrong", "verbs/po.md#pairs-checked-by-a-verifier", "smolalign/pairs/verified.py",
      "if not exclusion(answer) and score is not None and score[0] >= threshold]",
      "if not exclusion(answer) and score is not None]",
      ("tests/integration/test_verified_pairs.py::test_chosen_are_verified_right_and_rejected_wrong",
       "tests/integration/test_verified_pairs.py::test_the_strong_side_answers_only_what_the_weak_side_got_wrong"),
      "the strong side's first answer is chosen, right or wrong"),
    M("verified_pairs_weak_first", "with pairs.verifier, the strong side answers only the prompts whose weak answer "
      "the verifier scored wrong", "verbs/po.md#pairs-checked-by-a-verifier", "smolalign/pairs/verified.py",
      '    return "weak_right" if score[0] >= threshold else None', "    return None",
      ("tests/integration/test_verified_pairs.py::test_chosen_are_verified_right_and_rejected_wrong",
       "tests/integration/test_verified_pairs.py::test_the_strong_side_answers_only_what_the_weak_side_got_wrong"),
      "a weak answer that passes is rejected anyway, and the strong side samples every prompt"),
    M("pairs_read_prompts_once", "pairs and eval with transformers read each prompt once for its k samples, and "
      "sample what k repeated prompts sample", "verbs/po.md#graded-pairs-one-models-own-answers-ranked-by-a-scorer",
      "smolalign/pairs/backends.py",
      "output = generate_sharing_prompts(self.model, input_ids=ids, attention_mask=mask, generation_config=config)",
      "output = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)",
      ("tests/integration/test_graded_pairs.py::"
       "test_k_samples_read_their_prompt_once_and_sample_what_repeated_prompts_sample",),
      "every sample's row reads its prompt again"),
    M("vllm_health", "training waits for vLLM's /health to answer 200; a dead engine's 503 does not count",
      "scaling/vllm.md", "smolalign/generation/server.py",
      "    except (urllib.error.URLError, OSError):\n        return False",
      "    except urllib.error.HTTPError:\n        return True\n    except (urllib.error.URLError, OSError):\n"
      "        return False",
      ("tests/integration/test_vllm_server_lifecycle.py::test_health_is_200_from_slash_health_only",),
      "an HTTP error counts as healthy"),
    M("pass_at_k", "eval's pass@k is the unbiased estimator", "verbs/eval.md", "smolalign/evaluation/metrics.py",
      "    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))", "    return float(c / n)",
      ("tests/unit/test_evaluation.py::test_pass_at_k_is_the_unbiased_estimator",), "pass@k becomes the success rate"),
    M("ci_refuses_unlisted_skips", "CI fails when a test is skipped for a reason .ci/skips does not list",
      "tests.md", ".ci/check_report.py",
      "        if not any(reason.startswith(prefix) for prefix in allowed):",
      "        if False:",
      ("tests/unit/test_ci_report.py::test_a_skip_not_listed_fails_naming_the_test",), "every skip is accepted"),
    # ---------------------------------------------------------------------------------------------- Slurm
    M("save_on_signal", "on the time-limit signal (SIGUSR1) training saves a checkpoint at the next step end and "
      "stops (exit 75); the Slurm job then requeues and resumes from it, progressing each time",
      "verbs/launch.md", "smolalign/stages/lifecycle.py",
      "    trainer.add_callback(on_signal)", "    pass",
      ("tests/integration/test_save_on_signal.py::test_sigusr1_saves_at_the_next_step_and_stops",
       "tests/integration/test_slurm_job_on_cpu.py::"
       "test_a_job_signalled_before_its_time_limit_saves_requeues_and_progresses"),
      "the signal is caught but nothing saves: the run trains to max_steps and no requeue happens"),
    M("server_ports_free_per_run", "a vLLM server run that sets no port starts its server on a free port of its own, "
      "and picks a free weight-sync port, so two runs on one machine both train", "scaling/vllm.md#ports",
      "smolalign/generation/server.py",
      "    chosen = [None if server.base_url else server.port or free_port(),",
      "    chosen = [None if server.base_url else server.port or 8000,",
      ("tests/integration/test_vllm_server.py::test_two_server_runs_on_one_machine_both_train",),
      "a fixed default port: the second run on a machine finds the first one's server there and stops"),
    M("data_prepared_once_per_run", "under a launcher the main process prepares the data and the others read its "
      "cache; a process that cannot see it is refused naming SMOLALIGN_CACHE, instead of preparing it again",
      "verbs/launch.md", "smolalign/data/prepare.py", "    if prepared_by_another:\n", "    if False:\n",
      ("tests/unit/test_data_pipeline.py::test_a_process_that_cannot_see_the_main_ones_prepared_data_is_refused",),
      "every rank of a node whose cache is not shared prepares the data again, all at once"),
    M("image_runs_with_pyxis_entrypoints", "the image's steps run the same where pyxis executes the image's "
      "entrypoint before the step's command", "verbs/launch.md", "Dockerfile",
      'ENTRYPOINT ["smolalign-entrypoint"]', 'ENTRYPOINT ["smolalign"]',
      ("tests/unit/test_launch_slurm.py::test_with_pyxis_every_training_node_runs_smolalign_in_the_image[executed]",),
      "the entrypoint makes every step `smolalign bash -c ...`, which fails"),
    M("weight_sync_address_across_nodes", "with a vLLM node, the training step gets VLLM_HOST_IP: the first training "
      "node's address, where the server joins the weight-transfer group", "scaling/vllm.md#ports",
      "smolalign/slurm/script.py",
      """    host_ip = 'export VLLM_HOST_IP="$TRAIN_HOST_IP"; ' if job.vllm is not None else """"",
      """    host_ip = """"",
      ("tests/unit/test_launch_slurm.py::"
       "test_rl_with_a_vllm_node_serves_on_the_last_node_and_training_waits_for_it",),
      "vLLM guesses the address from the default route, which may be an interface the vLLM node cannot reach"),
    M("usr1_reaches_ranks_in_their_own_sessions", "the time-limit signal reaches every training rank whether Slurm "
      "tracks a step's processes by cgroup or by process group (torchrun starts each rank in a session of its own)",
      "verbs/launch.md", "smolalign/slurm/script.py",
      '    launcher[0] = ["python", "-m", "smolalign.slurm.signal_relay", *launcher[0]]', "    pass",
      ("tests/unit/test_launch_slurm.py::"
       "test_usr1_reaches_training_then_the_job_requeues_and_the_next_run_resumes[pgid]",
       "tests/integration/test_slurm_job_on_cpu.py::"
       "test_under_process_group_tracking_the_signal_still_reaches_the_ranks"),
      "under proctrack/pgid the signal reaches only the launchers: no rank saves, the job runs into its time limit"),
    M("slurm_container", "with --container every srun step (training, vLLM server) runs in the image, with the paths "
      "it uses mounted, on a host without smolalign", "verbs/launch.md",
      "smolalign/slurm/container.py", "    container = job.container\n    if container is None:",
      "    container = None\n    if container is None:",
      ("tests/unit/test_launch_slurm.py::test_with_pyxis_every_training_node_runs_smolalign_in_the_image",
       "tests/unit/test_launch_slurm.py::test_with_apptainer_the_vllm_server_and_training_run_in_the_image"),
      "srun runs the steps on the host, where accelerate and trl are not installed"),
    M("one_process_per_gpu", "on a machine with several GPUs the train verbs run one process per GPU by default (a "
      "started vLLM server's GPUs left out), and --launch without --num-processes takes the same count",
      "scaling/index.md", "smolalign/target.py",
      '    preset = launch or asked_preset or ("ddp" if training_gpus > 1 else None)',
      '    preset = launch or asked_preset',
      ("tests/unit/test_launch_processes.py::test_one_process_per_gpu_by_default",
       "tests/unit/test_launch_processes.py::test_the_cli_launches_one_process_per_gpu"),
      "one process sees every GPU: TRL refuses DataParallel after the data is prepared and the model loaded"),
    M("processes_fit_gpus", "more processes than GPUs for training is exit 2 naming --num-processes, before anything "
      "starts", "scaling/index.md", "smolalign/preflight/gpus.py",
      "    if gpus < 1 or processes <= training:\n        return None", "    if True:\n        return None",
      ("tests/unit/test_launch_processes.py::test_more_processes_than_gpus_is_refused_before_anything_starts",),
      "nine processes start on eight GPUs"),
    M("no_data_parallel", "a process that sees several GPUs alone is refused before anything loads, with the command "
      "that runs one process per GPU", "scaling/index.md", "smolalign/launch.py",
      "    if processes > 1 or gpus < 2:", "    if True:",
      ("tests/unit/test_launch_processes.py::test_one_process_that_sees_several_gpus_is_refused_with_the_command",),
      "TRL refuses DataParallel after the data is prepared and the model loaded"),
    M("ddp_timeout_reaches_the_group", "train.ddp_timeout is the timeout of the process group the run creates",
      "scaling/index.md", "smolalign/stages/lifecycle.py",
      '    state = PartialState(cpu=not run.hardware.on_gpu, timeout=timedelta(seconds=run.settings["ddp_timeout"]))',
      "    state = PartialState(cpu=not run.hardware.on_gpu)",
      ("tests/integration/test_process_group_timeout.py::test_the_recipes_ddp_timeout_is_the_process_groups",),
      "torch's 30-minute default: ranks waiting on a long data preparation time out"),
    M("plan_under_any_launcher", "under accelerate launch or torchrun the plan is that launcher's processes and "
      "sharding, as under smolalign's own --launch", "scaling/index.md", "smolalign/launch.py",
      '    return is_launched() or "WORLD_SIZE" in os.environ or launched_sharding() is not None',
      "    return is_launched()",
      ("tests/unit/test_launched_sharding.py::test_the_plan_is_the_same_under_accelerate_launch_and_smolaligns_own",),
      "ZeRO-3 printed, memory sized for one unsharded process"),
    M("validate_for_the_image", "recipes validate --for NxGPU (and launch slurm --container) check the image's "
      "packages, and what only this machine lacks is a note", "scaling/preflight.md",
      "smolalign/target.py",
      "        return installed(module) if self.packages is None else module in self.packages",
      "        return installed(module)",
      ("tests/unit/test_launch_slurm.py::test_in_a_container_the_recipe_is_checked_against_the_images_packages",),
      "a cluster recipe is refused for what the laptop lacks"),
    M("gpu_tests_pin_one_gpu", "in the GPU tier in-process tests see the node's first GPU, and a test needing two "
      "gets the node's first two in a child process", "tests.md", "tests/node_gpus.py",
      '        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0]', "        pass",
      ("tests/integration/test_node_gpus.py::test_each_test_sees_the_gpus_it_needs[0,1,2,3,4,5,6,7-2]",),
      "every in-process GPU test sees all the node's GPUs and is launched per GPU or refused"),
    M("signal_kept_from_the_start", "a time-limit signal that arrives while the run is still being set up is kept: "
      "the run saves at its first step end", "verbs/launch.md", "smolalign/stages/registry.py",
      "    with kept_process_variables(), listening():  # the time-limit signal, kept from the stage's start",
      "    with kept_process_variables():",
      ("tests/integration/test_save_on_signal.py::test_a_signal_before_training_starts_is_kept_for_the_first_step",),
      "the signal's default action ends the run during set-up, and the job waits out its time limit"),
    M("row_flag_keeps_custom_instructions", "a prompt row whose mode smolalign carries into its prompt as a flag "
      "keeps the recipe's custom_instructions", "verbs/rl.md; recipes/templates.md", "rewards/think_mode.py",
      '        content = f"{instructions.rstrip()} {flag}" if instructions and instructions.strip() else flag',
      "        content = flag",
      ("tests/unit/test_think_mode.py::test_a_rows_own_mode_keeps_the_recipes_custom_instructions[hub]",),
      "rows in the other mode train under the template's default persona"),
    M("flag_only_system_keeps_kwarg", "a system message of flags only keeps the custom_instructions kwarg",
      "recipes/templates.md", "chat_templates/smollm3.jinja",
      '{%- set custom_instructions = flag.text.rstrip() or (custom_instructions if custom_instructions is defined '
      'and custom_instructions else "") -%}', "{%- set custom_instructions = flag.text.rstrip() -%}",
      ("tests/unit/test_think_mode.py::test_a_rows_own_mode_keeps_the_recipes_custom_instructions[smollm3]",),
      "a row flagged /no_think renders the default persona instead of the recipe's instructions"),
    M("system_prompt_fills_flags_only", "data.system_prompt goes before a row's system message that holds only "
      "flags", "recipes/templates.md", "smolalign/data/formats.py",
      '    if scan_flags(own)[1].strip() or not isinstance(messages[0].get("content"), str):', "    if True:",
      ("tests/unit/test_think_mode.py::test_the_system_prompt_fills_a_system_message_of_flags_only[/no_think]",),
      "the system prompt is dropped from rows whose system message is a bare /no_think"),
    M("tool_call_arguments_as_text", "the template prints tool-call arguments given as JSON text as the object",
      "recipes/templates.md", "chat_templates/smollm3.jinja",
      "{%- set arguments = call.arguments if call.arguments is string else call.arguments | tojson -%}",
      "{%- set arguments = call.arguments | tojson -%}",
      ("tests/unit/test_templates.py::test_the_template_prints_arguments_text_as_it_is_where_trl_renders_it",),
      "where TRL renders a tool conversation, the arguments print as an escaped string"),
    M("tool_call_arguments_one_form", "tool-call arguments given as JSON text train as the object, in one form "
      "whichever way a row wrote them", "recipes/templates.md", "smolalign/templates/render.py",
      "            conversations=[with_arguments_as_mappings(messages)],", "            conversations=[messages],",
      ("tests/unit/test_templates.py::test_tool_call_arguments_given_as_json_text_train_as_the_object[compact-escaped]",),
      "compact or escaped JSON text is trained as written, beside the mappings' form"),
    M("tool_call_arguments_checked", "tool-call arguments that are not a JSON object are refused, naming the row",
      "recipes/templates.md", "smolalign/data/rows.py",
      '        calls_problem = tool_calls_problem(message.get("tool_calls"), f"{where}.tool_calls")',
      '        calls_problem = ""',
      ("tests/unit/test_tools.py::test_sft_on_a_tool_conversation_trains_the_calls_and_answers_not_the_results",),
      "broken JSON arguments are trained as they are"),
    M("stripped_turns_are_context", "in /think mode a turn strip_history_reasoning strips is context and is not "
      "trained",
      "recipes/templates.md", "chat_templates/smollm3.jinja",
      '{%- if stripped and reasoning_mode == "/think" -%}', '{%- if false -%}',
      ("tests/unit/test_templates.py::test_history_reasoning_kept_by_default_and_stripped_on_request",),
      "history answers without their reasoning teach the model to skip reasoning in /think mode"),
    M("sft_tool_calls_need_a_template_that_renders_them", "SFT rows with tool calls are refused with a template "
      "that drops them", "verbs/sft.md", "smolalign/data/encode.py",
      '            if message.get("tool_calls") and self.tool_gap is not None:', "            if False:",
      ("tests/unit/test_tools.py::test_sft_on_a_tool_conversation_trains_the_calls_and_answers_not_the_results",),
      "with chatml the calls vanish and the turn trains an empty answer"),
    M("no_mode_template_states_no_mode", "with a template without modes, a prompt row whose data and recipe state "
      "no mode keeps none, so a reward's default_mode applies", "verbs/rl.md", "smolalign/data/prompts.py",
      "            said = flag_mode(messages) is not None or stated.get(MODE_KWARG) is not None",
      "            said = True",
      ("tests/unit/test_think_mode.py::test_a_template_without_modes_carries_only_the_modes_stated[no-mode-stated]",),
      "every chatml row is scored as a think answer, whatever the reward's default_mode"),
    M("no_mode_template_recipe_mode", "with a template without modes, the recipe's own mode is not taken for a "
      "row's (online DPO renders with no kwargs)", "verbs/rl.md", "smolalign/data/prompts.py",
      "        own = mode != (default if template_has_modes else recipe_mode) and flag_mode(messages) is None",
      "        own = mode != default and flag_mode(messages) is None",
      ("tests/unit/test_think_mode.py::test_a_template_without_modes_carries_only_the_modes_stated"
       "[recipe-no_think-online-dpo]",),
      "online DPO with chatml and enable_thinking: false is refused as if a row asked for a mode"),
    M("online_dpo_rewards_unpadded", "online DPO's rewards get each answer's tokens through its end of turn",
      "verbs/rl.md", "smolalign/trainers/online_dpo.py",
      "        answers = [through_end_of_turn(ids, self.eos_token_ids) for ids in completion_ids_list]",
      "        answers = completion_ids_list",
      ("tests/unit/test_online_dpo_and_reward_recipes.py::test_online_dpo_rewards_get_each_answers_own_tokens",),
      "a length reward sees every answer as long as the batch's longest and cannot tell the pair apart"),
    M("judge_model_checked", "a judge whose model the server does not serve, or whose key it refuses, stops the "
      "run instead of scoring every answer None", "rewards.md", "rewards/judge.py",
      "        if not served or self.model in served:\n            return", "        if True:\n            return",
      ("tests/unit/test_judge_reward.py::test_a_model_the_server_does_not_serve_is_refused_not_scored_none",),
      "a typo in the judge's model name trains the run without the judge, every score None"),
    M("grpo_saves_at_cycle_ends", "GRPO training several steps on one generation saves on the time-limit signal at "
      "the end of the generation cycle, and resumes on the uninterrupted run's weights", "checkpoints.md",
      "smolalign/runs/save_on_signal.py",
      "            if _any_rank(_RECEIVED.is_set(), args.device) and ends:",
      "            if _any_rank(_RECEIVED.is_set(), args.device):",
      ("tests/integration/test_save_on_signal.py::test_grpo_reusing_its_samples_saves_at_the_end_of_a_generation_cycle",),
      "the signal saves inside a cycle; the resumed run generates afresh and trains on other samples"),
    M("signal_cycle_counted_from_resume", "the save on the signal counts generation cycles from the first step the "
      "process trains, and saves at the run's last step whatever the cycle", "checkpoints.md",
      "smolalign/runs/save_on_signal.py",
      "            ends = (state.global_step - resumed_at) % cycle == 0 or state.global_step >= state.max_steps",
      "            ends = state.global_step % cycle == 0",
      ("tests/unit/test_save_on_signal_cycles.py::test_the_save_waits_for_the_cycles_end_counted_from_the_first_step_"
       "trained", "tests/unit/test_save_on_signal_cycles.py::test_the_runs_last_step_saves_whatever_the_cycle"),
      "after a mid-cycle resume the signal saves inside cycles; a run whose last cycle is short never stops on it"),
    M("grpo_save_steps_in_cycles", "a GRPO save_steps inside a generation cycle is refused", "checkpoints.md",
      "smolalign/stages/rl.py", "    if cycle > 1 and saves and saves >= 1 and saves % cycle:",
      "    if False:",
      ("tests/unit/test_bad_input_corpus.py::test_refused[rl-save-inside-a-generation-cycle]",),
      "checkpoints land inside cycles, and their resumes train on other samples"),
    M("resume_warns_changed_inputs", "a resume after a data file or a model folder was rewritten in place is warned "
      "about", "checkpoints.md", "smolalign/runs/inputs.py",
      "    for key in (k for k in stamps if k in before and before[k] != stamps[k]):", "    for key in ():",
      ("tests/integration/test_resume_inputs.py::test_a_data_file_rewritten_in_place_is_warned_about",
       "tests/integration/test_resume_inputs.py::test_a_reference_rebuilt_in_place_is_warned_about"),
      "the resumed steps train on the new rows or against the new reference without a word"),
    M("resumed_mean_loss", "a resumed run reports the whole run's mean training loss", "checkpoints.md",
      "smolalign/runs/metrics.py", "    if not resumed_at or global_step <= resumed_at:\n        return reported",
      "    if True:\n        return reported",
      ("tests/integration/test_resume.py::test_a_resumed_run_reports_the_whole_runs_mean_loss[sft]",),
      "the manifest and the card report the resumed steps' loss divided by every step"),
    M("resume_finishes_a_cut_off_eval", "a run cut off in its eval: section is resumed to run that evaluation, with "
      "no step trained", "checkpoints.md", "smolalign/stages/lifecycle.py",
      "    if only_evaluate:\n        return finish(", "    if False:\n        return finish(",
      ("tests/integration/test_eval.py::test_eval_section_writes_before_and_after",),
      "--resume refuses the finished run, and its evaluation can only be had by training again"),
    M("rewards_read_the_prefilled_think_opener", "where the template's generation prompt opens the think block, "
      "rl's rewards read each answer with the opener in front", "rewards.md", "smolalign/stages/rl.py",
      "    rewards = rewards_of_whole_answers(checked.rewards, template, recipe.template.kwargs, tokenizer,\n"
      "                                       say=opened.state.is_main_process)",
      "    rewards = checked.rewards",
      ("tests/integration/test_rl_run.py::test_rewards_get_the_think_opener_a_template_prefills",),
      "the reasoning reads as the answer, and reasoning cut off by the budget scores as one"),
    M("prefill_wrapper_only_for_an_opened_block", "the rewards are wrapped only where the generation prompt leaves "
      "the think block open", "rewards.md", "smolalign/templates/render.py",
      "    return prefill if THINK_OPEN in prefill and THINK_CLOSE not in prefill else \"\"", "    return prefill",
      ("tests/unit/test_rewards.py::test_rewards_read_the_whole_answer_where_the_template_opens_the_think_block",),
      "smollm3's no_think answers get its empty think block glued in front"),
    M("pairs_key_has_the_template", "the pairs cache key changes with the recipe's template (name, kwargs, text)",
      "verbs/po.md", "smolalign/inputs/pairs_file.py", '"template": _template_fingerprint(recipe)}', '"template": None}',
      ("tests/unit/test_pairs_cache_key.py::test_the_key_changes_with_the_template_and_the_reward_file[verified]",
       "tests/unit/test_pairs_cache_key.py::test_the_key_changes_when_a_template_file_is_edited"),
      "pairs sampled with another template or mode are reused as up to date"),
    M("pairs_key_has_the_reward_files", "the pairs cache key changes with a verifier's or scorer's reward file",
      "verbs/po.md", "smolalign/inputs/pairs_file.py",
      '    models += [_model_fingerprint(name.rsplit(":", 1)[0]) for name in rewards if ".py:" in name]  # a team\'s file\n',
      "",
      ("tests/unit/test_pairs_cache_key.py::test_the_key_changes_with_the_template_and_the_reward_file[verified]",
       "tests/unit/test_pairs_cache_key.py::test_the_key_changes_with_the_template_and_the_reward_file[graded]"),
      "pairs checked by an old verifier are reused as up to date"),
    M("verifier_reads_whole_answers", "the verifier reads each answer with the think opener its template prefills",
      "verbs/po.md", "smolalign/pairs/verified.py",
      '    totals, parts = verifier.score([whole_turns(a["text"], opener) for a in chosen], columns)',
      '    totals, parts = verifier.score([a["text"] for a in chosen], columns)',
      ("tests/unit/test_pairs_cache_key.py::test_the_verifier_reads_each_answer_whole_in_the_mode_it_was_generated_in",),
      "reasoning cut off by the budget is verified as a right answer and chosen"),
    M("verifier_reads_the_sides_mode", "the verifier is told the mode each side generated in (its think, else the "
      "recipe's template kwargs)", "verbs/po.md", "smolalign/pairs/verified.py",
      "    kwargs, opener = side_kwargs(recipe, side), opener_of(recipe, side)",
      "    kwargs, opener = {}, opener_of(recipe, side)",
      ("tests/unit/test_pairs_cache_key.py::test_the_verifier_reads_each_answer_whole_in_the_mode_it_was_generated_in",),
      "no_think answers are verified as think answers, and right ones rejected"),
    M("eval_tools_read_whole_turns", "with tools, eval's rewards read each turn with the think opener the template "
      "prefills", "verbs/eval.md", "smolalign/evaluation/generate.py",
      "    completions = texts if raw is None else [whole_turns(t, prefill) for t in raw]  # what the rewards read",
      "    completions = texts if raw is None else raw",
      ("tests/integration/test_eval_tools.py::test_with_tools_the_rewards_read_the_think_opener_the_template_prefills",),
      "with tools, an answer cut off in its reasoning scores as an answer"),
    M("tool_rl_rows_in_the_recipes_mode", "with tools, a prompt row in another mode than the recipe's is refused",
      "verbs/rl.md", "smolalign/stages/rl.py", "            if mode != default:", "            if False:",
      ("tests/integration/test_tool_rl.py::test_a_row_in_another_mode_than_the_recipes_is_refused_with_tools"
       "[row0-True]",),
      "the turns after a tool result switch to the recipe's mode"),
    M("pair_sides_modes_warned", "a weak side in another mode than the strong side's is warned about",
      "verbs/po.md", "smolalign/pairs/sides.py", "    if strong != weak:", "    if False:",
      ("tests/integration/test_pairs.py::test_sides_in_different_modes_are_warned_about[think-against-no_think]",),
      "rejected answers are trained under a prompt they were not sampled from, without a word"),
    M("sft_empty_answer_refused", "an empty answer is refused, naming the row, or skipped with a count under "
      "data.on_untrained: drop", "verbs/sft.md", "smolalign/data/encode.py",
      "            if not answer.strip() and not message.get(\"tool_calls\"):", "            if False:",
      ("tests/unit/test_data_pipeline.py::test_an_empty_answer_fails_or_is_dropped[messages]",
       "tests/unit/test_data_pipeline.py::test_an_empty_answer_fails_or_is_dropped[only-a-think-block]"),
      "the model is trained to end its turn at once"),
    M("no_think_reasoning_refused", "a /no_think row whose answer holds reasoning is refused, naming the row",
      "verbs/sft.md", "smolalign/data/encode.py",
      "            if no_think and index >= kept_from and reasoning:", "            if False:",
      ("tests/unit/test_data_pipeline.py::test_reasoning_in_a_no_think_answer_is_refused[no_think-kwarg]",
       "tests/unit/test_data_pipeline.py::test_reasoning_in_a_no_think_answer_is_refused[unclosed]"),
      "the model learns to reason in no_think mode"),
]


@dataclass(frozen=True)
class Figure:
    """A speed or size figure the documentation states: measured by a benchmark against a baseline in the same run (timed
    tests would measure the machine), with the test that proves the mechanism behind it where there is one."""

    figure: str
    benchmark: str
    results: str
    """The benchmarks/RESULTS.md section that holds the latest measurement and its machine."""
    mechanism: str = ""


FIGURES = [
    Figure("bf16 weights after 30 SFT steps at lr 1e-5: stochastic rounding 0.027 against float32's 0.028 on the "
           "bundled SmolLM2-135M (Kahan summation 0.385); plain AdamW 1.187x float32 masters' loss on a random "
           "384-wide model", "python benchmarks/update_precision.py", "Whether bf16 weights learn at float32's pace",
           "bf16_updates_kept, bf16_stochastic_rounding above"),
    Figure("SFT data preparation 1.92x TRL's tokens/s, the same ids and labels", "python benchmarks/sft_data.py",
           "SFT data preparation", "tests/unit/test_masks_match_trl.py (same ids and labels as TRL)"),
    Figure("code reward: >= 100 sandboxed executions/s per core on a batch with hanging programs",
           "python benchmarks/rewards.py --only code [--level bwrap|unshare]", "Code reward sandbox",
           "sandbox_pool_never_idles above"),
    Figure("math reward: >= 500 completions/s per core", "python benchmarks/rewards.py --only math", "Rewards"),
    Figure("graded pairs: 1.5x the pairs/s of strong-vs-weak", "python benchmarks/pairs.py", "Pair generation"),
    Figure("evaluation throughput (answers/s, batched)", "python benchmarks/eval.py", "Evaluation throughput"),
    Figure("checkpoint conversion time and bit-exactness", "python benchmarks/convert.py", "Checkpoint conversion",
           "nanotron_bit_exact above"),
    Figure("on-policy distillation vs GRPO, time per step", "python benchmarks/distill.py",
           "On-policy distillation vs GRPO"),
    Figure("memory per device within 10% of the real peak (CPU), step time", "python benchmarks/estimate.py",
           "Memory estimate against the real high-water mark", "memory_estimate above"),
    Figure("the quickstart's tables, stage times and training curves", "make quickstart",
           "Quickstart with distillation under autocast and top-p without a sort",
           "tests/slow/test_quickstart.py (losses fall, chats stop)"),
    Figure("a quickstart GRPO step on a CPU 5.71x TRL as it comes (prompts run once in training 1.48x, read once in "
           "generation 1.27x of it); a distillation step 1.29x",
           "python benchmarks/cpu_training.py [--stage distill]",
           "GRPO with each prompt read once in generation too; Distillation under the run's mixed precision",
           "cpu_scored_positions, cpu_generation_copy, cpu_autocast_eager_attention, grpo_shared_prompts, "
           "grpo_shared_prefill, distill_mixed_precision above"),
    Figure("top-p sampling on a CPU 1.65x (transformers) and 2.11x (vLLM), tokens from the same distribution",
           "python benchmarks/sampling.py", "Top-p without a sort, a draw from one number",
           "vllm_cpu_sampler, one_number_draw, transformers_sampling_training, transformers_one_number_draw, "
           "transformers_sampling_generators above"),
    Figure("a GGUF model's first-run reading and conversion 3.86x faster (37.9 -> 9.8 s for the bundled SmolLM2)",
           "python benchmarks/gguf_read.py", "A GGUF model's first run: the file read once",
           "gguf_read_once, gguf_plain_array above"),
    Figure("a command's exit after its work 2.54x faster (2.24 -> 0.88 s after a GRPO step of the quickstart)",
           "python benchmarks/cli_exit.py", "A command's exit: the last garbage collection left nothing to walk",
           "program_exit_frozen above"),
    Figure("attention under CPU autocast 1.97x eager at 1,024 tokens and 2.13x at 1,536 (SDPA above 512 keys)",
           "python benchmarks/cpu_attention.py", "Attention under CPU autocast by length",
           "cpu_attention_sdpa_when_long, cpu_attention_eager_when_short above"),
    Figure("bf16 on a CPU pays from ~384 wide: the tests' 64-wide model trains 0.17-0.24x and generates 0.77x "
           "float32's speed in bf16, a 384-wide one generates 1.45-1.49x",
           "python benchmarks/precision_width.py", "From which width bf16 pays on a CPU",
           "cpu_bf16_narrow_float32 above"),
    Figure("the tests that generate or train: level with float32 in the CPU's precision (1.32x float32's time "
           "before; the tests' 64-wide models now compute in float32)", "python benchmarks/suite_phases.py",
           "The generating and training tests, float32 against the CPU's precision",
           "cpu_bf16_narrow_float32, cpu_attention_sdpa_when_long above"),
    Figure("SFT on one H200, unequal settings (smolalign: flex attention keeping packed documents apart and Liger; "
           "TRL: sdpa, no Liger), 16k rows: 19,010 tokens/s, 39.5% MFU, 3.07x plain TRL's tokens/s after a 247 s "
           "first step; at equal settings (sdpa, Liger, 4k rows, issue 52) 0.63x TRL's, level without Liger",
           "python benchmarks/gpu_sft.py", "SFT on one NVIDIA H200: `smolalign sft` against plain TRL",
           "tests/gpu/test_cuda_sft.py (SFT with sdpa and flex attention on CUDA, bf16 weights on disk)"),
]
