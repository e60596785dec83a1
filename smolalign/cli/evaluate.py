"""`smolalign eval`: score models on local prompts with the verifiable rewards, in each reasoning mode, side by side
and against a baseline (`smolalign eval runs/x/model --baseline smollm2-135m-instruct --data d.jsonl --reward
math_accuracy`)."""

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from smolalign.errors import SmolalignError

Models = Annotated[list[str], typer.Argument(
    metavar="MODEL", help="Models to evaluate: a directory, .gguf file, bundled name or hub id (a served model's "
                             "name with --backend openai); LABEL=MODEL names its column.")]
Baseline = Annotated[str | None, typer.Option("--baseline", help="The model the others are compared with (paired "
                                                                 "differences with intervals); listed first.")]
Compare = Annotated[list[str] | None, typer.Option("--compare", help="LABEL=BASE: compare model LABEL with model "
                                                                   "BASE instead of with --baseline (each stage "
                                                                   "with its input: po=sft). Repeatable.")]
Data = Annotated[list[str], typer.Option("--data", help="Prompts: a .jsonl/.json/.parquet file or folder (or one "
                                                        "shipped with the recipes: quickstart/data/arithmetic_eval.jsonl"
                                                        "), a hub dataset, or a reasoning-gym task ('reasoning_gym:chain_sum "
                                                        "{size: 64, seed: 100000, config: {max_terms: 3}}'); `prompt` "
                                                        "or `messages`, plus the columns the rewards read. Repeatable.")]
Rewards = Annotated[list[str], typer.Option("--reward", help="NAME[,NAME...]: built-in rewards or "
                                                             "path/to/file.py:function. Repeatable.")]
Params = Annotated[list[str] | None, typer.Option("--params", help="NAME=JSON: a reward's parameters, e.g. "
                                                                 "'soft_overlong={\"max_length\": 64, \"cache\": 16}'. "
                                                                 "Repeatable.")]
Thresholds = Annotated[list[str] | None, typer.Option("--threshold", help="NAME=VALUE: the reward at which a sample "
                                                                          "counts as solved for avg@K and pass@K "
                                                                          "(default 1.0). Repeatable.")]
Modes = Annotated[str, typer.Option("--modes", help="Reasoning modes, comma-separated: think, no_think.")]
Samples = Annotated[int, typer.Option("--samples", "-k", help="K: answers per prompt and mode (avg@K, pass@K).")]


def evaluate_command(
    models: Models, data: Data, reward: Rewards, baseline: Baseline = None, params: Params = None,
    threshold: Thresholds = None, compare: Compare = None, modes: Modes = "think,no_think", samples: Samples = 1,
    max_new_tokens: Annotated[int, typer.Option(help="Generation budget per answer.")] = 256,
    backend: Annotated[str, typer.Option(help="transformers, vllm or openai (a running server, --base-url).")
                       ] = "transformers",
    base_url: Annotated[str | None, typer.Option(help="openai backend: http://127.0.0.1:8000/v1.")] = None,
    template: Annotated[str, typer.Option(help="Chat template for the prompts: smollm3, chatml, a .jinja file, or "
                                               "`model` (each tokenizer's own).")] = "smollm3",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0: greedy).")] = 0.6,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling.")] = 0.95,
    batch_size: Annotated[int, typer.Option(help="Sequences per generate call (requests in flight for openai).")] = 16,
    split: Annotated[str, typer.Option(help="Split of a hub dataset given to --data.")] = "train",
    max_prompts: Annotated[int | None, typer.Option(help="Only the first N prompts.")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the sampling and the bootstrap.")] = 0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here (and the samples beside it, "
                                                                 "NAME.samples.jsonl).")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Write the tables as Markdown.")] = None,
    chart: Annotated[Path | None, typer.Option("--chart", help="Write a PNG chart of the main metrics (needs "
                                                               "matplotlib).")] = None,
    tools: Annotated[list[str] | None, typer.Option("--tools", help="A tool the models may call: python (the "
                                                     "sandbox), path/to/file.py:function or module:function. "
                                                     "Repeatable. Each model is then evaluated without tools (LABEL) "
                                                     "and with them (LABEL+tools), compared pairwise.")] = None,
    environment: Annotated[str | None, typer.Option(help="A stateful environment, path/to/file.py:Class or "
                                                         "module:Class: one per answer, reset with its prompt's row; "
                                                         "its methods are LABEL+tools' tools and its get_reward() a "
                                                         "reward row.")] = None,
    max_turns: Annotated[int | None, typer.Option(help="With --tools or --environment: tool calls per answer at "
                                                       "most (default 4).")] = None,
    card: Annotated[Path | None, typer.Option("--card", help="A run directory one of the MODELs comes from (RUN_DIR/"
                                                             "model): the results go into its model card "
                                                             "(model-index and the intervals table).")] = None,
) -> None:
    """Generate K answers per prompt in each mode and report mean reward, avg@K / pass@K, mode compliance,
    truncation and length, with bootstrap intervals; several models side by side, differences to a baseline."""
    from smolalign.atomic import FIGURE_FORMATS, check_writable
    from smolalign.evaluation.run import evaluate
    from smolalign.preflight.packages import check_eval_command

    check_eval_command(backend, chart is not None)
    for what, path, formats in (("--json", json_out, None), ("--markdown", markdown, None),
                                ("--chart", chart, FIGURE_FORMATS)):
        if path is not None:  # before the evaluation, not after it
            check_writable(path, what, formats)
    settings = dict(data=data, split=split, reward=reward, params=params or [], threshold=threshold or [],
                    modes=modes, samples=samples, max_new_tokens=max_new_tokens, backend=backend, base_url=base_url,
                    temperature=temperature, top_p=top_p, batch_size=batch_size, max_prompts=max_prompts,
                    seed=seed, tools=tools or [], environment=environment,
                    max_turns=max_turns)
    inputs = inputs_from_options(models, baseline, template, settings, compare or [])
    label = card_label(card, inputs.models) if card is not None else None
    report = evaluate(inputs, json_path=json_out, markdown_path=markdown, chart_path=chart)
    if card is not None:
        from smolalign.runs.card import write_evaluation_card

        print(f"wrote the results of {label} into {write_evaluation_card(card, report, label)}")


def card_label(run_dir: Path, models) -> str:
    """The label of the evaluated model that is `run_dir`'s own (RUN_DIR/model); exit 2 before anything loads when
    there is none, or RUN_DIR is not a run directory."""
    from smolalign.runs.rundir import MANIFEST_FILE, MODEL_DIR

    if not (run_dir / MANIFEST_FILE).is_file():
        raise SmolalignError(f"--card {run_dir}: not a run directory (no {MANIFEST_FILE})")
    own = (run_dir / MODEL_DIR).resolve()
    for model in models:
        if Path(model.source).expanduser().resolve() in (own, run_dir.resolve()):
            return model.label
    raise SmolalignError(f"--card {run_dir}: none of the models evaluated is {run_dir / MODEL_DIR}; add it")


def inputs_from_options(models: list[str], baseline: str | None, template: str, settings: dict,
                        compare: list[str] = ()):
    """The command line as checked evaluation inputs (exit 2 on any problem, before a model loads)."""
    from smolalign.evaluation.inputs import parse_model, prepare, unique_labels
    from smolalign.recipe.eval_schema import EvalRewardSection, EvalSection
    from smolalign.resolve import reward_functions

    names = [name.strip() for spec in settings.pop("reward") for name in spec.split(",") if name.strip()]
    params = {name: _json_object(name, text) for name, text in _named("--params", settings.pop("params"), names)}
    thresholds = {name: _number(name, text) for name, text in _named("--threshold", settings.pop("threshold"), names)}
    modes = [mode.strip() for mode in settings.pop("modes").split(",") if mode.strip()]
    sources = [data_source(text, settings["split"]) for text in settings.pop("data")]
    del settings["split"]
    rewards = [EvalRewardSection(name, params.get(name, {}), thresholds.get(name, 1.0)) for name in names]
    try:
        section = EvalSection(data=sources, rewards=rewards, modes=modes, **settings)
    except (ValueError, TypeError) as exc:
        raise SmolalignError(f"eval: {exc}") from None
    parsed = [parse_model(spec) for spec in models]
    base = parse_model(baseline) if baseline is not None else None
    if base is not None:
        parsed = [base, *[m for m in parsed if m.source != base.source]]
    parsed = unique_labels(parsed)
    compared_to = {}
    for value in compare:
        label, sep, other = value.partition("=")
        if not sep:
            raise SmolalignError(f"--compare {value!r}: expected LABEL=BASE, two model labels (po=sft)")
        compared_to[label.strip()] = other.strip()
    functions = reward_functions(section.rewards, "--reward")
    return prepare(section, functions, parsed, parsed[0].label if base is not None else None, template,
                   compared_to=compared_to)


def data_source(text: str, split: str):
    """A `--data` value as a source: a path (one not there from here may name a file shipped with the recipes,
    `quickstart/data/arithmetic_eval.jsonl`) or hub id, or `reasoning_gym:TASK` followed by a YAML mapping of the
    source's keys (size, seed, config, weight), as a recipe's `data.sources` entry writes them."""
    from rewards.reasoning_gym import task_of
    from smolalign.recipe.data_schema import SourceSection
    from smolalign.recipe.load import shipped_file
    from smolalign.recipe.typecheck import build
    from smolalign.recipe.yamlio import load_yaml

    path, _, rest = text.strip().partition(" ")
    task = task_of(path)
    shipped = shipped_file(text) if task is None and not Path(text).expanduser().exists() else None
    mapping = {"path": path if task is not None else str(shipped or text), "split": split}  # a name may hold spaces
    if task is not None and rest.strip():
        keys = load_yaml(rest, f"--data {path}")
        if not isinstance(keys, dict):
            raise SmolalignError(f"--data {text!r}: expected a mapping after the task, e.g. {path} {{size: 64}}")
        mapping = {**keys, "path": path, "split": split}
    return build(SourceSection, mapping, f"--data {path}")


def _named(option: str, values: list[str], names: list[str]) -> list[tuple[str, str]]:
    """NAME=VALUE pairs of a repeatable option, each NAME one of the --reward names."""
    pairs = []
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or name.strip() not in names:
            raise SmolalignError(f"{option} {value!r}: expected NAME=VALUE with NAME one of the rewards "
                                 f"({', '.join(names)})")
        pairs.append((name.strip(), text))
    return pairs


def _json_object(name: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SmolalignError(f"--params {name}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise SmolalignError(f"--params {name}: expected a JSON object, e.g. {name}={{\"key\": 1}}")
    return value


def _number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SmolalignError(f"--threshold {name}: {text!r} is not a number") from None
    if not math.isfinite(value):  # nan passes no comparison: every answer would count as failed
        raise SmolalignError(f"--threshold {name}: {text!r} is not a finite number")
    return value


def register(app: typer.Typer) -> None:
    app.command(name="eval", rich_help_panel="Evaluate")(evaluate_command)
