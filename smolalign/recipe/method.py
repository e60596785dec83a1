"""The `method:` and `reference:` keys of a `po` recipe: which TRL trainer, which loss terms, which reference.

`method:` is a name (`apo_zero`, `dpo`, `kto`, `orpo`), a list of DPO loss terms summed with equal weights
(`[sigmoid, sft]`), or a mapping of terms to weights (`{sigmoid: 1.0, sft: 0.5}`).
"""

from typing import Any

from smolalign.errors import SmolalignError
from smolalign.recipe.schema import Method, ReferenceSection
from smolalign.recipe.typecheck import suggest

DPO_LOSSES = ("sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot",
              "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm")
"""DPOConfig.loss_type values in TRL 1.16."""
ALIASES = {"dpo": "sigmoid"}
KTO_LOSSES = ("kto", "apo_zero_unpaired")
"""KTOConfig.loss_type values: KTO proper, and APO-zero on unpaired data."""
METHODS = (*ALIASES, *DPO_LOSSES, *KTO_LOSSES, "orpo")

TRAIN_KEYS_OWNED = {
    "loss_type": "set the loss with method: (e.g. method: apo_zero, or method: {sigmoid: 1.0, sft: 0.5})",
    "loss_weights": "give weights with method: {sigmoid: 1.0, sft: 0.5}",
    "precompute_ref_log_probs": "use reference: precomputed",
}


def parse_method(value: Any) -> Method:
    if value is None:
        raise SmolalignError(f"method is required for smolalign po: one of {', '.join(METHODS)}, a list of DPO loss "
                             "terms, or a mapping of terms to weights")
    if isinstance(value, str):
        name = value.strip()
        if name == "orpo":
            return Method(name, "orpo")
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
    if name in (*KTO_LOSSES, "orpo"):
        raise SmolalignError(f"method: {name} runs on its own trainer and cannot be combined with DPO loss terms")
    raise SmolalignError(f"unknown method {name!r}{suggest(name, METHODS)}; one of {', '.join(METHODS)}")


def parse_reference(value: Any, method: Method, has_peft: bool) -> ReferenceSection:
    """`reference:` is policy (default), adapter (default with peft:), precomputed, or {source: MODEL}."""
    if method.trainer == "orpo":
        if value not in (None, "none"):
            raise SmolalignError("reference: orpo is reference-free; remove the reference key")
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


def trainer_config_class(method: Method) -> type:
    if method.trainer == "kto":
        from trl import KTOConfig

        return KTOConfig
    if method.trainer == "orpo":
        import os

        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        from trl.experimental.orpo import ORPOConfig

        return ORPOConfig
    from trl import DPOConfig

    return DPOConfig
