"""`smolalign rl` with `method: online_dpo`: TRL's online DPO trainer, whose policy samples two answers per prompt at
every step; the recipe's rewards (the rewards registry, weighted) pick the chosen one, and a DPO (sigmoid) or IPO
loss trains on the pair against a frozen reference (the policy's copy, or the base with the adapter disabled).

smolalign reads the prompts as GRPO does (each row's think mode carried into its prompt as a flag, since this
trainer renders every prompt with no template kwargs), checks the loss, lengths, rewards and their columns before
any model loads, and picks the generation backend as GRPO does (transformers, vLLM colocated, a vLLM server).
`smolalign rl recipes/quickstart/online_dpo.yaml --dry-run`
"""

from contextlib import AbstractContextManager
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.generation.backend_settings import ServerAddress, describe_generation, vllm_fields
from smolalign.hardware import Hardware
from smolalign.plan import make_plan
from smolalign.resolve import Run
from smolalign.stages.lifecycle import OpenRun, Stage
from smolalign.stages.po import policy_description, reference_description
from smolalign.stages.rl import PromptsChecked, add_sandbox_row, check_prompts_and_rewards, load_generating
from smolalign.stages.trainer_config import check_config, trl_config
from smolalign.templates.registry import MODE_KWARG, MODEL_TEMPLATE, resolve_template

LOSSES = ("sigmoid", "ipo")
"""OnlineDPOConfig.loss_type values TRL 1.16's online DPO computes (any other fails at the first step)."""
CANDIDATES = 2
"""Answers sampled per prompt: TRL's online DPO always compares two."""


def check_recipe(run: Run) -> None:
    """What the trainer would only refuse (or silently get wrong) after loading the weights."""
    settings = run.settings
    if settings["loss_type"] not in LOSSES:
        raise SmolalignError(f"train.loss_type {settings['loss_type']!r}: online DPO computes one of "
                             f"{', '.join(LOSSES)}")
    if settings["max_new_tokens"] >= settings["max_length"]:
        raise SmolalignError(f"train.max_new_tokens {settings['max_new_tokens']} must be below train.max_length "
                             f"{settings['max_length']} (which bounds prompt + answer), or every prompt is cut away")
    penalty = settings["missing_eos_penalty"]
    if penalty is not None and penalty < 0:
        raise SmolalignError(f"train.missing_eos_penalty must be ≥ 0 (it is subtracted), got {penalty}")
    dropped = sorted(key for key in run.recipe.template.kwargs if key != MODE_KWARG)
    if dropped:  # the mode travels as a /think or /no_think flag in each prompt (data.prompts.with_think_modes)
        raise SmolalignError(f"template.kwargs.{dropped[0]}: TRL's online DPO renders its prompts with no template "
                             f"kwargs, so only {MODE_KWARG} (carried as a flag in each prompt) reaches them; remove "
                             f"{dropped[0]}, or put what it says in the prompts themselves")


def check_before_loading(run: Run):
    """Template, loss and lengths, the TRL config, prompts (a sample rendered), rewards and the columns they read;
    returns (plan, prompts, rewards)."""
    recipe = run.recipe
    run.source()
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    check_recipe(run)
    check_config(run, online_dpo_config, None)
    prompts, rewards, checked = check_prompts_and_rewards(run, rendered_kwargs={})
    plan = make_plan(run, template, len(prompts.train), data_format="prompt")
    add_online_rows(plan, run)
    add_sandbox_row(plan, rewards)
    plan.add_data_check(checked)
    return PromptsChecked(plan, prompts, rewards)


def add_online_rows(plan, run: Run) -> None:
    recipe, settings, rows = run.recipe, run.settings, plan.rows
    for key in ("packing", "loss", "tokens per step"):
        rows.pop(key, None)
    beta = settings["beta"]
    beta = ", ".join(f"{b:g}" for b in beta) if isinstance(beta, list) else f"{beta:g}"  # a list: one per epoch
    rows["method"] = (f"online_dpo (loss {settings['loss_type']}, beta {beta}): the higher-rewarded of "
                      f"{CANDIDATES} answers is chosen")
    rows["rewards"] = " + ".join(f"{r.weight:g}×{r.name}" for r in recipe.rewards)
    rows["candidates per prompt"] = CANDIDATES
    per_step = CANDIDATES * rows["global batch"]
    total = f", {per_step * plan.steps:,} in all over {plan.steps} steps" if plan.steps else ""
    rows["generations"] = (f"{per_step} per step ({rows['global batch']} prompts × {CANDIDATES}){total}, ≤ "
                           f"{settings['max_new_tokens']} tokens each, temperature {settings['temperature']:g}")
    rows["loss"] = (f"answer tokens only, prompt + answer ≤ max_length {settings['max_length']} "
                    "(the prompt's start is cut first)")
    rows["policy"] = policy_description(run)
    rows["reference"] = reference_description(run)
    rows["generation"] = describe_generation(recipe.generation)
    if settings["missing_eos_penalty"]:
        rows["rewards"] += f", minus {settings['missing_eos_penalty']:g} for an answer that never ends"


def online_dpo_config(run: Run, hardware: Hardware, run_dir: Path, server: ServerAddress | None, *,
                      check: bool = False):
    recipe = run.recipe
    fixed = {"reward_weights": [r.weight for r in recipe.rewards], **vllm_fields(recipe.generation, server)}
    return trl_config(run, hardware, run_dir, check=check, **fixed)


def load(run: Run, opened: OpenRun, checked: PromptsChecked) -> AbstractContextManager:
    """Online DPO's trainer on the policy, the prompts and the rewards, loaded as GRPO's is."""
    # No ref_model is passed: TRL freezes a copy of the policy (or disables the adapter), as the plan says.
    return load_generating(run, opened, checked, online_dpo_config)


STAGE = Stage(check_before_loading, load, summary=("objective/scores", ("rewards/margins",)), generates=True)
