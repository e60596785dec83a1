"""The `method:` and `reference:` keys: for `po`, which TRL trainer, which loss terms, which reference (a reward
model, `method: reward`, has none); for `rl`, GRPO or online DPO from rewards, or distillation from a teacher (with
the `rewards:`, `generation:` and `teacher:` sections that go with each). What each method is, once parsed, is the
method table's (`recipe.method_table`).

A `po` `method:` is a name (`apo_zero`, `dpo`, `kto`, `orpo`, `reward`), a list of DPO loss terms summed with equal weights
(`[sigmoid, sft]`), or a mapping of terms to weights (`{sigmoid: 1.0, sft: 0.5}`).
"""

from typing import Any

from smolalign.errors import SmolalignError
from smolalign.recipe.generation_schema import GenerationSection, RewardSection
from smolalign.recipe.method_table import METHODS, method_spec
from smolalign.recipe.schema import Method, ReferenceSection, TeacherSection
from smolalign.recipe.typecheck import build, suggest

DPO_LOSSES = ("sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot",
              "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm")
"""DPOConfig.loss_type values in TRL 1.16."""
ALIASES = {"dpo": "sigmoid"}
KTO_LOSSES = ("kto", "apo_zero_unpaired")
"""KTOConfig.loss_type values: KTO proper, and APO-zero on unpaired data."""
REFERENCE_FREE = tuple(name for name, spec in METHODS.items() if spec.reference_free)
"""po methods that train no policy against a reference; each runs on its own trainer, with no loss terms."""
PO_METHODS = (*ALIASES, *DPO_LOSSES, *KTO_LOSSES, *REFERENCE_FREE)
RL_METHODS = tuple(name for name, spec in METHODS.items() if spec.stage == "rl")

def parse_method(value: Any) -> Method:
    if value is None:
        raise SmolalignError(f"method is required for smolalign po: one of {', '.join(PO_METHODS)}, a list of DPO loss "
                             "terms, or a mapping of terms to weights")
    if isinstance(value, str):
        name = value.strip()
        if name in REFERENCE_FREE:
            return Method(name, name)
        if name in KTO_LOSSES:
            return Method(name, "kto", (name,))
        return Method(name, "dpo", (_dpo_loss(name),))
    if isinstance(value, list):
        if not value or not all(isinstance(v, str) for v in value):
            raise SmolalignError(f"method: a list must name DPO loss terms, got {value!r}")
        return Method("+".join(value), "dpo", tuple(_dpo_loss(v) for v in value))
    if isinstance(value, dict):
        if not value:
            raise SmolalignError("method: the mapping of loss terms to weights is empty")
        weights = []
        for term, weight in value.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise SmolalignError(f"method.{term} must be a number (the term's weight), got {weight!r}")
            weights.append(float(weight))
        return Method("+".join(value), "dpo", tuple(_dpo_loss(str(t)) for t in value), tuple(weights))
    raise SmolalignError(f"method must be a name, a list or a mapping, got {value!r}")


def _dpo_loss(name: str) -> str:
    name = ALIASES.get(name, name)
    if name in DPO_LOSSES:
        return name
    if name in (*KTO_LOSSES, *REFERENCE_FREE):
        raise SmolalignError(f"method: {name} runs on its own trainer and cannot be combined with DPO loss terms")
    raise SmolalignError(f"unknown method {name!r}{suggest(name, PO_METHODS)}; one of {', '.join(PO_METHODS)}")


def parse_reference(value: Any, method: Method, has_peft: bool) -> ReferenceSection:
    """`reference:` is policy (default), adapter (default with peft:), precomputed, or {source: MODEL}."""
    reference_free = method_spec("po", method).reference_free
    if reference_free:
        if value not in (None, "none"):
            raise SmolalignError(f"reference: {reference_free}; remove the reference key")
        return ReferenceSection("none")
    if value is None:
        return ReferenceSection("adapter" if has_peft else "policy")
    if isinstance(value, dict):
        if set(value) != {"source"} or not isinstance(value["source"], str):
            raise SmolalignError(f"reference must be policy, adapter, precomputed or {{source: MODEL}}, got {value!r}")
        return ReferenceSection("source", value["source"])
    if value in ("policy", "precomputed"):
        return ReferenceSection(value)
    if value == "adapter":
        if not has_peft:
            raise SmolalignError("reference: adapter needs a peft: section (the reference is the base with the "
                                 "adapter disabled)")
        return ReferenceSection("adapter")
    raise SmolalignError(f"reference must be policy, adapter, precomputed or {{source: MODEL}}, got {value!r}"
                         f"{suggest(str(value), ('policy', 'adapter', 'precomputed'))}")


def parse_rl_sections(raw: dict):
    """(method, rewards, generation, teacher) of an rl recipe (the rewards' sections; `smolalign.resolve` builds
    them)."""
    name = raw.get("method", "grpo")
    if name not in RL_METHODS:
        raise SmolalignError(f"method: {name!r} is not an rl method{suggest(str(name), RL_METHODS)}; one of "
                             f"{', '.join(RL_METHODS)}")
    generation = build(GenerationSection, raw.get("generation"), "generation")
    if METHODS[name].distills:
        if raw.get("rewards"):
            raise SmolalignError(f"rewards: method {name} learns from a teacher, not from rewards; remove rewards: "
                                 "(or use method: grpo or online_dpo)")
        if not raw.get("teacher"):
            raise SmolalignError(f"teacher is required for method {name} (teacher.source: a model source)")
        return Method(name, name), (), generation, build(TeacherSection, raw["teacher"], "teacher")
    if raw.get("teacher"):
        raise SmolalignError(f"teacher: method {name} learns from rewards; use method: distill, gold or auto")
    listed = raw.get("rewards")
    if not isinstance(listed, list) or not listed:
        raise SmolalignError("rewards: an rl recipe needs a list of rewards, e.g. [{name: math_accuracy}]")
    rewards = tuple(build(RewardSection, item, f"rewards.{i}") for i, item in enumerate(listed))
    return Method(name, name), rewards, generation, None
