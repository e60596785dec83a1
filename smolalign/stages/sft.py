"""`smolalign sft`: supervised fine-tuning on TRL's SFTTrainer, fed rows that smolalign prepared and checked.

smolalign tokenizes, masks, checks and packs the data itself (see `data.prepare`), so TRL's own preparation is
skipped; TRL's collator and trainer do the rest, padding-free with per-document position ids when packing.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from smolalign.data.check import check_sft_rows
from smolalign.data.encode import require_generation_markers
from smolalign.data.mixture import Mixture, build_mixture
from smolalign.data.prepare import Layout, describe_split, prepare_sft_data
from smolalign.hardware import Hardware
from smolalign.models.load import load_model, load_tokenizer
from smolalign.plan import make_plan
from smolalign.resolve import Run
from smolalign.runs.metrics import metrics_callback
from smolalign.stages.lifecycle import Checked, OpenRun, Stage, start_run
from smolalign.stages.trainer_config import check_config, peft_config, trl_config
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template


@dataclass(frozen=True)
class SftChecked(Checked):
    mixture: Mixture
    """The data as the checks read it, tokenized by the run."""


def check_before_loading(run: Run) -> SftChecked:
    """Everything checkable without weights: template, data files and columns, markers."""
    recipe = run.recipe
    run.source()
    check_config(run, sft_config)
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    mixture = build_mixture(run.data)
    if template is not None:
        require_generation_markers(template, mixture.format, Layout.from_settings(run.settings).loss)
    checked = check_sft_rows(run, mixture)
    plan = make_plan(run, template, len(mixture.train), data_format=mixture.format)
    plan.add_data_check(checked)
    return SftChecked(plan, mixture)


def sft_config(run: Run, hardware: Hardware, run_dir: Path, *, check: bool = False):
    """SFTConfig from the run's settings, with precision decided by the hardware and TRL's data preparation switched
    off."""
    return trl_config(run, hardware, run_dir, check=check, dataset_kwargs={"skip_prepare_dataset": True})


@contextmanager
def load(run: Run, opened: OpenRun, checked: SftChecked) -> Iterator[tuple]:
    """The tokenizer and the prepared data (the main process first), the config, the model; yields the trainer on
    them and the tokenizer."""
    recipe, hardware = run.recipe, run.hardware
    mixture = checked.mixture
    # Under a launcher, the main process converts models and tokenizes once; the others then read what it wrote.
    with opened.state.main_process_first():
        tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, run.source())
        data = prepare_sft_data(run, tokenizer, template, mixture=mixture,
                                prepared_by_another=not opened.state.is_main_process)
    if opened.state.is_main_process:
        print(f"data: {describe_split(data.stats['train'], run.settings.get('max_length'))} "
              f"({'from cache' if data.stats['cached'] else 'prepared'}, key {data.fingerprint})")
    # The config comes before the model: under ZeRO-3 it is what makes the model load sharded.
    config = sft_config(run, hardware, opened.run_dir)
    model = load_model(recipe.model, opened.dtype, hardware, tokenizer, run.source())
    start_run(run, opened, template={"name": template.name, "sha256": template.sha256, "origin": template.origin},
              data={"fingerprint": data.fingerprint, "stats": data.stats})
    trainer = opened.trainer(
        model=model, args=config, train_dataset=data.train, eval_dataset=data.eval, processing_class=tokenizer,
        peft_config=peft_config(run), callbacks=[metrics_callback(opened.run_dir)])
    del model  # the trainer holds it; finish() frees it before an evaluation
    yield trainer, tokenizer


STAGE = Stage(check_before_loading, load)
