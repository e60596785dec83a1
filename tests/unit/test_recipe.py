"""Recipes: YAML typing, extends + deep merge, --set overrides, unknown keys with suggestions, type checks."""

import pytest
from recipe_runs import run_of

from smolalign.errors import SmolalignError
from smolalign.recipe.load import apply_overrides, deep_merge, read_recipe
from smolalign.recipe.yamlio import load_yaml, parse_value


def minimal(tmp_path) -> dict:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello"}\n')
    return {"model": {"source": "some-org/some-model"}, "data": {"sources": [{"path": str(data)}]}}


def test_yaml_reads_exponent_floats_as_numbers():
    assert load_yaml("lr: 2e-5\nb: 1e6\nc: 1.0e-4\nd: '2e-5'") == {"lr": 2e-5, "b": 1e6, "c": 1e-4, "d": "2e-5"}


@pytest.mark.parametrize(("text", "value"), [("3", 3), ("2e-5", 2e-5), ("true", True), ("[a, b]", ["a", "b"]),
                                             ("null", None), ("bfd", "bfd"), ("", "")])
def test_override_values_are_yaml_typed(text, value):
    assert parse_value(text) == value


def test_deep_merge_merges_mappings_and_replaces_lists():
    base = {"train": {"lr": 1, "epochs": 3}, "data": {"sources": [1, 2]}}
    merged = deep_merge(base, {"train": {"lr": 2}, "data": {"sources": [3]}})
    assert merged == {"train": {"lr": 2, "epochs": 3}, "data": {"sources": [3]}}
    assert base["train"]["lr"] == 1


def test_extends_chain_with_relative_paths(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "data.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "base" / "base.yaml").write_text(
        "model: {source: org/base}\ndata: {sources: [{path: data.jsonl}]}\ntrain: {learning_rate: 1e-5, max_steps: 5}\n")
    (tmp_path / "child.yaml").write_text("extends: base/base.yaml\ntrain: {max_steps: 7}\n")
    merged = read_recipe(tmp_path / "child.yaml")
    assert merged["train"] == {"learning_rate": 1e-5, "max_steps": 7}
    assert merged["data"]["sources"][0]["path"] == str((tmp_path / "base" / "data.jsonl").resolve())
    assert "extends" not in merged


def test_extends_a_shipped_recipe_by_name(tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: quickstart/sft\ntrain: {max_steps: 2}\n")
    merged = read_recipe(tmp_path / "mine.yaml")
    assert merged["train"]["max_steps"] == 2
    assert merged["model"]["source"] == "smollm2-135m-instruct"


def test_extends_cycle_is_reported(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(SmolalignError, match="extends itself"):
        read_recipe(tmp_path / "a.yaml")


def test_overrides_set_nested_keys_and_list_items():
    raw = {"train": {"learning_rate": 1e-5}, "data": {"sources": [{"path": "a", "weight": 1.0}]}}
    out = apply_overrides(raw, ["train.learning_rate=3e-4", "data.sources.0.weight=2", "train.packing=bfd"])
    assert out["train"] == {"learning_rate": 3e-4, "packing": "bfd"}
    assert out["data"]["sources"][0]["weight"] == 2
    with pytest.raises(SmolalignError, match="KEY=VALUE"):
        apply_overrides(raw, ["train.learning_rate"])
    with pytest.raises(SmolalignError, match="index"):
        apply_overrides(raw, ["data.sources.3.weight=1"])


def test_unknown_train_key_suggests_the_nearest_field(tmp_path):
    raw = {**minimal(tmp_path), "train": {"learnin_rate": 1e-5}}
    with pytest.raises(SmolalignError, match=r"unknown key train\.learnin_rate \(did you mean learning_rate\?\)"):
        run_of(raw, "sft", "test")


@pytest.mark.parametrize(("patch", "message"), [
    ({"modle": {}}, r"unknown key modle \(did you mean model\?\)"),
    ({"model": {"source": "x/y", "dtyp": "auto"}}, r"unknown key model\.dtyp \(did you mean dtype\?\)"),
    ({"template": {"nmae": "chatml"}}, r"unknown key template\.nmae \(did you mean name\?\)"),
    ({"peft": {"rr": 8}}, r"unknown key peft\.rr \(did you mean r\?\)"),
])
def test_unknown_keys_anywhere_are_errors(tmp_path, patch, message):
    with pytest.raises(SmolalignError, match=message):
        run_of({**minimal(tmp_path), **patch}, "sft", "test")


def test_unknown_source_key_names_its_index(tmp_path):
    raw = minimal(tmp_path)
    raw["data"]["sources"][0]["weigth"] = 2
    with pytest.raises(SmolalignError, match=r"data\.sources\.0\.weigth \(did you mean weight\?\)"):
        run_of(raw, "sft", "test")


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("train", "learning_rate", "fast", r"train\.learning_rate must be a number, got 'fast'"),
    ("train", "per_device_train_batch_size", 2.5, r"train\.per_device_train_batch_size must be an integer"),
    ("train", "packing", 3, r"train\.packing must be true or false"),
    ("model", "dtype", "float64", r"model\.dtype must be one of"),
])
def test_wrong_types_name_the_key(tmp_path, section, key, value, message):
    raw = minimal(tmp_path)
    raw.setdefault(section, {})[key] = value
    with pytest.raises(SmolalignError, match=message):
        run_of(raw, "sft", "test")


def test_packing_shorthand_and_legacy_ffd(tmp_path, capsys):
    recipe = run_of({**minimal(tmp_path), "train": {"packing": "bfd_split"}}, "sft", "t").recipe
    assert recipe.train["packing"] is True and recipe.train["packing_strategy"] == "bfd_split"
    recipe = run_of({**minimal(tmp_path), "train": {"packing": True, "packing_strategy": "ffd"}}, "sft", "t").recipe
    assert recipe.train["packing_strategy"] == "bfd"
    assert "legacy" in capsys.readouterr().err
    with pytest.raises(SmolalignError, match="train.packing must be false or one of"):
        run_of({**minimal(tmp_path), "train": {"packing": "greedy"}}, "sft", "t")


@pytest.mark.parametrize(("train", "message"), [
    ({"packing": "bfd", "packing_strategy": "nonsense"},
     "train.packing 'bfd' and train.packing_strategy 'nonsense' contradict each other"),
    ({"packing": "bfd", "packing_strategy": "wrapped"},
     "train.packing 'bfd' and train.packing_strategy 'wrapped' contradict each other"),
    ({"bf16": True, "fp16": True}, "train.bf16 and train.fp16 are both true"),
])
def test_keys_that_contradict_each_other_are_refused_with_both_named(tmp_path, cli, write_recipe, train, message):
    with pytest.raises(SmolalignError, match=message):
        run_of({**minimal(tmp_path), "train": train}, "sft", "t")
    code, out, err = cli("recipes", "validate", write_recipe({**minimal(tmp_path), "train": train}))
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"error: {message}")
    agreeing = {"packing": "bfd", "packing_strategy": "bfd"} if "packing" in train else {"bf16": True, "fp16": False}
    assert run_of({**minimal(tmp_path), "train": agreeing}, "sft", "t")


def test_stage_mismatch_and_required_sections(tmp_path):
    with pytest.raises(SmolalignError, match="not `smolalign sft`"):
        run_of({**minimal(tmp_path), "stage": "po"}, "sft", "t")
    with pytest.raises(SmolalignError, match=r"^stage: unknown stage 'stf' \(did you mean sft\?\); one of sft, po, rl$"):
        run_of({**minimal(tmp_path), "stage": "stf"}, "sft", "t")
    with pytest.raises(SmolalignError, match="model is required"):
        run_of({"data": minimal(tmp_path)["data"]}, "sft", "t")
    with pytest.raises(SmolalignError, match=r"data\.sources is required"):
        run_of({"model": {"source": "a/b"}, "data": {}}, "sft", "t")


@pytest.mark.parametrize(("shipped", "verb", "declared"), [
    ("quickstart/po_graded", "sft", "po"), ("quickstart/distill", "sft", "rl"), ("quickstart/online_dpo", "po", "rl"),
    ("quickstart/po_graded", "rl", "po"), ("quickstart/sft", "po", "sft")])
def test_a_recipe_run_with_another_verb_names_its_own(shipped, verb, declared):
    """Not "unknown key method": another verb's sections are not typos."""
    from smolalign.recipe.validate import load_recipe

    with pytest.raises(SmolalignError, match=f"^this recipe is for `smolalign {declared}`, not `smolalign {verb}`$"):
        load_recipe(shipped, [], verb)


def test_quantization_requires_adapters(tmp_path):
    raw = minimal(tmp_path)
    raw["model"]["quantization"] = "4bit"
    with pytest.raises(SmolalignError, match="needs a peft"):
        run_of(raw, "sft", "t")


def test_shipped_recipes_validate(monkeypatch):
    """On the machine they are written for: the GPU image (vLLM, DeepSpeed, Liger installed) on an 8-GPU node."""
    from smolalign.recipe.load import shipped_recipes
    from smolalign.target import Target

    shipped = shipped_recipes()
    assert "quickstart/sft" in shipped
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "flash_attn")
    node = Target(8, "an 8-GPU node", bf16=True, processes=7)
    for name, path in shipped.items():
        raw = read_recipe(path)
        run_of(raw, raw.get("stage", "sft"), name, target=node)


# The published SmolLM3 post-training recipes, read from huggingface/alignment-handbook at commit
# 925acdfe4b2b4e38c3dabd1851bc418f0b656351 (2025-07-29; recipes/smollm3 is the same at 61d7a82): every smoltalk2
# split in file order with its weight, the columns kept, and the global batch each file's header comment states
# ("GBS 128" on 8 nodes with GA 2, "GBS 32" on 2 nodes with GA 2; the recipes' README passes GA 16 / 4 on one node).
SFT_SPLITS = [
    ("smoltalk_smollm3_everyday_conversations_no_think", 1.0), ("smoltalk_smollm3_systemchats_30k_no_think", 1.0),
    ("tulu_3_sft_personas_instruction_following_no_think", 1.0), ("hermes_function_calling_v1_no_think", 1.0),
    ("smoltalk_smollm3_smol_magpie_ultra_no_think", 0.5), ("smoltalk_multilingual_8languages_lang_5_no_think", 1.0),
    ("table_gpt_no_think", 1.0), ("OpenHermes_2.5_no_think", 0.5), ("OpenThoughts3_1.2M_no_think_no_think", 0.4),
    ("Mixture_of_Thoughts_science_no_think", 1.0), ("smoltalk_smollm3_explore_instruct_rewriting_no_think", 1.0),
    ("smoltalk_smollm3_smol_rewrite_no_think", 1.0), ("smoltalk_smollm3_smol_summarize_no_think", 1.0),
    ("LongAlign_64k_context_lang_annotated_lang_6_no_think", 1.0), ("multi_turn_reasoning_if_think", 1.0),
    ("smoltalk_everyday_convs_reasoning_Qwen3_32B_think", 1.0), ("smoltalk_systemchats_Qwen3_32B_think", 1.0),
    ("xlam_traces_no_think", 1.0), ("smolagents_toolcalling_traces_think", 1.0), ("s1k_1.1_think", 1.0),
    ("LongAlign_64k_Qwen3_32B_yarn_131k_think", 1.0), ("aya_dataset_Qwen3_32B_think", 1.0),
    ("smoltalk_multilingual8_Qwen3_32B_think", 0.3), ("OpenThoughts3_1.2M_think", 0.02),
    ("table_gpt_Qwen3_32B_think", 1.0),
]
PUBLISHED = {
    # recipe: (smoltalk2 config, [(split, weight)], columns, global batch, upstream train fields kept as they are)
    "smollm3/sft": ("SFT", SFT_SPLITS, ["messages", "chat_template_kwargs"], 128,
                    {"max_length": 65536, "num_train_epochs": 5, "learning_rate": 2e-5, "max_grad_norm": 0.2,
                     "assistant_only_loss": True, "average_tokens_across_devices": True, "save_total_limit": 1,
                     "dataset_num_proc": 12, "ddp_timeout": 18000}),
    "smollm3/mid": ("Mid", [("Llama_Nemotron_Post_Training_Dataset_reasoning_r1", 1.0), ("OpenThoughts3_1.2M", 1.0)],
                    ["messages"], 128,
                    {"max_length": 32768, "num_train_epochs": 5, "learning_rate": 2e-5, "max_grad_norm": 0.2,
                     "average_tokens_across_devices": True, "save_steps": 0.05, "save_total_limit": 1,
                     "dataset_num_proc": 48, "ddp_timeout": 14400}),
    "smollm3/apo": ("Preference", [("llama_3.1_tulu_3_8b_preference_mixture_no_think", 0.5),
                                   ("tulu_3_8b_pref_mix_Qwen3_32B_Qwen3_0.6B_think", 0.25)],
                    ["chosen", "rejected", "prompt", "chat_template_kwargs"], 32,
                    {"max_length": 24576, "num_train_epochs": 1, "learning_rate": 1e-6, "max_grad_norm": 0.2,
                     "beta": 0.05, "save_steps": 0.5, "save_total_limit": 1, "dataset_num_proc": 12}),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_smollm3_recipes_are_the_published_ones(name, monkeypatch):
    """Splits, weights, columns and train fields as upstream; the published global batch on 1, 2 or 8 nodes."""
    from smolalign.hardware import Hardware
    from smolalign.recipe.load import shipped_recipes
    from smolalign.target import Target

    config, splits, columns, global_batch, fields = PUBLISHED[name]
    raw = read_recipe(shipped_recipes()[name])
    sources = raw["data"]["sources"]
    assert [(s["path"], s["name"], s["split"], s["weight"]) for s in sources] == [
        ("HuggingFaceTB/smoltalk2", config, split, weight) for split, weight in splits]
    assert all(s["columns"] == columns for s in sources)
    assert raw["launch"]["global_batch_size"] == global_batch
    train = raw["train"]
    assert {key: train[key] for key in fields} == fields
    assert train["use_liger_kernel"] is True and train["gradient_checkpointing_kwargs"] == {"use_reentrant": True}
    assert train["warmup_steps"] == {"smollm3/apo": 0.1}.get(name, 0.03)  # upstream warmup_ratio
    assert "gradient_accumulation_steps" not in train  # derived from the global batch for each GPU count
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "flash_attn")

    def on_nodes(nodes: int):
        hardware = Hardware("cuda", 8, f"{nodes} node(s) x 8 GPUs", True, 8 * nodes, 16)
        return run_of(raw, raw["stage"], name, hardware=hardware, target=Target(8, "an 8-GPU node", bf16=True,
                                                                                  processes=8))

    for nodes in (1, 2, 4, 8, 16):
        world = 8 * nodes
        if world > global_batch:  # one sequence per GPU is already more than the published batch
            with pytest.raises(SmolalignError, match=f"global_batch_size {global_batch} is not a multiple"):
                on_nodes(nodes)
            continue
        settings = on_nodes(nodes).settings
        assert settings.per_device_batch * settings.accumulation * world == global_batch
        assert settings.accumulation == global_batch // world


def test_smollm3_apo_regenerate_is_apo_with_generated_think_pairs():
    from smolalign.recipe.load import shipped_recipes

    shipped = shipped_recipes()
    apo, regenerate = read_recipe(shipped["smollm3/apo"]), read_recipe(shipped["smollm3/apo_regenerate"])
    assert regenerate["train"] == apo["train"] and regenerate["launch"] == apo["launch"]
    assert regenerate["method"] == "apo_zero"
    # the released /no_think half stays; the /think half is generated instead of read
    assert [s["split"] for s in regenerate["data"]["sources"]] == ["llama_3.1_tulu_3_8b_preference_mixture_no_think"]
    pairs = regenerate["pairs"]
    assert (pairs["strong"]["source"], pairs["weak"]["source"]) == ("Qwen/Qwen3-32B", "Qwen/Qwen3-0.6B")
    assert pairs["max_prompts"] == 271409 // 4  # weight 0.25 of the Tulu-3 8B mixture's 271,409 prompts
