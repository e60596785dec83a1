"""`smolalign recipes import`: a TRL CLI YAML, an alignment-handbook recipe or an open-r1 recipe as a smolalign
recipe, with a line for every key saying where it went (or why it was dropped).

All three are flat YAMLs that a TrlParser splits into ScriptArguments, ModelConfig and a TRL config class; the
handbook adds `dataset_mixture` and `chat_template`, open-r1 adds `reward_funcs`, `system_prompt`,
`dataset_prompt_column` and reward parameters. Homes come from `upstream.RENAMED`, reward names from
`upstream.REWARD_ALIASES`; a key that has no home is refused. Reading TRL's config classes imports trl.
"""

import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from smolalign.atomic import created_mode
from smolalign.errors import SmolalignError
from smolalign.recipe.import_handbook_v0 import import_v0_mixer, import_v0_model
from smolalign.recipe.import_hub import import_hub
from smolalign.recipe.import_sections import import_data, import_model, import_rewards
from smolalign.recipe.load import _absolutize_paths
from smolalign.recipe.method_table import METHODS
from smolalign.recipe.typecheck import suggest
from smolalign.recipe.upstream import OWNED_TRAIN_KEYS, RENAMED
from smolalign.recipe.yamlio import load_yaml

FORMATS = ("trl", "handbook", "open-r1")
OPENR1_ONLY = ("reward_funcs", "dataset_prompt_column", "system_prompt", "benchmarks", "callbacks",
               "hub_model_revision", "push_to_hub_revision", "overwrite_hub_revision", "wandb_entity", "wandb_project",
               "wandb_run_group", "wandb_log_unique_prompts", "num_completions_to_print", "code_language",
               "cosine_max_len", "repetition_n_grams", "soft_punish_cache", "max_completion_len", "code_provider")
REWARD_PARAMS = ("cosine_min_value_wrong", "cosine_max_value_wrong", "cosine_min_value_correct",
                 "cosine_max_value_correct", "cosine_max_len", "repetition_n_grams", "repetition_max_penalty",
                 "code_language", "code_eval_test_batch_size", "code_eval_scoring_mode", "parallel_code_exec_per_proc",
                 "e2b_router_url", "morph_router_url", "code_provider", "ioi_provider", "max_completion_len",
                 "soft_punish_cache", "enforce_same_language")
DROPPED = {
    "overwrite_output_dir": "smolalign refuses a non-empty run directory; pass --overwrite to start over",
    "dataset_test_split": "smolalign holds out data.eval_split rows of the mixture instead of reading a test split",
    "ignore_bias_buffers": "a DDP workaround for bias buffers that smolalign's models do not need",
    "eos_token": RENAMED["eos_token"].removeprefix("nowhere: "),
    "max_prompt_length": "TRL 1.16 has no max_prompt_length; " + RENAMED["max_prompt_length"].split(": ", 1)[1],
    "dataset_num_proc": "smolalign tokenizes with its own worker count",
    "benchmarks": "open-r1's post-training benchmark jobs; use smolalign's eval: section",
    "callbacks": "open-r1's hub-revision callbacks; smolalign saves checkpoints in the run directory",
    "hub_model_revision": "open-r1's hub branch naming", "push_to_hub_revision": "open-r1's hub branch naming",
    "overwrite_hub_revision": "open-r1's hub branch naming",
    "wandb_entity": "set WANDB_ENTITY in the environment", "wandb_project": "set WANDB_PROJECT in the environment",
    "wandb_run_group": "set WANDB_RUN_GROUP in the environment",
    "wandb_log_unique_prompts": "an open-r1 logging switch", "num_completions_to_print": "an open-r1 logging switch",
    "bnb_4bit_quant_type": "smolalign's 4-bit loading is nf4 (the only value accepted here)",
    "use_bnb_nested_quant": "smolalign's 4-bit loading always nests the quantization constants",
    "dataset_streaming": "smolalign loads datasets whole (false is the only value accepted here)",
}
"""Upstream keys with nothing to carry over, and why."""
MUST_BE = {"bnb_4bit_quant_type": "nf4", "dataset_streaming": False}
TRAIN_RENAMES = {"warmup_ratio": "warmup_steps", "max_seq_length": "max_length"}
"""Trainer fields TRL or transformers renamed; the value means the same under the new name."""
@dataclasses.dataclass
class Imported:
    recipe: dict
    stage: str
    format: str
    lines: list[str]
    """One per upstream key: mapped (same name, in train:), renamed (another home), dropped (with why)."""
    files: dict[str, str]
    """Files to write next to the recipe (an inline chat template), by name."""


def detect_format(raw: dict, path: str) -> str:
    """open-r1 (its own keys), handbook (dataset_mixture of `id` entries or an inline chat_template), or trl."""
    if "model" in raw and isinstance(raw["model"], dict):
        raise SmolalignError(f"{path} is already a smolalign recipe (it has a model: section); run it as it is")
    if not isinstance(raw.get("model_name_or_path"), str):
        raise SmolalignError(f"{path}: not a TRL, alignment-handbook or open-r1 config (no model_name_or_path); "
                             "give --from trl|handbook|open-r1 if it is one")
    if "dataset_mixer" in raw:  # the handbook before its TRL-ScriptArguments rewrite
        return "handbook"
    if any(key in raw for key in OPENR1_ONLY):
        return "open-r1"
    if "dataset_mixture" in raw or "chat_template" in raw:
        return "handbook"
    return "trl"


def trl_classes() -> dict:
    """The TRL config class each upstream stage's flat fields belong to, from the method table (po: DPO, rl: GRPO)."""
    return {"sft": METHODS["sft"].config_class(), "po": METHODS["dpo"].config_class(),
            "rl": METHODS["grpo"].config_class()}


def detect_stage(raw: dict) -> str:
    """rl for reward functions or GRPO-only fields, po for beta, a DPO loss or DPO-only fields, else sft."""
    fields = {stage: {f.name for f in dataclasses.fields(cls)} for stage, cls in trl_classes().items()}
    keys = set(raw)
    if "reward_funcs" in keys or keys & (fields["rl"] - fields["po"] - fields["sft"]):
        return "rl"
    sft_loss = raw.get("loss_type") in ("nll", "dft")  # SFTConfig's own loss_type values
    if "beta" in keys or ("loss_type" in keys and not sft_loss) or keys & (fields["po"] - fields["sft"]):
        return "po"
    return "sft"


def import_config(raw: dict, path: str, fmt: str | None = None, stage: str | None = None) -> Imported:
    if not isinstance(raw, dict):
        raise SmolalignError(f"{path}: not a TRL, alignment-handbook or open-r1 config (not a mapping of keys)")
    fmt = fmt or detect_format(raw, path)
    if fmt not in FORMATS:
        raise SmolalignError(f"--from {fmt}: one of {', '.join(FORMATS)}")
    stage = stage or detect_stage(raw)
    state = _State(raw, path, fmt, stage)
    state.run()
    return Imported(state.recipe(), stage, fmt, state.lines, state.files)


class _State:
    def __init__(self, raw: dict, path: str, fmt: str, stage: str):
        self.raw, self.path, self.fmt, self.stage = raw, path, fmt, stage
        self.model: dict = {}
        self.template: dict = {"name": "model"}
        self.data: dict = {}
        self.sources: list[dict] = []
        self.peft: dict | None = None
        self.train: dict = {}
        self.extra: dict = {}
        self.lines: list[str] = []
        self.files: dict[str, str] = {}
        self.done: set[str] = set()

    def fail(self, key: str, why: str) -> None:
        raise SmolalignError(f"{self.path}: {key}: {why}")

    def renamed(self, key: str, home: str) -> None:
        self.lines.append(f"renamed  {key} -> {home}")
        self.done.add(key)

    def dropped(self, key: str, why: str) -> None:
        self.lines.append(f"dropped  {key}: {why}")
        self.done.add(key)

    def run(self) -> None:
        import_model(self)
        import_v0_model(self)
        if "dataset_mixer" in self.raw:
            import_v0_mixer(self)
        import_data(self)
        import_hub(self)
        if self.stage == "rl":
            import_rewards(self)
        if self.stage == "po":
            self.method()
        self.rest()

    def is_orpo(self) -> bool:
        """ORPO configs carry no loss_type (the handbook picks the trainer by script, run_orpo.py): a field only
        ORPOConfig has, or `orpo` in the file's path (the handbook keeps them in `orpo/` folders)."""
        orpo_only = {"generate_during_eval", "is_encoder_decoder", "padding_value"}
        return self.stage == "po" and "loss_type" not in self.raw and (
            bool(orpo_only & set(self.raw)) or "orpo" in Path(self.path).as_posix().lower())

    def method(self) -> None:
        if self.is_orpo():
            self.extra["method"] = "orpo"
            self.lines.append("method: orpo (an ORPO config: no loss_type, and its path or fields name ORPO)")
            return
        loss = self.raw.get("loss_type", "sigmoid")
        weights = self.raw.get("loss_weights")
        if isinstance(loss, list) and weights:
            method: Any = dict(zip(loss, weights, strict=False))
        else:
            method = ("dpo" if loss == "sigmoid" else loss) if isinstance(loss, str) else list(loss)
        self.extra["method"] = method
        for key in ("loss_type", "loss_weights"):
            if key in self.raw:
                self.renamed(key, f"method: {method}")
        if self.raw.get("precompute_ref_log_probs"):
            self.extra["reference"] = "precomputed"
            self.renamed("precompute_ref_log_probs", "reference: precomputed")

    def rest(self) -> None:
        """Every key not placed yet: a field of the stage's TRL config goes to train:, a dropped key says why,
        anything else is refused."""
        cls = trl_classes()[self.stage]
        if self.extra.get("method") == "orpo":
            cls = METHODS["orpo"].config_class()
        fields = {f.name for f in dataclasses.fields(cls) if f.init}

        for key, value in self.raw.items():
            if key in self.done:
                continue
            if key in MUST_BE and value != MUST_BE[key]:
                self.fail(key, f"{value!r} cannot be carried over ({DROPPED[key]})")
            if key in TRAIN_RENAMES and TRAIN_RENAMES[key] in fields:
                self.train[TRAIN_RENAMES[key]] = value
                self.renamed(key, f"train.{TRAIN_RENAMES[key]}")
            elif key in DROPPED:
                self.dropped(key, DROPPED[key])
            elif key in REWARD_PARAMS:
                self.dropped(key, "a parameter of a reward this config does not list")
            elif key in fields and key not in OWNED_TRAIN_KEYS:
                self.train[key] = value
                self.lines.append(f"mapped   {key} -> train.{key}")
            elif key in RENAMED:
                self.fail(key, f"{self.stage} has no place for it here ({RENAMED[key]})")
            else:
                self.fail(key, f"not a {self.fmt} key smolalign knows: {cls.__name__}, ModelConfig and "
                               f"ScriptArguments have no such field{suggest(str(key), [*fields, *RENAMED])}")

    def recipe(self) -> dict:
        out: dict = {"stage": self.stage}
        if self.stage == "rl":
            out["method"] = "grpo"
        out["model"] = self.model
        out["template"] = self.template
        out["data"] = {"sources": self.sources, **self.data}
        if self.peft is not None:
            out["peft"] = self.peft
        out.update(self.extra)
        out["train"] = self.train
        return out


def translate_file(file: Path, fmt: str | None, out: Path | None, stage: str | None) -> tuple[Imported, dict]:
    """Read and translate `file`: (the import, its recipe as a mapping that validation reads where OUT will be,
    its template file and relative paths made absolute)."""
    raw = load_yaml(file.read_text(), source=str(file))
    imported = import_config(raw, str(file), fmt, stage)
    folder = (out.parent if out else Path.cwd()).resolve()
    mapping = load_yaml(_dump(imported.recipe))
    for name in imported.files:  # validation reads the template file where the recipe will find it
        mapping["template"]["name"] = str(folder / name)
    _absolutize_paths(mapping, folder)
    return imported, mapping


def write_import(file: Path, imported: Imported, out: Path | None) -> None:
    """Write OUT (and an inline template next to it) atomically, or print the recipe; with where every key went."""
    folder = (out.parent if out else Path.cwd()).resolve()
    header = (f"# Imported from {file.name} ({imported.format} format) by `smolalign recipes import`.\n"
              f"# Run: smolalign {imported.stage} {out.name if out else 'RECIPE.yaml'} --dry-run\n")
    text = header + _dump(imported.recipe)
    report = "\n".join(imported.lines)
    if out is None:
        print(report, file=sys.stderr)
        print(text, end="")
        for name, body in imported.files.items():
            print(f"# {name} (written next to the recipe with -o):\n# " + body.replace("\n", "\n# "), file=sys.stderr)
        return
    written = {out: text, **{folder / name: body for name, body in imported.files.items()}}
    _write_all(written)
    print(report)
    print(f"wrote {out}" + "".join(f" and {folder / name}" for name in imported.files))


def _dump(recipe: dict) -> str:
    """YAML with multi-line strings (system prompts, template tags) double-quoted on one line, as upstream writes
    them, instead of PyYAML's folded blank lines."""
    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper, value: str):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if "\n" in value else None)

    Dumper.add_representer(str, text)
    return yaml.dump(recipe, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=10**6)


def _write_all(files: dict[Path, str]) -> None:
    """Each file through a temporary file in its folder and a rename, so none is left half-written."""
    staged = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(handle, "w") as stream:
                stream.write(text)
            os.chmod(temporary, created_mode())
            staged.append((temporary, path))
        for temporary, path in staged:
            os.replace(temporary, path)
    except OSError as exc:  # a folder where the file goes, a file where a folder should be, no permission
        raise SmolalignError(f"{exc.filename or path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        for temporary, _ in staged:
            if os.path.exists(temporary):
                os.unlink(temporary)
