"""The `train:` section before it meets TRL: recipe shorthands mapped onto TRL's fields (packing strategies, one
online DPO beta), and the keys smolalign sets
from its own sections refused with where to set them instead (the keys come from the method table)."""

import sys

from smolalign.errors import SmolalignError
from smolalign.recipe.methods import MethodSpec

PACKING_STRATEGIES = ("bfd", "bfd_split", "wrapped")


def normalize_train(train: dict, stage: str, spec: MethodSpec) -> dict:
    """Recipe shorthands onto TRL's fields: `packing: bfd|bfd_split|wrapped|false`, legacy `ffd` -> `bfd`."""
    train = dict(train)
    packing = train.get("packing")
    if isinstance(packing, str):
        train["packing"], train["packing_strategy"] = True, packing
    strategy = train.get("packing_strategy")
    if strategy in ("ffd", "bfd-requeue"):
        replacement = "bfd" if strategy == "ffd" else "bfd_split"
        print(f"warning: train.packing_strategy {strategy!r} is a legacy name, using {replacement!r}", file=sys.stderr)
        train["packing_strategy"] = replacement
    if train.get("packing") and train.get("packing_strategy") not in (None, *PACKING_STRATEGIES):
        raise SmolalignError(
            f"train.packing must be false or one of {', '.join(PACKING_STRATEGIES)}, got {train['packing_strategy']!r}"
        )
    beta = train.get("beta")
    if spec.config.endswith(":OnlineDPOConfig") and isinstance(beta, (int, float)) and not isinstance(beta, bool):
        train["beta"] = [float(beta)]  # online DPO takes a beta per epoch; one number is the same for every epoch
    for key, hint in spec.refused.items():
        if key in train:
            raise SmolalignError(f"train.{key} is set by smolalign: {hint}")
    if stage == "po" and train.get("packing"):
        raise SmolalignError("train.packing: preference training does not pack pairs; remove it")
    return train
