"""Upstream configs (TRL, alignment-handbook, open-r1) translated into recipes, the rename hints validation gives,
open-r1's format reward, and data.system_prompt. The configs below are written in each upstream's layout (keys and
values as in their published recipes), not copied from them."""

import pytest
from recipe_runs import run_of

from rewards.errors import RewardError
from rewards.registry import resolve_reward
from smolalign.data.mixture import build_mixture
from smolalign.errors import SmolalignError
from smolalign.recipe.data_schema import DataSection, SourceSection
from smolalign.recipe.importer import detect_format, detect_stage, import_config

HANDBOOK_QLORA = {
    "model_name_or_path": "mistralai/Mistral-7B-v0.1", "model_revision": "main", "torch_dtype": "bfloat16",
    "load_in_4bit": True, "use_peft": True, "lora_r": 8, "lora_target_modules": ["q_proj", "v_proj"],
    "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}",
    "dataset_mixture": {"datasets": [
        {"id": "HuggingFaceH4/ultrachat_200k", "config": "default", "split": "train_sft", "columns": ["messages"],
         "weight": 0.5}], "seed": 3, "test_split_size": 100},
    "dataset_num_proc": 12, "eos_token": "<|im_end|>",
    "learning_rate": 2.0e-4, "max_seq_length": 2048, "warmup_ratio": 0.1, "overwrite_output_dir": True,
    "gradient_checkpointing_kwargs": {"use_reentrant": False},
}


def test_handbook_qlora_sft_lands_in_its_sections():
    imported = import_config(dict(HANDBOOK_QLORA), "qlora.yaml")
    recipe = imported.recipe
    assert (imported.format, imported.stage) == ("handbook", "sft")
    assert recipe["model"] == {"source": "mistralai/Mistral-7B-v0.1", "revision": "main", "dtype": "bfloat16",
                               "quantization": "4bit"}
    # TRL's ModelConfig defaults (alpha 32, dropout 0.05) apply where the config is silent, not LoraConfig's.
    assert recipe["peft"] == {"r": 8, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
    assert recipe["data"] == {"sources": [{"path": "HuggingFaceH4/ultrachat_200k", "name": "default",
                                           "split": "train_sft", "columns": ["messages"], "weight": 0.5}],
                              "seed": 3, "eval_split": 100}
    assert recipe["train"] == {"learning_rate": 2.0e-4, "max_length": 2048, "warmup_steps": 0.1,
                               "gradient_checkpointing_kwargs": {"use_reentrant": False}}
    assert imported.files == {"qlora.chat_template.jinja": HANDBOOK_QLORA["chat_template"]}
    assert recipe["template"] == {"name": "qlora.chat_template.jinja"}
    reported = {line.split()[1].rstrip(":") for line in imported.lines if line.split()[0] in ("mapped", "renamed", "dropped")}
    assert reported == set(HANDBOOK_QLORA)  # every key is accounted for


def test_handbook_apo_is_a_po_recipe_with_the_tokenizers_template():
    apo = {"model_name_or_path": "HuggingFaceTB/SmolLM3-3B-checkpoints", "model_revision": "it-SFT",
           "dataset_mixture": {"datasets": [
               {"id": "HuggingFaceTB/smoltalk2", "config": "Preference", "split": "tulu_no_think",
                "columns": ["chosen", "rejected", "prompt", "chat_template_kwargs"], "weight": 0.5}]},
           "beta": 0.05, "loss_type": "apo_zero", "max_length": 24576, "learning_rate": 1.0e-6}
    imported = import_config(apo, "apo.yaml")
    assert imported.stage == "po" and imported.recipe["method"] == "apo_zero"
    assert imported.recipe["template"] == {"name": "model"}
    assert imported.recipe["train"] == {"beta": 0.05, "max_length": 24576, "learning_rate": 1.0e-6}


OPEN_R1_GRPO = {
    "model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct", "torch_dtype": "bfloat16",
    "dataset_name": "open-r1/OpenR1-Math-220k", "dataset_prompt_column": "problem",
    "system_prompt": "Think, then answer: <think>\n...\n</think>\n<answer>\n...\n</answer>",
    "use_vllm": True, "num_generations": 8, "max_prompt_length": 512, "max_completion_length": 1024,
    "reward_funcs": ["accuracy", "format", "tag_count", "repetition_penalty", "soft_overlong_punishment"],
    "reward_weights": [1.0, 0.5, 0.25, 1.0, 1.0], "repetition_n_grams": 4, "repetition_max_penalty": -0.5,
    "max_completion_len": 1024, "soft_punish_cache": 128, "callbacks": ["push_to_hub_revision"],
}


def test_open_r1_grpo_rewards_keep_their_meaning():
    imported = import_config(dict(OPEN_R1_GRPO), "grpo.yaml")
    recipe = imported.recipe
    assert (imported.format, imported.stage) == ("open-r1", "rl")
    assert recipe["rewards"] == [
        {"name": "math_accuracy", "weight": 1.0},
        {"name": "answer_format", "weight": 0.5},
        {"name": "tag_count", "weight": 0.25, "params": {"tags": ["<think>\n", "\n</think>\n", "\n<answer>\n",
                                                                  "\n</answer>"]}},
        {"name": "repetition", "weight": 1.0, "params": {"ngram_size": 4, "max_penalty": -0.5}},
        {"name": "soft_overlong", "weight": 1.0, "params": {"max_length": 1024, "cache": 128}},
    ]
    assert recipe["data"]["sources"] == [{"path": "open-r1/OpenR1-Math-220k",
                                          "columns": {"problem": "prompt", "solution": "solution"}}]
    assert recipe["data"]["system_prompt"] == OPEN_R1_GRPO["system_prompt"]
    # open-r1 pinned TRL 0.18, where use_vllm meant a vLLM server.
    assert recipe["generation"] == {"backend": "vllm_server"}
    assert "max_prompt_length" not in recipe["train"]


def test_open_r1_code_reward_reads_verification_info():
    # open-r1's code recipes (e.g. its Qwen2.5-1.5B code GRPO config) score its code datasets, whose tests are in
    # verification_info.
    config = {**OPEN_R1_GRPO, "dataset_name": "open-r1/verifiable-coding-problems-python",
              "reward_funcs": ["code"], "reward_weights": [1.0]}
    recipe = import_config(config, "grpo.yaml").recipe
    assert recipe["rewards"] == [{"name": "code", "weight": 1.0, "params": {"test_column": "verification_info"}}]
    assert recipe["data"]["sources"] == [{"path": "open-r1/verifiable-coding-problems-python",
                                          "columns": {"problem": "prompt", "verification_info": "verification_info"}}]


@pytest.mark.parametrize("name, fragment", [("reasoning_steps", "no built-in"), ("length", "cosine_length"),
                                            ("cosine", "tokens"), ("ioi_code", "Piston")])
def test_open_r1_rewards_without_an_equivalent_are_refused_with_the_closest(name, fragment):
    with pytest.raises(SmolalignError, match=f"grpo.yaml: reward_funcs: {name}:.*{fragment}"):
        import_config({**OPEN_R1_GRPO, "reward_funcs": [name], "reward_weights": [1.0]}, "grpo.yaml")


def test_trl_dpo_with_a_local_mixture(tmp_path, monkeypatch):
    (tmp_path / "pairs.jsonl").write_text('{"prompt": "hi", "chosen": "a", "rejected": "b"}\n')
    monkeypatch.chdir(tmp_path)
    config = {"model_name_or_path": "Qwen/Qwen3-0.6B", "dtype": "float32", "use_peft": False,
              "datasets": [{"path": "json", "data_files": "pairs.jsonl"}],
              "loss_type": ["sigmoid", "sft"], "loss_weights": [1.0, 0.5], "precompute_ref_log_probs": True}
    imported = import_config(config, "dpo.yaml")
    assert (imported.format, imported.stage) == ("trl", "po")
    assert imported.recipe["data"]["sources"] == [{"path": str(tmp_path / "pairs.jsonl"), "split": "train"}]
    assert imported.recipe["method"] == {"sigmoid": 1.0, "sft": 0.5}
    assert imported.recipe["reference"] == "precomputed"
    assert "peft" not in imported.recipe


@pytest.mark.parametrize("config, fragment", [
    ({"model_name_or_path": "m", "dataset_name": "d", "learnin_rate": 1e-5}, "learnin_rate: not a trl key"),
    ({"model_name_or_path": "m", "datasets": [{"path": "d", "fraction": 0.5}]}, "datasets.0.fraction"),
    ({"model_name_or_path": "m", "dataset_name": "d", "bnb_4bit_quant_type": "fp4"}, "bnb_4bit_quant_type"),
    ({"model_name_or_path": "m"}, "dataset_name: the config names no dataset"),
])
def test_keys_without_a_home_are_refused(config, fragment):
    with pytest.raises(SmolalignError, match=f"^x.yaml: {fragment}"):
        import_config(config, "x.yaml")


def test_stage_detection():
    assert import_config({"model_name_or_path": "m", "dataset_name": "d", "loss_type": "dft"}, "f").stage == "sft"
    assert import_config({"model_name_or_path": "m", "dataset_name": "d", "beta": 0.1}, "f").stage == "po"
    assert detect_stage({"model_name_or_path": "m", "dataset_name": "d", "num_generations": 4}) == "rl"


def test_format_detection():
    assert detect_format({"model_name_or_path": "m", "reward_funcs": ["accuracy"]}, "f") == "open-r1"
    assert detect_format({"model_name_or_path": "m", "dataset_mixture": {}}, "f") == "handbook"
    assert detect_format({"model_name_or_path": "m", "dataset_name": "d"}, "f") == "trl"
    for raw in ({"model": {"source": "m"}}, {"learning_rate": 1e-5}):
        with pytest.raises(SmolalignError, match="^f"):
            detect_format(raw, "f")


@pytest.mark.parametrize("section, key, home", [
    ("model", "torch_dtype", "model.dtype"), ("train", "warmup_ratio", "train.warmup_steps"),
    ("train", "max_prompt_length", "max_length"), ("", "model_name_or_path", "model.source"),
    ("data", "dataset_mixture", "data.sources"), ("model", "load_in_4bit", "model.quantization: 4bit"),
    ("", "use_peft", "peft:"), ("data", "system_prompt", None), ("train", "system_prompt", "data.system_prompt"),
])
def test_upstream_names_in_a_recipe_get_their_home(tmp_path, section, key, home):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n')
    raw = {"model": {"source": "some/model"}, "data": {"sources": [{"path": str(data)}]}, "train": {}}
    value = True if key in ("load_in_4bit", "use_peft") else "x"
    if section:
        raw[section][key] = value
    else:
        raw[key] = value
    if home is None:  # data.system_prompt is a key of smolalign's own
        run_of(raw, "sft", "r.yaml")
        return
    with pytest.raises(SmolalignError) as caught:
        run_of(raw, "sft", "r.yaml")
    assert home in str(caught.value) and key in str(caught.value)


@pytest.mark.parametrize("key, value, home", [
    ("eos_token", "<|im_end|>", "end-of-turn"), ("chat_template_path", "t.jinja", "template.name"),
    ("dataset_text_field", "body", "columns"), ("model_init_kwargs", {"use_fast": False}, "model:"),
    ("push_to_hub", True, "a hub: section"), ("hub_model_id", "me/model", "hub.repo_id"),
    ("hub_strategy", "every_save", "pushes the final model once"),
])
def test_train_keys_smolalign_sets_are_refused(key, value, home):
    raw = {"model": {"source": "some/model"}, "data": {"sources": [{"path": "d.jsonl"}]}, "train": {key: value}}
    with pytest.raises(SmolalignError, match=f"train.{key} is set by smolalign: .*{home}"):
        run_of(raw, "sft", "r.yaml")


def test_open_r1_format_and_code_format_rewards():
    fmt = resolve_reward("answer_format")
    good = "<think>\nadd them\n</think>\n<answer>\n42\n</answer>"
    completions = [good, good.replace("<answer>\n", "<answer>"), "42", "<think>\nx\n</think>\n42",
                   [{"role": "assistant", "content": good}]]
    assert fmt(completions) == [1.0, 0.0, 0.0, 0.0, 1.0]
    code = resolve_reward("answer_format", {"language": "python"})
    with_code = "<think>\nloop\n</think>\n<answer>\n```python\nprint(1)\n```\n</answer>"
    with_cpp = with_code.replace("python", "cpp")
    assert code([with_code, with_cpp, good]) == [1.0, 0.0, 0.0]
    assert code([with_cpp], language=["cpp"]) == [1.0]  # a row's language column wins


def test_open_r1_reward_names_point_at_ours():
    with pytest.raises(RewardError, match="'format' is the open-r1 / TRL name.*'answer_format'"):
        resolve_reward("format")
    with pytest.raises(RewardError, match="reasoning_steps.*no built-in equivalent"):
        resolve_reward("reasoning_steps")


def test_system_prompt_goes_first_in_every_row_without_one(tmp_path):
    rows = tmp_path / "chat.jsonl"
    rows.write_text('{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n'
                    '{"messages": [{"role": "system", "content": "own"}, {"role": "user", "content": "c"}, '
                    '{"role": "assistant", "content": "d"}]}\n')
    mixture = build_mixture(DataSection(sources=[SourceSection(path=str(rows))], system_prompt="Be terse."))
    firsts = [row["messages"][0] for row in mixture.train]
    assert firsts == [{"role": "system", "content": "Be terse."}, {"role": "system", "content": "own"}]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n')
    mixture = build_mixture(DataSection(sources=[SourceSection(path=str(pairs))], system_prompt="S"))
    assert mixture.train[0]["prompt"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}]
    text = tmp_path / "text.jsonl"
    text.write_text('{"text": "plain"}\n')
    with pytest.raises(SmolalignError, match="system_prompt.*plain text"):
        build_mixture(DataSection(sources=[SourceSection(path=str(text))], system_prompt="S"))


# The handbook's ORPO recipes predate its TRL-ScriptArguments rewrite: dataset_mixer, dataset_splits, no loss_type.
HANDBOOK_V0_ORPO = {
    "model_name_or_path": "mistralai/Mistral-7B-v0.1", "model_revision": "main", "torch_dtype": "bfloat16",
    "use_flash_attention_2": True, "dataset_mixer": {"argilla/distilabel-capybara-dpo-7k-binarized": 0.25,
                                                     "HuggingFaceH4/ultrafeedback_binarized": 1.0},
    "dataset_splits": ["train_prefs", "test_prefs"], "preprocessing_num_workers": 12, "truncation_side": "left",
    "beta": 0.05, "learning_rate": 5.0e-6, "max_length": 2048, "max_prompt_length": 1792,
    "hub_model_id": "orpo-explorers/mistral-orpo", "push_to_hub": True, "hub_strategy": "every_save",
}


def test_handbook_v0_orpo_keeps_its_method_data_and_hub():
    imported = import_config(dict(HANDBOOK_V0_ORPO), "recipes/mistral-7b/orpo/config_full.yaml")
    recipe = imported.recipe
    assert (imported.format, imported.stage, recipe["method"]) == ("handbook", "po", "orpo")
    assert recipe["model"]["attn_implementation"] == "flash_attention_2"
    # Each dataset's train* split with its fraction; test_prefs is the handbook's evaluation set, not training data.
    assert recipe["data"]["sources"] == [
        {"path": "argilla/distilabel-capybara-dpo-7k-binarized", "split": "train_prefs", "weight": 0.25},
        {"path": "HuggingFaceH4/ultrafeedback_binarized", "split": "train_prefs"}]
    assert recipe["hub"] == {"repo_id": "orpo-explorers/mistral-orpo"}
    # truncation_side left keeps the end of a long prompt: TRL's keep_end.
    assert recipe["train"] == {"truncation_mode": "keep_end", "beta": 0.05, "learning_rate": 5.0e-6,
                               "max_length": 2048}
    reported = {line.split()[1].rstrip(":") for line in imported.lines
                if line.split()[0] in ("mapped", "renamed", "dropped")}
    assert reported == set(HANDBOOK_V0_ORPO)


def test_orpo_is_detected_by_its_fields_and_dpo_stays_dpo():
    orpo = {"model_name_or_path": "m", "dataset_name": "d", "beta": 0.1, "generate_during_eval": False}
    assert import_config(orpo, "config.yaml").recipe["method"] == "orpo"
    dpo = {"model_name_or_path": "m", "dataset_name": "d", "beta": 0.1}
    assert import_config(dpo, "recipes/zephyr/dpo/config_full.yaml").recipe["method"] == "dpo"


def test_hub_keys_without_an_owner_or_a_push_are_dropped_with_why():
    base = {"model_name_or_path": "m", "dataset_name": "d"}
    no_owner = import_config({**base, "push_to_hub": True, "hub_model_id": "zephyr-7b-dpo-full"}, "f.yaml")
    assert "hub" not in no_owner.recipe
    assert any(line.startswith("dropped  hub_model_id: no owner/name") for line in no_owner.lines)
    no_push = import_config({**base, "push_to_hub": False, "hub_model_id": "me/x"}, "f.yaml")
    assert "hub" not in no_push.recipe and "push_to_hub" not in no_push.recipe["train"]
    branch = import_config({**base, "push_to_hub": True, "hub_model_id": "me/x", "hub_private_repo": False,
                            "hub_model_revision": "v0.1", "reward_funcs": ["accuracy"]}, "f.yaml")
    assert branch.recipe["hub"] == {"repo_id": "me/x", "private": False, "revision": "v0.1"}


@pytest.mark.parametrize("patch, fragment", [
    ({"dataset_configs": ["a"]}, "dataset_configs: 1 configs for 2 datasets"),
    ({"dataset_splits": ["test_prefs"]}, "dataset_splits: ['test_prefs']: no split named train"),
    ({"dataset_mixer": {"d": 0}}, "dataset_mixer.d: 0: the fraction"),
])
def test_bad_handbook_v0_mixers_are_refused(patch, fragment):
    with pytest.raises(SmolalignError) as caught:
        import_config({**HANDBOOK_V0_ORPO, **patch}, "x.yaml")
    assert str(caught.value).startswith(f"x.yaml: {fragment}")
