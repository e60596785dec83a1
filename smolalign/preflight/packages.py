"""The preflight checks of the optional packages a recipe's choices import where nothing else checks them: a tracker
for `train.report_to` (transformers knows it, and the target has it), DeepSpeed for the zero presets, and for
`smolalign eval`'s own options, vLLM (--backend vllm) and matplotlib (--chart)."""

from smolalign.errors import SmolalignError
from smolalign.preflight.vllm import needs_vllm
from smolalign.resolve import Run
from smolalign.target import EXTRA_MODULES, this_machine

REPORT_EXTRAS = ("wandb", "trackio", "tensorboard")
"""The trackers smolalign ships as extras (pyproject's optional dependencies of the same names)."""


def check_report_to(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    wanted = recipe.train.get("report_to")
    names = [wanted] if isinstance(wanted, str) else list(wanted or [])
    names = [n for n in names if n not in ("none", "all")]
    if not names:
        return None
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    unknown = [n for n in names if n not in INTEGRATION_TO_CALLBACK]
    if unknown:
        return (f"train.report_to {', '.join(map(str, unknown))}: not a tracker transformers knows; use "
                f"{', '.join(INTEGRATION_TO_CALLBACK)}, or none")
    if target.packages is None:
        available = get_available_reporting_integrations()
    else:
        available = [n for n in names if all(target.has(m) for m in EXTRA_MODULES.get(n, (n,)))]
    missing = [n for n in names if n not in available]
    if missing:
        extras = [n for n in missing if n in REPORT_EXTRAS]
        install = [f"'smolalign[{','.join(extras)}]'"] if extras else []
        install += [n for n in missing if n not in REPORT_EXTRAS]
        return (f"train.report_to {', '.join(missing)}: not installed in {target.where} (pip install "
                f"{' '.join(install)}), or remove it")
    return None


def check_deepspeed(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    preset = recipe.launch.preset if recipe.launch else None
    if (recipe.train.get("deepspeed") or (preset or "").startswith("zero")) and not target.has("deepspeed"):
        key = "train.deepspeed" if recipe.train.get("deepspeed") else f"launch.preset {preset}"
        return f"{key}: DeepSpeed is not installed (pip install 'smolalign[deepspeed]')"
    return None


def check_eval_command(backend: str, chart: bool) -> None:
    """`smolalign eval`'s own options, before any model loads."""
    here = this_machine()
    if backend == "vllm":
        problem = needs_vllm("--backend vllm", here, "--backend transformers")
        if problem:
            raise SmolalignError(problem)
    if chart and not here.has("matplotlib"):
        raise SmolalignError("--chart needs matplotlib (pip install 'smolalign[plot]'; the GPU image has it)")
