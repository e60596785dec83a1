"""Everything an evaluation checks before a model loads: models and labels, template, rewards, prompts and the
columns the rewards read. A problem here is a SmolalignError (exit 2) before any weights are read."""

import inspect
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewards.registry import check_reward_columns, check_team_reward
from rewards.think_mode import without_mode_flags
from smolalign.data.check import check_reward_rows
from smolalign.data.mixture import ORIGIN
from smolalign.data.prompts import as_messages, source_prompts
from smolalign.errors import USER_ERRORS, SmolalignError
from smolalign.models.sources import resolve_source
from smolalign.recipe.eval_schema import EvalRewardSection, EvalSection
from smolalign.recipe.schema import ToolsSection
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template
from smolalign.tools.rendering import check_renders_tools
from smolalign.tools.resolve import Tools, resolve_tools
from smolalign.tools.team import start_environment

_LABEL = re.compile(r"^[\w.-]+$")


@dataclass(frozen=True)
class EvalModel:
    label: str
    """The model's column in the tables (a run's name for runs/<name>/model)."""
    source: str
    tools: bool = False
    """Evaluated with the evaluation's tools (its label ends in `+tools`)."""


@dataclass
class EvalPrompt:
    messages: list[dict]
    """The prompt, with any /think or /no_think flag taken out of its system message: the mode comes from the
    evaluation, not from the row."""
    columns: dict
    """The row's other columns, passed to the rewards (solution, test_cases, ...)."""
    origin: str


@dataclass
class EvalInputs:
    section: EvalSection
    models: list[EvalModel]
    baseline: str | None
    """The label the differences are taken to; None: no differences."""
    prompts: list[EvalPrompt]
    rewards: list[tuple[EvalRewardSection, Callable]]
    template_name: str
    template_kwargs: dict = field(default_factory=dict)
    """Template kwargs other than enable_thinking (which each mode sets)."""
    compared_to: dict[str, str] = field(default_factory=dict)
    """Label -> the label its differences are taken to; empty: every other model to `baseline`."""
    tools: Tools | None = None
    """The tools of the models evaluated with tools (`eval.tools`), loaded and checked."""


def parse_model(spec: str) -> EvalModel:
    """`LABEL=SOURCE` or `SOURCE`; a run's model directory (runs/quickstart/sft/model) is labelled by its run."""
    label, sep, source = spec.partition("=")
    if sep and _LABEL.match(label) and source and not Path(spec).exists():
        return EvalModel(label, source)
    path = Path(spec.rstrip("/"))
    if path.name == "model" and path.parent.name:
        return EvalModel(path.parent.name, spec)
    return EvalModel(path.name or spec, spec)


def unique_labels(models: list[EvalModel]) -> list[EvalModel]:
    seen: dict[str, int] = {}
    out = []
    for model in models:
        count = seen.get(model.label, 0)
        seen[model.label] = count + 1
        out.append(model if not count else EvalModel(f"{model.label}-{count + 1}", model.source))
    return out


def prepare(section: EvalSection, functions: Sequence[Callable], models: list[EvalModel], baseline: str | None,
            template_name: str, template_kwargs: dict | None = None,
            compared_to: dict[str, str] | None = None) -> EvalInputs:
    """Check and read everything but the weights; `functions` are `section.rewards` built (`resolve.reward_functions`),
    `baseline` is the label of one of `models`, `compared_to` maps labels of `models` to the label each is compared
    with instead (a stage with its own input)."""
    if baseline is not None and baseline not in {m.label for m in models}:
        raise SmolalignError(f"eval: the baseline {baseline!r} is not one of the models")
    labels = [m.label for m in models]
    for label, base in (compared_to or {}).items():
        if label not in labels or base not in labels or label == base:
            raise SmolalignError(f"eval: --compare {label}={base}: expected two different model labels of "
                                 f"{', '.join(labels)}")
    if section.backend != "openai":
        for model in models:
            resolve_source(model.source)
    if template_name != MODEL_TEMPLATE:
        resolve_template(template_name)
    rewards = []
    for reward, function in zip(section.rewards, functions, strict=True):
        if hasattr(function, "probe"):  # a judge: its server answers now, or the evaluation does not start
            function.probe()
        rewards.append((reward, function))
    kwargs = {k: v for k, v in (template_kwargs or {}).items() if k != "enable_thinking"}
    tools = None
    if section.tools or section.environment:
        tools = eval_tools(section, template_name)
        models, compared_to = with_and_without_tools(models, compared_to or {})
    prompts = read_prompts(section, rewards)
    if tools is not None and tools.environment_factory is not None:
        probe, _ = start_environment(tools.environment_factory, prompts[0].messages, prompts[0].columns)  # reset() fits
        rewards += environment_reward(probe, [reward.name for reward, _ in rewards])
    return EvalInputs(section, models, baseline, prompts, rewards, template_name, kwargs, dict(compared_to or {}),
                      tools)


def eval_tools(section: EvalSection, template_name: str) -> Tools:
    """The evaluation's tools, loaded and checked (exit 2 naming `eval.tools`), and the template shown to render a
    tool conversation."""
    try:
        tools_section = ToolsSection(use=list(section.tools), environment=section.environment,
                                     max_turns=section.max_turns)
    except ValueError as exc:
        raise SmolalignError(f"eval.tools: {exc}") from None
    if template_name == MODEL_TEMPLATE:
        raise SmolalignError("eval.tools: the prompts are rendered by smolalign, with a template it knows renders tool "
                             "calls; give --template smollm3 (or a .jinja file)")
    check_renders_tools(resolve_template(template_name))
    return resolve_tools(tools_section)


def environment_reward(probe: Any, names: list[str]) -> list[tuple[EvalRewardSection, Callable]]:
    """The environment's own reward, as TRL makes it one in training: get_reward() of each answer's instance, in a
    row named after the class (none when the class, seen through one instance, has no get_reward)."""
    if not callable(getattr(probe, "get_reward", None)):
        return []
    name = type(probe).__name__
    if inspect.iscoroutinefunction(probe.get_reward):
        raise SmolalignError(f"eval.environment: {name}.get_reward is async; the evaluation calls it as a plain "
                             "function")
    if name in names:
        raise SmolalignError(f"eval.environment: its reward would be named {name!r}, as a reward the evaluation "
                             "already scores; rename one")

    def get_reward(environments, **_):
        return [environment.get_reward() for environment in environments]

    return [(EvalRewardSection(name), get_reward)]


def with_and_without_tools(models: list[EvalModel], compared_to: dict[str, str]):
    """Each model twice, LABEL without tools and LABEL+tools with them; LABEL+tools compared with LABEL unless
    --compare names another model for it."""
    both = [variant for model in models for variant in (model, EvalModel(f"{model.label}+tools", model.source, True))]
    return both, {**{f"{m.label}+tools": m.label for m in models}, **compared_to}


def read_prompts(section: EvalSection, rewards: list) -> list[EvalPrompt]:
    """The prompts of the data sources (weighted and seeded like `data:` sources), checked for the columns the
    rewards read and for rows a reward cannot score (math_accuracy: a gold answer that does not parse)."""
    rows = source_prompts(section.data, section.seed).train
    try:
        check_reward_columns([(r.name, fn) for r, fn in rewards], rows.column_names)
    except USER_ERRORS as exc:
        raise SmolalignError(f"eval.data: {exc}") from None
    prompts, flagged = [], 0
    for row in rows:
        messages, had_flag = without_mode_flags(as_messages(row["prompt"], row[ORIGIN]))
        flagged += had_flag
        columns = {k: v for k, v in row.items() if k not in ("prompt", ORIGIN)}
        prompts.append(EvalPrompt(messages, columns, row[ORIGIN]))
        if section.max_prompts is not None and len(prompts) == section.max_prompts:
            break
    if not prompts:
        raise SmolalignError("eval: the data holds no prompts")
    check_reward_rows([(r.name, fn) for r, fn in rewards], [{**p.columns, ORIGIN: p.origin} for p in prompts])
    columns = [*(c for c in rows.column_names if c != ORIGIN), "chat_template_kwargs"]
    for reward, function in rewards:
        check_team_reward(reward.name, function, columns, {"prompt": prompts[0].messages, **prompts[0].columns},
                          text_completions=True)
    if flagged:
        print(f"note: {flagged} prompt(s) carried /think or /no_think in their system message; the flag is taken out "
              "and each mode is set by the evaluation", file=sys.stderr)
    return prompts
