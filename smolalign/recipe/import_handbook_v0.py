"""`recipes import` for alignment-handbook recipes written before its move to TRL's ScriptArguments (the
`dataset_mixer` era: zephyr, the ORPO recipes): their data and model keys, read the way the handbook's
`get_datasets` and `ModelArguments` read them.

The handbook of that era took, for every dataset of `dataset_mixer`, each split of `dataset_splits`: splits named
`train*` joined the training set with the dataset's fraction applied, splits named `test*` the evaluation set in
full. `dataset_configs`, when given, names one dataset config per mixer entry, in order.
"""

from smolalign.recipe.import_sections import local_or_hub

V0_MODEL_DROPPED = {
    "base_model_revision": "the revision of a PEFT adapter's base model; smolalign reads the adapter's own config",
    "model_code_revision": "a branch of the model's remote code; pin model.revision instead",
    "preprocessing_num_workers": "smolalign tokenizes with its own worker count",
    "auto_insert_empty_system_msg": "smolalign renders the messages of each row as they are (the template decides "
                                    "about an empty system turn)",
}
TRUNCATION_MODES = {"left": "keep_end", "right": "keep_start"}
"""The tokenizer's truncation side -> TRL's DPO truncation_mode that keeps the same tokens."""


def import_v0_model(state) -> None:
    raw = state.raw
    if "use_flash_attention_2" in raw:
        if raw["use_flash_attention_2"]:
            state.model["attn_implementation"] = "flash_attention_2"
            state.renamed("use_flash_attention_2", "model.attn_implementation: flash_attention_2")
        else:
            state.dropped("use_flash_attention_2", "false: the model's default attention")
    if raw.get("tokenizer_name_or_path") is not None:
        state.model["tokenizer"] = local_or_hub(raw["tokenizer_name_or_path"])
        state.renamed("tokenizer_name_or_path", "model.tokenizer")
    for key, why in V0_MODEL_DROPPED.items():
        if key in raw:
            state.dropped(key, why)


def import_v0_mixer(state) -> None:
    raw = state.raw
    mixer = raw.get("dataset_mixer")
    if not isinstance(mixer, dict) or not mixer:
        state.fail("dataset_mixer", "expected a mapping of dataset id -> fraction kept, e.g. {org/name: 1.0}")
    splits = raw.get("dataset_splits", ["train", "test"])
    if isinstance(splits, str):
        splits = [splits]
    train_splits = [s for s in splits if "train" in str(s)]
    if not train_splits:
        state.fail("dataset_splits", f"{splits}: no split named train*, so the handbook would train on nothing")
    configs = raw.get("dataset_configs")
    if configs is not None and len(configs) != len(mixer):
        state.fail("dataset_configs", f"{len(configs)} configs for {len(mixer)} datasets in dataset_mixer")
    for index, (dataset, fraction) in enumerate(mixer.items()):
        if not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            state.fail(f"dataset_mixer.{dataset}", f"{fraction!r}: the fraction of the dataset kept, in (0, 1]")
        for split in train_splits:
            source = {"path": local_or_hub(dataset), "split": split}
            if configs is not None:
                source["name"] = configs[index]
            if fraction != 1:
                source["weight"] = fraction  # the share of the split kept, in both
            state.sources.append(source)
    state.renamed("dataset_mixer", f"data.sources ({len(state.sources)}: each dataset's {', '.join(train_splits)} "
                                   "split with its fraction as weight)")
    if "dataset_splits" in raw:
        held_out = [s for s in splits if s not in train_splits]
        state.renamed("dataset_splits", "data.sources[].split" + (
            f" ({', '.join(map(str, held_out))} not read: smolalign holds out data.eval_split rows instead)"
            if held_out else ""))
    if configs is not None:
        state.renamed("dataset_configs", "data.sources[].name")
    side = raw.get("truncation_side")
    if "truncation_side" in raw:
        if side is not None and state.stage == "po" and side in TRUNCATION_MODES:
            state.train["truncation_mode"] = TRUNCATION_MODES[side]
            state.renamed("truncation_side", f"train.truncation_mode: {TRUNCATION_MODES[side]}")
        else:
            state.dropped("truncation_side", "smolalign truncates as TRL 1.16 does for the stage (train.max_length)")
