"""Running an evaluation end to end: from checked inputs to the printed tables and the files; and the `eval:`
section of a recipe, checked before its stage trains and run on the stage's output (and input) when it ends."""

from pathlib import Path

from smolalign.atomic import write_atomically
from smolalign.evaluation.generate import evaluate_models
from smolalign.evaluation.inputs import EvalInputs, EvalModel, prepare
from smolalign.evaluation.report import (
    build_report,
    render_markdown,
    render_text,
    sample_rows,
    write_chart,
    write_outputs,
)
from smolalign.hardware import free_accelerator_memory
from smolalign.resolve import Run

EVAL_FILE = "eval.json"
"""A stage's evaluation of its model in its run directory (a recipe's eval: section, a sweep cell, `smolalign eval
--card`)."""


def evaluate(inputs: EvalInputs, *, json_path: Path | None = None, markdown_path: Path | None = None,
             chart_path: Path | None = None) -> dict:
    """Generate, score, print the tables and write the files asked for; returns the report (eval.json's content)."""
    results = evaluate_models(inputs)
    report = build_report(inputs, results)
    print(render_text(report))
    if json_path is not None:
        samples = write_outputs(report, sample_rows(inputs, results), json_path)
        print(f"wrote {json_path} and {samples}")
    if markdown_path is not None:
        write_atomically(markdown_path, render_markdown(report))
        print(f"wrote {markdown_path}")
    if chart_path is not None:
        write_chart(report, chart_path)
        print(f"wrote {chart_path}")
    return report


def check_stage_eval(run: Run) -> EvalInputs | None:
    """The run's `eval:` section checked before training (data, columns, its built rewards, the input model); the
    stage's output joins the models in `evaluate_stage`, once it exists."""
    recipe = run.recipe
    section = recipe.evaluation
    if section is None:
        return None
    models = [EvalModel("before", recipe.model.source)] if section.before else []
    inputs = prepare(section, run.rewards.evaluation, models, "before" if section.before else None,
                     section.template or recipe.template.name, recipe.template.kwargs)
    compared = "its input (before) and its output (after)" if section.before else "its output"
    rewards = ", ".join(reward.name for reward, _ in inputs.rewards)
    print(f"eval: when the stage ends, {len(inputs.prompts)} prompts × {section.samples} in "
          f"{', '.join(section.modes)} on {compared}, rewards {rewards} -> eval.json")
    return inputs


def evaluate_stage(inputs: EvalInputs | None, run_dir: Path, model_dir: Path) -> dict | None:
    """Evaluate the stage's saved model (after its input, when `before`), print the before/after table and write
    eval.json (+ eval.samples.jsonl) into the run directory."""
    if inputs is None:
        return None

    free_accelerator_memory()  # the trainer's copy of the model may still hold GPU memory
    inputs.models = [*inputs.models, EvalModel("after", str(model_dir))]
    print(f"eval: {', '.join(m.label + ' = ' + m.source for m in inputs.models)}")
    return evaluate(inputs, json_path=run_dir / EVAL_FILE)
