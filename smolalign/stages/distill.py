"""On-policy distillation in `smolalign rl`: `method: distill` (TRL's DistillationTrainer, same tokenizer),
`gold` (TRL's GOLDTrainer; Universal Logit Distillation across tokenizers) and `auto` (GOLD, with ULD exactly when
the tokenizers differ).

What smolalign adds: both tokenizers are loaded and compared before any weights (the plan reports both vocabularies,
how many teacher tokens map one-to-one onto student tokens, and the sampling budget); a cross-tokenizer run
without ULD is refused (GOLD would silently resize the teacher's embeddings and train on garbage); a teacher larger
than `teacher.max_memory_gb` is refused; the teacher is any model source, loaded for inference in its own dtype; and
learning-rate defaults that learn in a few hundred steps replace TRL's 1e-7 / 1e-6.
"""

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from smolalign.data.check import check_prompt_rows
from smolalign.data.mixture import ORIGIN
from smolalign.data.prompts import read_prompt_rows, recipe_prompts
from smolalign.errors import SmolalignError
from smolalign.generation.backend_settings import ServerAddress, describe_generation, vllm_fields
from smolalign.hardware import Hardware, generation_dtype
from smolalign.models.config import model_width
from smolalign.models.load import load_model, load_tokenizer
from smolalign.models.size import DTYPE_BYTES, source_parameter_count
from smolalign.plan import make_plan
from smolalign.quantities import describe_bytes, describe_count
from smolalign.recipe.schema import ModelSection, Recipe
from smolalign.resolve import Run
from smolalign.runs.metrics import metrics_callback
from smolalign.stages.generating import generating
from smolalign.stages.lifecycle import Checked, OpenRun, Stage, start_run
from smolalign.stages.trainer_config import check_config, peft_config, trl_config
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template

DEFAULT_LEARNING_RATE = {"full": 1e-5, "lora": 1e-4}
"""TRL defaults to 1e-7 (GOLD) and 1e-6 (Distillation): a 135M student barely moves in a few hundred steps at
those. 1e-5 for full fine-tuning (the SFT range) and 1e-4 for LoRA learn in that budget on the quickstart."""


@dataclass
class Pairing:
    """What comparing the two tokenizers found."""

    trainer: str
    """distill or gold."""
    uld: bool
    student_vocab: int
    teacher_vocab: int
    shared: int
    """Teacher tokens whose string is also a student token."""
    same_tokenizer: bool


def teacher_section(recipe: Recipe) -> ModelSection:
    teacher = recipe.teacher
    return ModelSection(source=teacher.source, revision=teacher.revision, dtype=teacher.dtype,
                        trust_remote_code=teacher.trust_remote_code)


def load_teacher_tokenizer(run: Run):
    try:
        return load_tokenizer(teacher_section(run.recipe), run.recipe.template.name, run.source("teacher"))[0]
    except SmolalignError as exc:
        raise SmolalignError(f"teacher: its tokenizer cannot be loaded ({exc})") from None
    except Exception as exc:  # a broken tokenizer file raises whatever its parser raises
        raise SmolalignError(f"teacher: its tokenizer cannot be loaded ({type(exc).__name__}: {exc})") from None


def pair_tokenizers(run: Run, student, teacher) -> Pairing:
    student_vocab, teacher_vocab = student.get_vocab(), teacher.get_vocab()
    same = student_vocab == teacher_vocab
    shared = sum(1 for token in teacher_vocab if token in student_vocab)
    uld_setting = run.settings.train.get("use_uld_loss")  # set by the recipe, or left to smolalign
    if not run.method_spec.cross_tokenizer:
        if not same:
            raise SmolalignError("method distill needs the teacher's tokenizer: theirs differ "
                                 f"({len(student_vocab):,} vs {len(teacher_vocab):,} tokens); use method: gold or "
                                 "auto (GOLD with ULD distills across tokenizers)")
        return Pairing("distill", False, len(student_vocab), len(teacher_vocab), shared, True)
    if not same and uld_setting is False:
        raise SmolalignError("train.use_uld_loss: false with different tokenizers: GOLD would resize the teacher's "
                             "embeddings to the student's vocabulary and train on garbage; remove the setting (ULD "
                             "is switched on for you) or use the teacher's tokenizer")
    uld = bool(uld_setting) if same else True
    return Pairing("gold", uld, len(student_vocab), len(teacher_vocab), shared, same)


ULD_MERGE = "bayesian"
"""How GOLD's ULD loss merges a token one side splits in several (TRL's uld_token_merge_strategy), unless a recipe sets
it. TRL's default, "observed", compares the student's prediction after a whole split token with the teacher's
prediction after its first piece (a quickstart answer's number, " 85" against " ", "8", "5": the teacher's "a digit
comes next" taught as what follows the number); "bayesian" compares predictions of the same text."""


def teacher_dtype(run: Run) -> str:
    """The dtype the frozen teacher loads in: hardware.generation_dtype at the teacher's own width."""
    return generation_dtype(run.recipe.teacher.dtype, run.hardware, model_width(run.source("teacher")))


def check_teacher_memory(run: Run) -> tuple[int | None, str]:
    """(bytes of the teacher's weights or None, its dtype); refuses a teacher over teacher.max_memory_gb."""
    recipe = run.recipe
    dtype = teacher_dtype(run)
    count = source_parameter_count(run.source("teacher"))
    size = count * DTYPE_BYTES.get(dtype, 4) if count else None
    limit = recipe.teacher.max_memory_gb
    if limit is not None and size is not None and size > limit * 1024**3:
        raise SmolalignError(f"teacher {recipe.teacher.source}: {describe_bytes(size)} of weights in {dtype} "
                             f"({describe_count(count)} parameters) exceed teacher.max_memory_gb {limit:g}")
    return size, dtype


@dataclass(frozen=True)
class DistillChecked(Checked):
    pairing: Pairing
    """How the student's and the teacher's tokenizers pair."""
    prompts: object
    """The training prompts, as the trainer takes them."""
    tokenizer: object
    """The student's tokenizer."""
    teacher_tokenizer: object


def check_before_loading(run: Run) -> DistillChecked:
    """Sources, tokenizers, data and memory."""
    recipe = run.recipe
    run.source()
    run.source("teacher")
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    student, _ = load_tokenizer(recipe.model, recipe.template.name, run.source())
    teacher = load_teacher_tokenizer(run)
    pairing = pair_tokenizers(run, student, teacher)
    check_config(run, lambda r, h, o, check: distill_config(r, pairing, h, o, teacher_dir=o, check=check))
    size, loads_in = check_teacher_memory(run)
    rows = read_prompt_rows(run.data)
    checked = check_prompt_rows(run, rows.train, run.data.seed, recipe.template.kwargs)
    prompts = load_distill_data(run, rows)
    plan = make_plan(run, template, len(prompts), data_format="prompt")
    plan.add_data_check(checked)
    for key in ("packing", "loss", "tokens per step"):
        plan.rows.pop(key, None)
    settings = run.settings
    lmbda = on_policy_share(run)
    completion = settings["max_completion_length"]
    batch = plan.rows["global batch"]
    loss = uld_description(settings, pairing) if pairing.uld else f"generalized JSD, beta {settings['beta']:g}"
    plan.rows["method"] = f"{recipe.method.name} -> {pairing.trainer} ({loss})"
    plan.rows["vocabularies"] = (f"student {pairing.student_vocab:,}, teacher {pairing.teacher_vocab:,}; "
                                 f"{pairing.shared:,} teacher tokens map one-to-one onto student tokens"
                                 + (" (same tokenizer)" if pairing.same_tokenizer else ""))
    plan.rows["sampling"] = (f"{lmbda:.0%} on-policy: ≤ {int(batch * lmbda * completion):,} student-sampled tokens "
                             f"per step ({batch} sequences × {lmbda:g} × max_completion_length {completion}), "
                             f"temperature {settings['temperature']:g}")
    if recipe.generation is not None:
        plan.rows["generation"] = f"student samples: {describe_generation(recipe.generation)}"
    plan.rows["teacher"] = (f"{recipe.teacher.source} in {loads_in}"
                            + (f", {describe_bytes(size)} of weights" if size else ""))
    plan.rows["learning rate"] = f"{learning_rate(run):g}" + ("" if settings.is_set("learning_rate") else " (smolalign default)")
    return DistillChecked(plan, pairing, prompts, student, teacher)


def uld_description(settings, pairing: Pairing) -> str:
    """The ULD loss as the plan states it: its parts and their weights (TRL's, by default, weigh the part on the
    tokens both vocabularies share by their share of the teacher's vocabulary), and how split tokens are merged."""
    merge = settings.train.get("uld_token_merge_strategy", ULD_MERGE)
    merged = (f"split tokens merged {merge}: each student position is compared with the teacher's prediction of the "
              "same text" if merge == ULD_MERGE else f"split tokens merged {merge}")
    if not settings.get("uld_use_hybrid_loss"):
        return f"ULD (sorted-probability distance across tokenizers; {merged})"
    matched = settings.get("uld_hybrid_matched_weight")
    unmatched = settings.get("uld_hybrid_unmatched_weight")
    if (matched is None) != (unmatched is None):
        raise SmolalignError("train.uld_hybrid_matched_weight and train.uld_hybrid_unmatched_weight: set both or "
                             "neither (neither: TRL weighs the parts by the share of the teacher's vocabulary that maps)")
    if matched is None:  # TRL divides by the teacher's logits' width, which may pad its vocabulary: about
        matched = pairing.shared / max(1, pairing.teacher_vocab)
        unmatched, whose = 1 - matched, "TRL's, by the shared share of the teacher's vocabulary"
    else:
        whose = "train.uld_hybrid_*_weight"
    return (f"ULD hybrid: exact divergence on the tokens both vocabularies share × {matched:.3g}, ULD on the rest × "
            f"{unmatched:.3g} ({whose}); {merged})")


def learning_rate(run: Run) -> float:
    if run.settings.is_set("learning_rate"):
        return run.settings["learning_rate"]
    return DEFAULT_LEARNING_RATE["lora" if run.recipe.peft else "full"]


def on_policy_share(run: Run) -> float:
    """The share of student-sampled sequences: GOLD's lmbda; DistillationTrainer samples every one."""
    return run.settings.get("lmbda", 1.0)


def load_distill_data(run: Run, rows=None):
    """Prompts (and, for GOLD's off-policy share, completions), with each row's think mode in its prompt; `rows`:
    the recipe's prompt rows when they were read already."""
    rows = rows or read_prompt_rows(run.data)
    prompts = recipe_prompts(run.recipe, rows).train
    has_completion = "completion" in prompts.column_names
    lmbda = on_policy_share(run)
    off_policy = run.method_spec.off_policy
    if off_policy and not has_completion:  # TRL's GOLDTrainer tokenizes prompt + completion for every row
        share = f"learns from them {1 - lmbda:.0%} of the time, and " if lmbda < 1.0 else ""
        raise SmolalignError(f"GOLD reads a completion for every prompt row (it {share}tokenizes each prompt with its "
                             "completion, even when every batch is sampled, at train.lmbda 1.0), and the data has no "
                             "completion column: add the rows' reference answers as one")
    if off_policy:
        missing = [i for i, value in enumerate(rows.train["completion"]) if value in (None, "", [])]
        if missing:  # a source without completions mixed with one that has them: null in its rows
            raise SmolalignError(f"prompt row {rows.train[missing[0]][ORIGIN]}: no completion ({len(missing)} row(s)); "
                                 "GOLD reads one for every row (TRL tokenizes each prompt with it): give every source "
                                 "its reference answers")
    if has_completion:
        def as_messages(row):
            value = row["completion"]
            return {"completion": [{"role": "assistant", "content": value}] if isinstance(value, str) else value}

        prompts = prompts.map(as_messages, keep_in_memory=True)
    keep = ["prompt", *(["completion"] if has_completion and off_policy else [])]
    if run.method_spec.cross_tokenizer:
        # GOLD renders each row with its own chat_template_kwargs column (its config takes none): the recipe's
        # template kwargs and the row's mode, or a no_think recipe's prompts would render in think mode.
        kwargs = dict(run.recipe.template.kwargs)
        prompts = prompts.map(lambda row: {"chat_template_kwargs": {**kwargs, **row["chat_template_kwargs"]}},
                              keep_in_memory=True)
        keep.append("chat_template_kwargs")
    return prompts.select_columns(keep)


def distill_config(run: Run, pairing: Pairing, hardware: Hardware, run_dir: Path, teacher_dir: str,
                   server: ServerAddress | None = None, *, check: bool = False):
    """The trainer's config; `generation:` picks how the student samples (TRL's use_vllm / vllm_mode)."""
    recipe = run.recipe
    train = {**run.settings.train, "learning_rate": learning_rate(run)}
    sampling = vllm_fields(recipe.generation, server)
    if not run.method_spec.cross_tokenizer:
        fixed = {"chat_template_kwargs": dict(recipe.template.kwargs)} if recipe.template.kwargs else {}
        return trl_config(run, hardware, run_dir, train, check=check, **fixed, **sampling)
    fixed = {"use_uld_loss": pairing.uld, **sampling}
    if pairing.uld:
        fixed["teacher_tokenizer_name_or_path"] = teacher_dir
        train.setdefault("uld_token_merge_strategy", ULD_MERGE)
    return trl_config(run, hardware, run_dir, train, check=check, **fixed)


@contextmanager
def load(run: Run, opened: OpenRun, checked: DistillChecked) -> Iterator[tuple]:
    """With the student's generation served (`stages.generating`): the config, the student and the frozen teacher;
    yields the trainer on them and the student's tokenizer."""
    recipe, hardware, dtype = run.recipe, run.hardware, opened.dtype
    pairing, prompts = checked.pairing, checked.prompts
    tokenizer, teacher_tokenizer = checked.tokenizer, checked.teacher_tokenizer
    # GOLD aligns across tokenizers with a teacher tokenizer it loads from a path: the one checked and planned with
    # (its revision, its end of turn), not the folder's or the hub's newest.
    with generating(run, opened) as generation, tempfile.TemporaryDirectory(prefix="smolalign-teacher-") as words:
        teacher_tokenizer.save_pretrained(words)
        # the config first, as in sft and po
        config = distill_config(run, pairing, hardware, opened.run_dir, words, generation.server)
        student = load_model(recipe.model, dtype, hardware, tokenizer, run.source())
        teacher = load_model(teacher_section(recipe), teacher_dtype(run), hardware, teacher_tokenizer,
                             run.source("teacher"))
        teacher.eval()
        teacher.requires_grad_(False)
        start_run(run, opened)
        trainer = opened.trainer(
            model=student, teacher_model=teacher, args=config, train_dataset=prompts, processing_class=tokenizer,
            peft_config=peft_config(run),
            callbacks=[metrics_callback(opened.run_dir), generation.watchdog.callback()])
        generation.check_syncs(trainer)
        del student, teacher  # the trainer holds them; finish() frees them before evaluating
        yield trainer, tokenizer


STAGE = Stage(check_before_loading, load, generates=True)
