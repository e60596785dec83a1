"""`smolalign po`: preference optimization (DPO and its loss variants, APO, KTO, ORPO) on TRL's trainers, and
reward models (`method: reward`, TRL's RewardTrainer) trained on the same pairs.

smolalign renders and tokenizes the pairs with the recipe's template and checks every row (see
`data.preference`), generates the pairs first when the recipe has a `pairs:` section, picks the reference model
the recipe names, and hands TRL prepared rows.
"""

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from smolalign.data.check import check_preference_rows, check_prompt_rows
from smolalign.data.mixture import Mixture, build_mixture
from smolalign.data.prepare_preference import describe_split, prepare_preference_data, require_preference_format
from smolalign.data.prompts import source_prompts
from smolalign.errors import SmolalignError
from smolalign.estimate.settings import hardware_planned_for
from smolalign.hardware import Hardware, frozen_dtype
from smolalign.inputs.pairs_file import pairs_path
from smolalign.models.load import load_model, load_tokenizer
from smolalign.models.size import DTYPE_BYTES, source_parameter_count
from smolalign.models.sources import resolve_source
from smolalign.pairs.build import generate_pairs
from smolalign.pairs.graded_plan import add_graded_rows
from smolalign.pairs.output import is_up_to_date
from smolalign.pairs.prompts import system_prompt_of
from smolalign.pairs.sides import warn_sides_in_other_modes
from smolalign.pairs.thresholds import check_thresholds
from smolalign.pairs.verified import verifier_plan_row
from smolalign.plan import make_plan
from smolalign.quantities import describe_bytes, describe_count
from smolalign.recipe.schema import ModelSection
from smolalign.resolve import Role, Run
from smolalign.runs.metrics import metrics_callback
from smolalign.stages.lifecycle import Checked, OpenRun, Stage, policy_dtype, start_run
from smolalign.stages.trainer_config import check_config, peft_config, trl_config
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template

KTO_NEEDS_BATCH = ("kto",)
"""KTO loss types whose KL estimate pairs each completion with another prompt of the same batch."""


def check_recipe(run: Run) -> None:
    """What TRL would only refuse after loading the weights."""
    method, settings = run.recipe.method, run.settings
    if any(loss in KTO_NEEDS_BATCH for loss in method.losses) and settings.per_device_batch < 2:
        raise SmolalignError("train.per_device_train_batch_size: kto needs at least 2 (its KL term pairs each answer "
                             "with another prompt of the same batch); raise it, or use method: apo_zero_unpaired")
    if "exo_pair" in method.losses and not settings["label_smoothing"]:
        raise SmolalignError("method exo_pair needs train.label_smoothing > 0 (the EXO paper uses 1e-3)")
    if run.method_spec.scorer and run.recipe.evaluation is not None:
        raise SmolalignError("eval: a reward model scores answers, it writes none, so there is nothing to evaluate "
                             "by generation (its accuracy on held-out pairs is logged with data.eval_split); remove "
                             "eval:, and score answers with the trained model in another run's rewards "
                             "(name: model:PATH)")


@dataclass(frozen=True)
class PoChecked(Checked):
    mixture: Mixture | None
    """The pairs as the checks read them, prepared by the run; None where they are still to be generated."""


def check_before_loading(run: Run) -> PoChecked:
    """Template, data (unless the pairs are still to be generated), batch rules."""
    recipe = run.recipe
    check_recipe(run)
    run.source()
    check_config(run, po_config)
    if recipe.reference.kind == "source":
        run.source("reference")
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    mixture = None
    if recipe.pairs is None or is_up_to_date(recipe):
        mixture = build_mixture(run.data)
        require_preference_format(mixture.format, recipe.method)
        checked = check_preference_rows(run, mixture)
    else:
        check_generator_sources(recipe.pairs)
        check_thresholds(run)
        warn_sides_in_other_modes(recipe)
        prompts = source_prompts(recipe.pairs.prompts, recipe.pairs.seed, system_prompt_of(recipe))
        checked = check_prompt_rows(run, prompts.train, run.data.seed, recipe.template.kwargs)
    rows = len(mixture.train) if mixture is not None else None
    if mixture is not None and run.method_spec.unpaired and mixture.format == "preference":
        rows *= 2  # each pair becomes a desirable and an undesirable row
    unpaired = recipe.pairs is not None and recipe.pairs.graded is not None and recipe.pairs.graded.unpaired
    if mixture is None:
        require_preference_format("unpaired" if unpaired else "preference", recipe.method)
    plan = make_plan(run, template, rows, data_format=mixture.format if mixture else
                     ("unpaired" if unpaired else "preference"))
    add_preference_rows(plan, run)
    plan.add_data_check(checked, "" if mixture is not None else " (the pairs' prompts)")
    return PoChecked(plan, mixture)


def check_generator_sources(pairs) -> None:
    """The models that will generate the pairs exist (an openai backend's source is a served model's name): else the
    plan would promise pairs from a folder that is not there."""
    sections = {"strong": pairs.strong, "weak": pairs.weak, "graded.sampler": pairs.graded and pairs.graded.sampler}
    for key, section in sections.items():
        if section is not None and section.backend != "openai":
            try:
                resolve_source(section.source)
            except SmolalignError as exc:
                raise SmolalignError(f"pairs.{key}.source: {exc}") from None


def add_preference_rows(plan, run: Run) -> None:
    recipe = run.recipe
    method, settings, spec = recipe.method, run.settings, run.method_spec
    rows = plan.rows
    rows.pop("packing", None)
    if spec.scorer:
        add_reward_model_rows(plan, run)
    else:
        terms = method.losses or ("orpo",)
        weights = method.weights or (1.0,) * len(terms)
        described = " + ".join(f"{w:g}×{t}" if len(terms) > 1 else t for t, w in zip(terms, weights, strict=True))
        rows["method"] = f"{method.name} ({method.trainer} trainer: {described}, beta {settings['beta']:g})"
        rows["loss"] = ("NLL on prompt + chosen answer; the odds ratio on answer tokens" if method.trainer == "orpo"
                        else "answer tokens only (prompt masked)")
        max_length = settings["max_length"]
        if max_length:
            batch = rows["global batch"]
            if spec.unpaired:
                rows["tokens per step"] = f"≤ {batch * max_length:,} ({batch} rows × max_length {max_length})"
            else:
                rows["tokens per step"] = (f"≤ {2 * batch * max_length:,} ({batch} pairs × 2 answers × max_length "
                                           f"{max_length})")
        rows["reference"] = reference_description(run)
    if recipe.pairs is not None:
        state = "cached" if is_up_to_date(recipe) else "to generate before training"
        pairs = recipe.pairs
        if pairs.graded is not None:
            add_graded_rows(rows, run, state)
        else:
            rows["pairs"] = (f"{state}: chosen from {pairs.strong.source} ({pairs.strong.backend}), rejected from "
                             f"{pairs.weak.source} ({pairs.weak.backend}) -> {pairs_path(recipe)}")
            if pairs.verifier is not None:
                rows["verifier"] = verifier_plan_row(run)
        if "steps" not in rows:
            plan.notes.append("steps are known once the pairs exist (run `smolalign po pairs` first to see them)")


def add_reward_model_rows(plan, run: Run) -> None:
    recipe, settings, rows = run.recipe, run.settings, plan.rows
    center = settings["center_rewards_coefficient"]
    rows["method"] = ("reward (a sequence classifier with one output, the score; loss -log σ(score chosen − score "
                      f"rejected){f' + {center:g} × (sum of scores)²' if center else ''})")
    rows["loss"] = ("the score of prompt + answer rendered whole, read at its last token (pairs longer than max_length "
                    "dropped)")
    max_length = settings["max_length"]
    if max_length:
        batch = rows["global batch"]
        rows["tokens per step"] = f"≤ {2 * batch * max_length:,} ({batch} pairs × 2 sequences × max_length {max_length})"
    rows["model"] = f"{recipe.model.source} with a new score head (one output)"
    rows["reference"] = reference_description(run)


def reference_description(run: Run) -> str:
    """Which reference the run uses and what it costs in memory."""
    recipe = run.recipe
    kind = recipe.reference.kind
    if kind == "none":
        return f"none ({run.method_spec.reference_free}): no extra memory"
    if kind == "adapter":
        return "the base model with the LoRA adapter disabled: no extra memory"
    if kind == "precomputed":
        return ("log-probs of the starting policy, computed once before training (one extra pass over the data): "
                "no reference weights held")
    label = "a frozen copy of the policy's source" if kind == "policy" else recipe.reference.source
    cost = weights_memory(run, "model" if kind == "policy" else "reference", " more", frozen=True)
    return f"{label}: {cost or 'one more model in memory (size unknown before loading)'}"


def policy_description(run: Run) -> str:
    """The policy's weights in memory (gradients and optimizer state are the estimate's rows)."""
    cost = weights_memory(run, "model")
    return f"{run.recipe.model.source}: {cost or 'size unknown before loading'}"


def weights_memory(run: Run, role: Role, after: str = "", *, frozen: bool = False) -> str | None:
    """"X MiB`after` (N parameters in DTYPE)" for the weights of a recipe's model source (`role`) as the policy
    loads them, or (`frozen`) as a reference does; None when unknown."""
    hardware = hardware_planned_for(run)  # launch.gpu's, planned from a machine without a GPU
    dtype = frozen_dtype(run.recipe.model.dtype, hardware) if frozen else policy_dtype(run, hardware)
    count = source_parameter_count(run.source(role))
    if not count:
        return None
    return f"{describe_bytes(count * DTYPE_BYTES.get(dtype, 4))}{after} ({describe_count(count)} parameters in {dtype})"


def po_config(run: Run, hardware: Hardware, run_dir: Path, *, check: bool = False):
    method, spec = run.recipe.method, run.method_spec
    fixed: dict = {}
    if spec.combines_losses:
        fixed["loss_type"] = list(method.losses)
        if method.weights is not None:
            fixed["loss_weights"] = list(method.weights)
    elif method.losses:
        fixed["loss_type"] = method.losses[0]
    if not spec.reference_free:
        fixed["precompute_ref_log_probs"] = run.recipe.reference.kind == "precomputed"
    if spec.keeps_columns:
        fixed["remove_unused_columns"] = False
    return trl_config(run, hardware, run_dir, check=check, **fixed)


def load_reference(run: Run, dtype: str, hardware: Hardware, tokenizer):
    """The reference model when it is a separate set of weights (policy copy or another source), else None."""
    recipe = run.recipe
    kind = recipe.reference.kind
    if kind == "policy":
        # The policy's own section (a pretraining checkpoint keeps its model.tokenizer), loaded unquantized.
        section, source = dataclasses.replace(recipe.model, quantization=None), run.source()
    elif kind == "source":
        section = ModelSection(source=recipe.reference.source, dtype=recipe.model.dtype,
                               trust_remote_code=recipe.model.trust_remote_code)
        source = run.source("reference")
        reference_tokenizer, _ = load_tokenizer(section, recipe.template.name, source)
        if reference_tokenizer.get_vocab() != tokenizer.get_vocab():
            raise SmolalignError(f"reference.source {recipe.reference.source}: its tokenizer differs from the "
                                 "policy's, so its log-probs of the same tokens would be meaningless")
    else:
        return None
    reference = load_model(section, dtype, hardware, tokenizer, source)
    reference.eval()
    for parameter in reference.parameters():
        parameter.requires_grad_(False)
    return reference


def build_trainer(trainer_type: type, run: Run, model, reference, tokenizer, data, config, run_dir: Path):
    """`trainer_type` (the method's, `recipe.method_table`) on the prepared pairs, with the reference where the method
    trains against one."""
    kwargs = dict(model=model, args=config, train_dataset=data.train, eval_dataset=data.eval,
                  processing_class=tokenizer, peft_config=peft_config(run), callbacks=[metrics_callback(run_dir)])
    if not run.method_spec.reference_free:
        kwargs["ref_model"] = reference
    return trainer_type(**kwargs)


@contextmanager
def load(run: Run, opened: OpenRun, checked: PoChecked) -> Iterator[tuple]:
    """The pairs generated if the recipe asks for them, the tokenizer and the prepared data (the main process first),
    the config, the model and its reference; yields the trainer on them and the tokenizer."""
    recipe, hardware, dtype = run.recipe, run.hardware, opened.dtype
    mixture = checked.mixture
    with opened.state.main_process_first():
        if recipe.pairs is not None and opened.state.is_main_process:
            generate_pairs(run)
        tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, run.source())
        data = prepare_preference_data(run, tokenizer, template, mixture=mixture,
                                       prepared_by_another=not opened.state.is_main_process)
    if opened.state.is_main_process:
        print(f"data: {describe_split(data.stats['train'])}")
    config = po_config(run, hardware, opened.run_dir)  # first: under ZeRO-3 it makes the models load sharded
    model = load_model(recipe.model, dtype, hardware, tokenizer, run.source(), scorer=run.method_spec.scorer)
    reference = load_reference(run, frozen_dtype(recipe.model.dtype, hardware), hardware, tokenizer)
    start_run(run, opened,
              template={"name": template.name, "sha256": template.sha256, "origin": template.origin},
              data={"fingerprint": data.fingerprint, "stats": data.stats},
              method={"name": recipe.method.name, "trainer": recipe.method.trainer, "losses": list(recipe.method.losses),
                      "weights": recipe.method.weights, "reference": reference_description(run)})
    trainer = build_trainer(opened.trainer, run, model, reference, tokenizer, data, config, opened.run_dir)
    del model, reference  # the trainer holds them; finish() frees them before an evaluation
    yield trainer, tokenizer


STAGE = Stage(check_before_loading, load, summary=("loss", ("rewards/margins", "log_odds_ratio", "accuracy", "margin")))
