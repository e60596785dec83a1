"""`smolalign sft`: supervised fine-tuning on TRL's SFTTrainer, fed rows that smolalign prepared and checked.

smolalign tokenizes, masks, checks and packs the data itself (see `data.prepare`), so TRL's own preparation is
skipped; TRL's collator and trainer do the rest, padding-free with per-document position ids when packing.
"""

from pathlib import Path

from smolalign import hardware as hardware_module  # called through the module: tests patch detect_hardware there
from smolalign.hardware import Hardware, resolve_dtype
from smolalign.plan import make_plan
from smolalign.recipe.schema import Recipe
from smolalign.stages.lifecycle import announce, finish, open_run, start_run, train_and_save
from smolalign.stages.trainer_config import check_config, peft_config, trl_config
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template


def check_before_loading(recipe: Recipe, hardware: Hardware):
    """Everything checkable without weights: template, data files and columns, markers.
    Returns the plan and the data mixture it read (reused for tokenization)."""
    from smolalign.data.check import check_sft_rows
    from smolalign.data.encode import require_generation_markers
    from smolalign.data.mixture import build_mixture
    from smolalign.data.prepare import Layout
    from smolalign.models.sources import source_of

    source_of(recipe)
    check_config(recipe, sft_config)
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    mixture = build_mixture(recipe.data)
    if template is not None:
        require_generation_markers(template, mixture.format, Layout.from_recipe(recipe).loss)
    checked = check_sft_rows(recipe, mixture)
    plan = make_plan(recipe, hardware, template, len(mixture.train), data_format=mixture.format)
    plan.add_data_check(checked)
    return plan, mixture


def sft_config(recipe: Recipe, hardware: Hardware, dtype: str, run_dir: Path, *, check: bool = False):
    """SFTConfig from the run's settings, with precision decided by the hardware and TRL's data preparation switched
    off."""
    return trl_config(recipe, hardware, dtype, run_dir, check=check, dataset_kwargs={"skip_prepare_dataset": True})


def run(recipe: Recipe, *, output_dir: Path | None = None, dry_run: bool = False, resume: bool = False,
        overwrite: bool = False) -> Path | None:
    """Plan, prepare, train and save; returns the saved model's directory (None for a dry run)."""
    hardware = hardware_module.detect_hardware()
    plan, mixture = check_before_loading(recipe, hardware)
    evaluation = announce(recipe, plan, dry_run)
    if dry_run:
        return None
    from smolalign.data.prepare import prepare_sft_data
    from smolalign.models.load import load_model, load_tokenizer
    from smolalign.models.sources import source_of

    run_dir, checkpoint, state = open_run(recipe, hardware, output_dir, resume=resume, overwrite=overwrite)
    # Under a launcher, the main process converts models and tokenizes once; the others then read what it wrote.
    with state.main_process_first():
        tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, source_of(recipe))
        data = prepare_sft_data(recipe, tokenizer, template, mixture=mixture)
    if state.is_main_process:
        print(f"data: {data.stats['train']} ({'from cache' if data.stats['cached'] else 'prepared'}, "
              f"key {data.fingerprint})")
    dtype = resolve_dtype(recipe.model.dtype, hardware)
    config = sft_config(recipe, hardware, dtype, run_dir)  # first: under ZeRO-3 it makes the model load sharded
    model = load_model(recipe.model, dtype, hardware, tokenizer, source_of(recipe))
    start_run(recipe, hardware, run_dir, state, overwrite=overwrite,
              template={"name": template.name, "sha256": template.sha256, "origin": template.origin},
              data={"fingerprint": data.fingerprint, "stats": data.stats})
    trainer = build_trainer(recipe, model, tokenizer, data, config, run_dir)
    del model  # the trainer holds it; finish() frees it before an evaluation
    model_dir = train_and_save(trainer, tokenizer, run_dir, checkpoint)
    return finish(trainer, run_dir, model_dir, evaluation, hub=recipe.hub)


def build_trainer(recipe: Recipe, model, tokenizer, data, config, run_dir: Path):
    from smolalign.runs.metrics import metrics_callback
    from smolalign.stages.trainers import trainer_class

    return trainer_class(recipe.stage, recipe.method)(model=model, args=config, train_dataset=data.train, eval_dataset=data.eval,
                      processing_class=tokenizer, peft_config=peft_config(recipe), callbacks=[metrics_callback(run_dir)])
