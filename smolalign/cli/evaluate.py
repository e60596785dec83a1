"""`smolalign eval`: score models on local prompts with the verifiable rewards, in each reasoning mode, side by side
and against a baseline (`smolalign eval runs/x/model --baseline smollm2-135m-instruct --data d.jsonl --reward
math_accuracy`)."""

from pathlib import Path
from typing import Annotated

import typer

from smolalign.errors import SmolalignError

Models = Annotated[list[str], typer.Argument(
    metavar="MODEL", help="Models to evaluate: a directory, .gguf file, bundled name or hub id (a served model's "
                             "name with --backend openai); LABEL=MODEL names its column.")]
Baseline = Annotated[str | None, typer.Option("--baseline", help="The model the others are compared with (paired "
                                                                 "differences with intervals); listed first.")]
Data = Annotated[list[str], typer.Option("--data", help="Prompts: a .jsonl/.json/.parquet file or folder, or a hub "
                                                        "dataset; `prompt` or `messages`, plus the columns the rewards "
                                                        "read. Repeatable.")]
Rewards = Annotated[list[str], typer.Option("--reward", help="NAME[,NAME...]: built-in rewards or "
                                                             "path/to/file.py:function. Repeatable.")]
Modes = Annotated[str, typer.Option("--modes", help="Reasoning modes, comma-separated: think, no_think.")]
Samples = Annotated[int, typer.Option("--samples", "-k", help="K: answers per prompt and mode (avg@K, pass@K).")]


def evaluate_command(
    models: Models, data: Data, reward: Rewards, baseline: Baseline = None, modes: Modes = "think,no_think",
    samples: Samples = 1,
    max_new_tokens: Annotated[int, typer.Option(help="Generation budget per answer.")] = 256,
    backend: Annotated[str, typer.Option(help="transformers, vllm or openai (a running server, --base-url).")] = "transformers",
    base_url: Annotated[str | None, typer.Option(help="openai backend: http://127.0.0.1:8000/v1.")] = None,
    template: Annotated[str, typer.Option(help="Chat template for the prompts: smollm3, chatml, a .jinja file, or "
                                               "`model` (each tokenizer's own).")] = "smollm3",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0: greedy).")] = 0.6,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling.")] = 0.95,
    batch_size: Annotated[int, typer.Option(help="Sequences per generate call (requests in flight for openai).")] = 16,
    max_prompts: Annotated[int | None, typer.Option(help="Only the first N prompts.")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the sampling and the bootstrap.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here (and the samples beside it, "
                                                                 "NAME.samples.jsonl).")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Write the tables as Markdown.")] = None,
    chart: Annotated[Path | None, typer.Option("--chart", help="Write a PNG chart of the main metrics (needs "
                                                               "matplotlib).")] = None,
) -> None:
    """Generate K answers per prompt in each mode and report mean reward, avg@K / pass@K, mode compliance,
    truncation and length, with bootstrap intervals; several models side by side, differences to a baseline."""
    from smolalign.evaluation.run import evaluate

    settings = dict(data=data, reward=reward, modes=modes, samples=samples, max_new_tokens=max_new_tokens,
                    backend=backend, base_url=base_url, temperature=temperature, top_p=top_p, batch_size=batch_size,
                    max_prompts=max_prompts, seed=seed)
    evaluate(inputs_from_options(models, baseline, template, settings), json_path=json_out, markdown_path=markdown,
             chart_path=chart)


def inputs_from_options(models: list[str], baseline: str | None, template: str, settings: dict):
    """The command line as checked evaluation inputs (exit 2 on any problem, before a model loads)."""
    from smolalign.evaluation.inputs import parse_model, prepare, unique_labels
    from smolalign.recipe.schema import EvalRewardSection, EvalSection, SourceSection

    names = [name.strip() for spec in settings.pop("reward") for name in spec.split(",") if name.strip()]
    modes = [mode.strip() for mode in settings.pop("modes").split(",") if mode.strip()]
    try:
        section = EvalSection(data=[SourceSection(path=path) for path in settings.pop("data")],
                              rewards=[EvalRewardSection(name) for name in names], modes=modes, **settings)
    except (ValueError, TypeError) as exc:
        raise SmolalignError(f"eval: {exc}") from None
    parsed = [parse_model(spec) for spec in models]
    base = parse_model(baseline) if baseline is not None else None
    if base is not None:
        parsed = [base, *[m for m in parsed if m.source != base.source]]
    parsed = unique_labels(parsed)
    return prepare(section, parsed, parsed[0].label if base is not None else None, template)


def register(app: typer.Typer) -> None:
    app.command(name="eval", rich_help_panel="Evaluate")(evaluate_command)
