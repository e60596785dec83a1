"""The sections `recipes import` builds from upstream keys: model (+ peft), data (+ template), rewards (+ generation).

Each function reads the importer's state (`importer._State`: the raw keys, the stage, the format) and records every
key it takes with `renamed` or `dropped`.
"""

from pathlib import Path

from rewards.upstream import OPENR1_TAGS, REWARD_ALIASES, REWARDS_REFUSED
from smolalign.recipe.generation_schema import unread_vllm_keys
from smolalign.recipe.upstream import RENAMED

ACCELERATE_PRESETS = {"multi_gpu": "ddp", "zero2": "zero2", "zero3": "zero3", "fsdp2": "fsdp2"}
"""TRL/handbook accelerate config names -> smolalign launch presets."""


def local_or_hub(spec: str) -> str:
    """A path that exists from here, made absolute (the recipe may be written elsewhere); anything else as is."""
    candidate = Path(spec).expanduser()
    return str(candidate.resolve()) if candidate.exists() else spec


PEFT_KEYS = {"lora_r": "r", "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout",
             "lora_target_modules": "target_modules", "lora_target_parameters": "target_parameters",
             "lora_modules_to_save": "modules_to_save", "lora_task_type": "task_type", "use_rslora": "use_rslora",
             "use_dora": "use_dora"}
MODEL_KEYS = {"model_name_or_path": "source", "model_revision": "revision", "torch_dtype": "dtype", "dtype": "dtype",
              "attn_implementation": "attn_implementation", "trust_remote_code": "trust_remote_code"}


def import_model(state) -> None:
    raw = state.raw
    for key, field in MODEL_KEYS.items():
        if key in raw and raw[key] is not None:
            state.model[field] = local_or_hub(raw[key]) if field == "source" else raw[key]
            state.renamed(key, f"model.{field}")
    for bits in ("4", "8"):
        key = f"load_in_{bits}bit"
        if key in raw:
            if raw[key]:
                state.model["quantization"] = f"{bits}bit"
                state.renamed(key, RENAMED[key])
            else:
                state.dropped(key, "false is smolalign's default (no quantization)")
    lora = [k for k in PEFT_KEYS if k in raw]
    if raw.get("use_peft"):
        from trl import ModelConfig

        # TRL's get_peft_config passes ModelConfig's defaults (r 16, alpha 32, dropout 0.05), not LoraConfig's.
        defaults = ModelConfig()
        state.peft = {"r": defaults.lora_r, "lora_alpha": defaults.lora_alpha, "lora_dropout": defaults.lora_dropout}
        state.renamed("use_peft", "peft: (r, lora_alpha and lora_dropout default to TRL ModelConfig's)")
        for key in lora:
            state.peft[PEFT_KEYS[key]] = raw[key]
            state.renamed(key, f"peft.{PEFT_KEYS[key]}")
    else:
        if "use_peft" in raw:
            state.dropped("use_peft", "false: full fine-tuning, smolalign's default without a peft: section")
        for key in lora:
            state.dropped(key, "use_peft is not true, so TRL ignores it")
    if "num_processes" in raw:
        state.extra.setdefault("launch", {})["num_processes"] = raw["num_processes"]
        state.renamed("num_processes", "launch.num_processes")
    if "accelerate_config" in raw:
        preset = ACCELERATE_PRESETS.get(raw["accelerate_config"])
        if preset is None:
            state.fail("accelerate_config", f"{raw['accelerate_config']!r} has no smolalign preset (presets: ddp, "
                                            "zero2, zero3, zero3_offload, fsdp2, or an accelerate config file)")
        state.extra.setdefault("launch", {})["preset"] = preset
        state.renamed("accelerate_config", f"launch.preset: {preset}")
    if "env" in raw:
        state.fail("env", "smolalign does not export variables from a recipe; set them in your shell or launcher")


def import_data(state) -> None:
    raw = state.raw
    if "dataset_mixture" in raw:
        _handbook_mixture(state, raw["dataset_mixture"])
    if "datasets" in raw:
        _trl_mixture(state, raw["datasets"])
    if "dataset_name" in raw and raw["dataset_name"] is not None:
        if state.sources:
            state.dropped("dataset_name", "the dataset mixture is used instead, as TRL and the handbook do")
        else:
            source = {"path": local_or_hub(raw["dataset_name"])}
            state.renamed("dataset_name", "data.sources[0].path")
            if raw.get("dataset_config") is not None:
                source["name"] = raw["dataset_config"]
                state.renamed("dataset_config", "data.sources[0].name")
            if "dataset_train_split" in raw:
                source["split"] = raw["dataset_train_split"]
                state.renamed("dataset_train_split", "data.sources[0].split")
            state.sources.append(source)
    for key in ("dataset_config", "dataset_train_split"):
        if key in raw and key not in state.done:
            state.dropped(key, "no dataset_name to apply it to")
    if not state.sources:
        state.fail("dataset_name", "the config names no dataset (dataset_name, dataset_mixture or datasets)")
    if "test_split_size" in raw:
        state.data["eval_split"] = raw["test_split_size"]
        state.renamed("test_split_size", "data.eval_split")
    for key in ("dataset_text_field", "text_column"):  # TRL's name, and the dataset_mixer-era handbook's
        if key in raw:
            column = raw[key]
            if column != "text":
                for source in state.sources:
                    source["columns"] = {column: "text"}
            state.renamed(key, f"data.sources[].columns: {{{column}: text}}")
    _system_prompt(state)
    _chat_template(state)


def _handbook_mixture(state, mixture) -> None:
    if not isinstance(mixture, dict) or not isinstance(mixture.get("datasets"), list):
        state.fail("dataset_mixture", "expected {datasets: [{id, config, split, columns, weight}], seed, "
                                      "test_split_size}")
    for index, entry in enumerate(mixture["datasets"]):
        unknown = set(entry) - {"id", "config", "split", "columns", "weight"}
        if unknown:
            state.fail(f"dataset_mixture.datasets.{index}.{sorted(unknown)[0]}", "not a handbook mixture key "
                       "(id, config, split, columns, weight)")
        source = {"path": local_or_hub(entry["id"])}
        if entry.get("config") is not None:
            source["name"] = entry["config"]
        source["split"] = entry.get("split", "train")
        if entry.get("columns") is not None:
            source["columns"] = list(entry["columns"])
        if entry.get("weight") is not None:
            source["weight"] = entry["weight"]  # the share of the split kept, in both
        state.sources.append(source)
    for key in set(mixture) - {"datasets", "seed", "test_split_size"}:
        state.fail(f"dataset_mixture.{key}", "not a handbook mixture key (datasets, seed, test_split_size)")
    if "seed" in mixture:
        state.data["seed"] = mixture["seed"]
    if mixture.get("test_split_size") is not None:
        state.data["eval_split"] = mixture["test_split_size"]
    state.renamed("dataset_mixture", f"data.sources ({len(mixture['datasets'])}), data.seed, data.eval_split")


def _trl_mixture(state, entries) -> None:
    if not isinstance(entries, list):
        state.fail("datasets", "expected a list of {path, name, data_files, split, columns}")
    for index, entry in enumerate(entries):
        where = f"datasets.{index}"
        if entry.get("fraction") is not None:
            state.fail(f"{where}.fraction", "TRL's fraction is a share of the final mixture that depends on every "
                       "dataset's size; give each source a weight (the share of it kept) in the smolalign recipe")
        if entry.get("data_dir") is not None:
            state.fail(f"{where}.data_dir", "point data_files (or path) at the files instead")
        files = entry.get("data_files")
        paths = [files] if isinstance(files, str) else list(files or [])
        if not paths:
            paths = [entry["path"]]
        elif entry.get("path") not in ("json", "parquet"):
            state.fail(f"{where}.path", f"{entry.get('path')!r} with data_files: smolalign reads .jsonl, .json and "
                                        ".parquet files")
        for path in paths:
            source = {"path": local_or_hub(path), "split": entry.get("split", "train")}
            if entry.get("name") is not None:
                source["name"] = entry["name"]
            if entry.get("columns") is not None:
                source["columns"] = list(entry["columns"])
            state.sources.append(source)
    state.renamed("datasets", f"data.sources ({len(state.sources)})")
    if state.raw.get("streaming"):
        state.fail("streaming", "smolalign loads datasets whole")
    if "streaming" in state.raw:
        state.dropped("streaming", "false is how smolalign loads datasets")


def _system_prompt(state) -> None:
    text = state.raw.get("system_prompt")
    if "system_prompt" not in state.raw:
        return
    if text is None:
        state.dropped("system_prompt", "null")
    elif state.fmt == "open-r1" and state.stage != "rl":
        state.dropped("system_prompt", "open-r1's SFT uses it only when benchmarking, not in training rows")
    else:
        state.data["system_prompt"] = text
        state.renamed("system_prompt", "data.system_prompt (a system message first in every prompt)")


def _chat_template(state) -> None:
    for key in ("chat_template", "chat_template_path"):
        value = state.raw.get(key)
        if value is None:
            if key in state.raw:
                state.dropped(key, "null: the tokenizer's own template, as upstream")
            continue
        if key == "chat_template_path" or str(value).endswith(".jinja"):
            state.template = {"name": local_or_hub(value)}
            state.renamed(key, "template.name")
        else:
            name = f"{Path(state.path).stem}.chat_template.jinja"
            state.files[name] = value
            state.template = {"name": name}
            state.renamed(key, f"template.name: {name} (written next to the recipe)")
    if state.template == {"name": "model"}:
        state.lines.append("template.name: model (no chat_template: the tokenizer's own, as upstream)")


def import_rewards(state) -> None:
    raw = state.raw
    names = raw.get("reward_funcs")
    if names is None:
        names = ["accuracy", "format", "tag_count"] if state.fmt == "open-r1" else []
    if not names:
        state.fail("reward_funcs", "a GRPO config without reward functions (a reward model alone is not supported)")
    weights = raw.get("reward_weights") or [1.0] * len(names)
    if len(weights) != len(names):
        state.fail("reward_weights", f"{len(weights)} weights for {len(names)} reward functions")
    rewards = [_reward(state, name, weight) for name, weight in zip(names, weights, strict=True)]
    prompt = raw.get("dataset_prompt_column", "prompt")
    if prompt != "prompt":
        wanted = ["solution" for r in rewards if r["name"] in ("math_accuracy",)]
        wanted += [r.get("params", {}).get("test_column", "test_cases") for r in rewards if r["name"] == "code"]
        wanted += ["language" for r in rewards if r["name"] == "answer_format" and r.get("params")]
        for source in state.sources:
            listed = source.get("columns") or [prompt, *dict.fromkeys(wanted)]
            source["columns"] = {c: ("prompt" if c == prompt else c) for c in listed}
        state.renamed("dataset_prompt_column", f"data.sources[].columns: {{{prompt}: prompt}} (plus the columns "
                                               "the rewards read)")
    elif "dataset_prompt_column" in raw:
        state.dropped("dataset_prompt_column", "prompt is smolalign's prompt column already")
    state.extra["rewards"] = rewards
    if "reward_funcs" in raw:
        state.renamed("reward_funcs", "rewards[].name: " + ", ".join(r["name"] for r in rewards))
    if "reward_weights" in raw:
        state.renamed("reward_weights", "rewards[].weight")
    # open-r1 ran TRL 0.18, whose vllm_mode default was server; TRL 1.16's is colocate.
    if raw.get("use_vllm"):
        mode = raw.get("vllm_mode", "server" if state.fmt == "open-r1" else "colocate")
        backend = "vllm_colocate" if mode == "colocate" else "vllm_server"
        state.extra["generation"] = {"backend": backend}
        state.renamed("use_vllm", f"generation.backend: {backend}")
    elif "use_vllm" in raw:
        state.extra["generation"] = {"backend": "transformers"}
        state.renamed("use_vllm", "generation.backend: transformers")
    if "vllm_mode" in raw:
        state.renamed("vllm_mode", "generation.backend")
    backend = state.extra.get("generation", {}).get("backend", "transformers")
    for key, why in unread_vllm_keys(backend, {k: v for k, v in raw.items() if k not in state.done}).items():
        state.dropped(key, why)


def _reward(state, name: str, weight: float) -> dict:
    raw = state.raw
    if name in REWARDS_REFUSED:
        state.fail(f"reward_funcs: {name}", REWARDS_REFUSED[name])
    if name not in REWARD_ALIASES:
        module, _, function = name.rpartition(".")
        path = Path(module.replace(".", "/") + ".py")
        if module and path.is_file():
            return {"name": f"{path.resolve()}:{function}", "weight": weight}
        state.fail(f"reward_funcs: {name}", f"not an open-r1 or TRL reward name (known: "
                   f"{', '.join([*REWARD_ALIASES, *REWARDS_REFUSED])}) nor an importable module.function here")
    ours = REWARD_ALIASES[name]
    params: dict = {}
    used: list[str] = []
    if name == "tag_count":
        params = {"tags": OPENR1_TAGS}
    elif name == "code" and state.fmt == "open-r1":
        params = {"test_column": "verification_info"}  # open-r1's code datasets keep their tests there
    elif name == "code_format":
        params = {"language": raw.get("code_language", "python")}
        used = ["code_language"]
    elif name == "repetition_penalty":
        params = {"ngram_size": raw.get("repetition_n_grams", 3), "max_penalty": raw.get("repetition_max_penalty", -1.0)}
        used = ["repetition_n_grams", "repetition_max_penalty"]
    elif name == "soft_overlong_punishment":
        params = {"max_length": raw.get("max_completion_len", 16384), "cache": raw.get("soft_punish_cache", 4096)}
        used = ["max_completion_len", "soft_punish_cache"]
    elif name == "get_soft_overlong_punishment":
        params = {"max_length": 1280, "cache": 256}  # fixed in trl/scripts/grpo.py's registry
    for key in used:
        if key in raw:
            state.renamed(key, f"rewards[{ours}].params")
    return {"name": ours, "weight": weight, **({"params": params} if params else {})}
