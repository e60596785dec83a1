"""Everything an evaluation checks before a model loads: models and labels, template, rewards, prompts and the
columns the rewards read. A problem here is a SmolalignError (exit 2) before any weights are read."""

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.eval_schema import EvalRewardSection, EvalSection

_FLAG_WORDS = re.compile(r"(?<!\S)/(no_think|think)(?!\S)")
_LABEL = re.compile(r"^[\w.-]+$")


@dataclass(frozen=True)
class EvalModel:
    label: str
    """The model's column in the tables (a run's name for runs/<name>/model)."""
    source: str


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


def prepare(section: EvalSection, models: list[EvalModel], baseline: str | None, template_name: str,
            template_kwargs: dict | None = None) -> EvalInputs:
    """Check and read everything but the weights; `baseline` is the label of one of `models`."""
    from rewards.registry import resolve_reward
    from smolalign.models.sources import resolve_source
    from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template

    if baseline is not None and baseline not in {m.label for m in models}:
        raise SmolalignError(f"eval: the baseline {baseline!r} is not one of the models")
    if section.backend != "openai":
        for model in models:
            resolve_source(model.source)
    if template_name != MODEL_TEMPLATE:
        resolve_template(template_name)
    rewards = []
    for reward in section.rewards:
        rewards.append((reward, resolve_reward(reward.name, reward.params)))
    kwargs = {k: v for k, v in (template_kwargs or {}).items() if k != "enable_thinking"}
    return EvalInputs(section, models, baseline, read_prompts(section, rewards), rewards, template_name, kwargs)


def read_prompts(section: EvalSection, rewards: list) -> list[EvalPrompt]:
    """The prompts of every data source, each source checked for the columns the rewards read."""
    from rewards.registry import check_reward_columns
    from smolalign.data.sources import load_source
    from smolalign.pairs.prompts import as_messages

    prompts, flagged = [], 0
    for source in section.data:
        dataset = load_source(source)
        try:
            check_reward_columns([(r.name, fn) for r, fn in rewards], dataset.column_names)
        except SmolalignError as exc:
            raise SmolalignError(f"data source {source.path}: {exc}") from None
        for index, row in enumerate(dataset):
            where = f"{source.path}#{index}"
            messages, had_flag = without_mode_flags(as_messages(row, where))
            flagged += had_flag
            columns = {k: v for k, v in row.items() if k not in ("prompt", "messages")}
            prompts.append(EvalPrompt(messages, columns, where))
            if section.max_prompts is not None and len(prompts) == section.max_prompts:
                break
        if section.max_prompts is not None and len(prompts) == section.max_prompts:
            break
    if not prompts:
        raise SmolalignError("eval: the data holds no prompts")
    if flagged:
        print(f"note: {flagged} prompt(s) carried /think or /no_think in their system message; the flag is taken out "
              "and each mode is set by the evaluation", file=sys.stderr)
    return prompts


def without_mode_flags(messages: list[dict]) -> tuple[list[dict], bool]:
    """The messages without /think or /no_think words in the first system message (dropped if nothing is left)."""
    if not messages or messages[0].get("role") != "system" or not isinstance(messages[0].get("content"), str):
        return messages, False
    content = messages[0]["content"]
    stripped = re.sub(r"[ \t]{2,}", " ", _FLAG_WORDS.sub("", content)).strip()
    if stripped == content.strip():
        return messages, False
    rest = messages[1:]
    return ([{**messages[0], "content": stripped}, *rest] if stripped else rest), True
