"""From a merged recipe mapping to a typed `Recipe`: every section parsed and type-checked against smolalign's own
schema, and keys that contradict each other refused with both named. Parsing imports neither TRL nor peft and builds
nothing: `smolalign.resolve` checks `train:` against the method's TRL config and `peft:` against peft's, builds the
rewards and looks at the machine, a model or a generated file, once, when it turns the `Recipe` into a `Run`.
"""

from typing import Any

from smolalign.errors import SmolalignError
from smolalign.recipe.data_schema import DataSection
from smolalign.recipe.eval_schema import EvalSection
from smolalign.recipe.generation_schema import check_generation_keys
from smolalign.recipe.load import apply_overrides, read_recipe, recipe_path
from smolalign.recipe.method_keys import parse_method, parse_reference, parse_rl_sections
from smolalign.recipe.method_table import method_spec
from smolalign.recipe.schema import (
    STAGES,
    HubSection,
    LaunchSection,
    ModelSection,
    PairsSection,
    Recipe,
    ReferenceSection,
    TemplateSection,
    ToolsSection,
)
from smolalign.recipe.train_section import normalize_train
from smolalign.recipe.typecheck import build, reject_unknown, suggest

SECTIONS = ("description", "stage", "model", "template", "data", "peft", "train", "launch", "eval", "hub")
STAGE_SECTIONS = {"po": ("method", "reference", "pairs"),
                  "rl": ("method", "rewards", "generation", "teacher", "tools")}


def parse_recipe(raw: dict, stage: str, source: str) -> Recipe:
    """Check every section of a merged recipe for `stage` and build the typed `Recipe`."""
    if stage not in STAGES:
        raise SmolalignError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    # The recipe's own stage first: another verb's sections (method:, rewards:, pairs:) would read as unknown keys
    declared = raw.get("stage")
    if declared is not None and declared not in STAGES:
        raise SmolalignError(f"stage: unknown stage {declared!r}{suggest(str(declared), STAGES)}; one of "
                             f"{', '.join(STAGES)}")
    if declared is not None and declared != stage:
        raise SmolalignError(f"this recipe is for `smolalign {declared}`, not `smolalign {stage}`")
    reject_unknown(raw, (*SECTIONS, *STAGE_SECTIONS.get(stage, ())), "")
    if "model" not in raw:
        raise SmolalignError("model is required (model.source: a directory, hub id, .gguf file or bundled name)")
    pairs = _pairs_section(raw)
    if "data" not in raw and pairs is None:
        raise SmolalignError("data is required (data.sources: a list of datasets)")
    model = build(ModelSection, raw["model"], "model")
    template = build(TemplateSection, raw.get("template"), "template")
    data = _data_section(raw.get("data"), pairs)
    peft = _section(raw, "peft")
    method = reference = generation = teacher = tools = None
    rewards: tuple = ()
    if stage == "rl":
        method, rewards, generation, teacher = parse_rl_sections(raw)
        tools = tools_section(raw.get("tools"), method)
        if method_spec(stage, method).policy_reference:  # made by TRL: the policy's frozen copy, or its adapter off
            reference = ReferenceSection("adapter" if peft is not None else "policy")
    if stage == "po":
        method = parse_method(raw.get("method"))
        reference = parse_reference(raw.get("reference"), method, peft is not None)
    train = normalize_train(_section(raw, "train") or {}, method_spec(stage, method))
    if stage == "rl":
        check_generation_keys(generation, train)
    if stage == "po" and train.get("sync_ref_model"):  # TRL refuses these when the trainer is built, after loading
        if reference is not None and reference.kind == "precomputed":
            raise SmolalignError("train.sync_ref_model updates the reference while training, and reference: "
                                 "precomputed computes its log-probs once, before: keep one of them")
        if peft is not None:
            raise SmolalignError("train.sync_ref_model needs a reference model of its own to update, and with peft: "
                                 "the reference is the adapter switched off: remove one of them")
    launch = build(LaunchSection, raw["launch"], "launch") if raw.get("launch") is not None else None
    if model.quantization and peft is None:
        raise SmolalignError("model.quantization needs a peft: section (QLoRA trains adapters on a quantized base)")
    evaluation = eval_section(raw.get("eval"))
    hub = build(HubSection, raw["hub"], "hub") if raw.get("hub") is not None else None
    return Recipe(stage=stage, model=model, template=template, data=data, peft=peft, train=train, raw=raw,
                  source=source, description=str(raw.get("description") or ""), method=method,
                  reference=reference, pairs=pairs, rewards=rewards, generation=generation, teacher=teacher,
                  tools=tools, launch=launch, hub=hub, evaluation=evaluation)


def tools_section(mapping: Any, method) -> ToolsSection | None:
    """`tools:` for GRPO, the one rl method whose TRL trainer runs a tool loop (TRL 1.16's OnlineDPOTrainer and the
    distillation trainers take no environment; online DPO no tools at all)."""
    if mapping is None:
        return None
    if method.trainer != "grpo":
        raise SmolalignError(f"tools: method {method.name} generates without tools (TRL's trainer for it runs no tool "
                             "loop); use method: grpo, or remove tools:")
    return build(ToolsSection, mapping, "tools")


def eval_section(mapping: Any) -> EvalSection | None:
    """The `eval:` section (its rewards are built when the recipe is resolved)."""
    if mapping is None:
        return None
    return build(EvalSection, mapping, "eval")


def _pairs_section(raw: dict) -> PairsSection | None:
    """`pairs:`; a graded sampler without a source samples the policy (model.source). The scorer's and the verifier's
    rewards are built when the recipe is resolved."""
    mapping = raw.get("pairs")
    if mapping is None:
        return None
    graded = mapping.get("graded") if isinstance(mapping, dict) else None
    model = raw.get("model")
    if isinstance(graded, dict) and isinstance(model, dict):
        sampler = graded.get("sampler") or {}
        if isinstance(sampler, dict) and "source" not in sampler:
            mapping = {**mapping, "graded": {**graded, "sampler": {"source": model.get("source"), **sampler}}}
    pairs = build(PairsSection, mapping, "pairs")
    if pairs.graded is not None:
        if pairs.graded.sampler is None:
            raise SmolalignError("pairs.graded.sampler.source is required (no model.source to default to)")
        if pairs.graded.sampler.temperature == 0:
            raise SmolalignError(f"pairs.graded.sampler.temperature: 0 (greedy) writes {pairs.graded.n} identical "
                                 "answers per prompt; sample with a temperature > 0, e.g. 0.8")
    return pairs


def _data_section(mapping: Any, pairs: PairsSection | None) -> DataSection | None:
    """`data:`; with `pairs:` it may be left out, or list no sources: the generated pairs are the run's data
    (`smolalign.resolve.data_plan` adds their file)."""
    if pairs is None:
        data = build(DataSection, mapping, "data")
        if not data.sources:
            raise SmolalignError("data: sources must list at least one dataset")
        return data
    if mapping is None:
        return None
    if not isinstance(mapping, dict):
        raise SmolalignError(f"data must be a mapping, got {mapping!r}")
    return build(DataSection, {"sources": [], **mapping}, "data")


def _section(raw: dict, name: str) -> dict[str, Any] | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SmolalignError(f"{name} must be a mapping, got {value!r}")
    return value


def recipe_stage(name_or_path: str, overrides: list[str]) -> str:
    """The stage a recipe is for: its `stage:` key, else po when it names a method or pairs, else sft."""
    raw = apply_overrides(read_recipe(recipe_path(name_or_path)), overrides)
    declared = raw.get("stage")
    if declared:
        return str(declared)
    if "rewards" in raw or "generation" in raw or "teacher" in raw or "tools" in raw:
        return "rl"
    return "po" if "method" in raw or "pairs" in raw else "sft"


def load_recipe(name_or_path: str, overrides: list[str], stage: str) -> Recipe:
    """Read a recipe (name or path), apply `--set` overrides and parse it for `stage`."""
    path = recipe_path(name_or_path)
    raw = apply_overrides(read_recipe(path), overrides)
    return parse_recipe(raw, stage, str(path))
