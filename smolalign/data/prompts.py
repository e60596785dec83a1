"""Prompt rows for every stage that generates (rl, distillation, pairs, eval), read through the data mixture so that
every documented data key works for them too (`sources[].weight`, `eval_split`, `seed`, `columns`).

`smolalign rl recipes/quickstart/rl.yaml --dry-run` reads its prompts here.
"""

from dataclasses import dataclass

from rewards.think_mode import flag_mode, row_mode, with_mode_flag
from smolalign.data.mixture import ORIGIN, PROMPT_FORMAT, build_mixture, decoded
from smolalign.data.rows import messages_problem
from smolalign.errors import SmolalignError
from smolalign.recipe.data_schema import DataSection, SourceSection
from smolalign.templates.registry import MODE_KWARG, MODEL_TEMPLATE, resolve_template


@dataclass
class PromptRows:
    train: object
    """datasets.Dataset: `prompt` (messages), `_origin` ("file#row") and every other column of the sources."""
    eval: object | None
    """The held-out rows (data.eval_split), in the same shape; None without a split."""


def as_messages(prompt, where: str) -> list[dict]:
    """A prompt as messages: a string is one user message; messages must end with a user message."""
    prompt = decoded(prompt)
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        problem = messages_problem(prompt, "prompt") if prompt is not None else "prompt is missing"
        if problem:
            raise SmolalignError(f"prompt row {where}: {problem}")
        messages = [{k: v for k, v in m.items() if v is not None} for m in prompt]
    if not messages or messages[-1].get("role") != "user":
        raise SmolalignError(f"prompt row {where}: the prompt must end with a user message")
    return messages


def read_prompt_rows(data: DataSection) -> PromptRows:
    """The mixture of prompt sources (weighted, seeded, split), each prompt as messages."""
    mixture = build_mixture(data, PROMPT_FORMAT)

    def normalise(row):
        return {"prompt": as_messages(row["prompt"], row[ORIGIN]),
                **{k: decoded(v) for k, v in row.items() if k not in ("prompt", ORIGIN)}}

    def convert(dataset):
        return None if dataset is None else dataset.map(normalise, keep_in_memory=True)

    return PromptRows(convert(mixture.train), convert(mixture.eval))


def source_prompts(sources: list[SourceSection], seed: int = 0, system_prompt: str | None = None) -> PromptRows:
    """Prompt rows of a list of sources (pairs.prompts, eval.data), weighted and seeded as `data:` would be."""
    return read_prompt_rows(DataSection(sources=list(sources), seed=seed, system_prompt=system_prompt))


def with_think_modes(dataset, template_kwargs: dict, template_reads_flags: bool, template_name: str,
                     rendered_kwargs: dict | None = None, template_has_modes: bool = True):
    """Each row's mode carried into its prompt: TRL renders every prompt with the same template kwargs
    (`rendered_kwargs`; `template_kwargs` when None, and none at all for trainers that pass none), so a row whose
    mode (its chat_template_kwargs over `template_kwargs`) differs from theirs gets the /think or /no_think flag
    that switches it (refused for a template with modes that reads no flag), and every row's `chat_template_kwargs`
    column holds its effective mode, which the format and length rewards read. A template without modes renders
    every row alike: a row keeps the mode the data or the recipe states, and none when neither states one, so the
    rewards' own default applies."""
    rendered = template_kwargs if rendered_kwargs is None else rendered_kwargs
    default, recipe_mode = row_mode(None, rendered), row_mode(None, template_kwargs)
    instructions = rendered.get("custom_instructions")
    instructions = instructions if isinstance(instructions, str) else None

    def carry(row):
        messages = row["prompt"]
        kwargs = row.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise SmolalignError(f"prompt row {row[ORIGIN]}: chat_template_kwargs must be a mapping, got {kwargs!r}")
        stated = {**template_kwargs, **kwargs}
        mode = row_mode(messages, stated)
        own = mode != (default if template_has_modes else recipe_mode) and flag_mode(messages) is None
        if own and not template_reads_flags:
            raise SmolalignError(
                f"prompt row {row[ORIGIN]}: chat_template_kwargs.enable_thinking asks for {mode} mode, which "
                f"template {template_name} cannot switch per row (it reads no /think or /no_think flag); "
                "remove the key from the data, set template.kwargs.enable_thinking for every row, or use "
                "template: smollm3")
        if not template_has_modes:  # every row renders alike: the mode is only what the rewards read
            said = flag_mode(messages) is not None or stated.get(MODE_KWARG) is not None
            return {"prompt": messages, "chat_template_kwargs": {MODE_KWARG: mode == "think"} if said else {}}
        if own:
            messages = with_mode_flag(messages, mode, instructions)
        return {"prompt": messages, "chat_template_kwargs": {MODE_KWARG: mode == "think"}}

    return dataset.map(carry, keep_in_memory=True).remove_columns([ORIGIN])


def recipe_prompts(recipe, rows: PromptRows | None = None, rendered_kwargs: dict | None = None) -> PromptRows:
    """The prompts of an rl or distillation recipe (`data:`, or `rows` read from it already), with each row's think
    mode carried into its prompt (`rendered_kwargs`: the template kwargs the trainer renders with, when not the
    recipe's own)."""
    name = recipe.template.name
    template = None if name == MODEL_TEMPLATE else resolve_template(name)  # the model's: known once it is loaded
    reads_flags = template is not None and template.reads_mode_flags
    rows = rows or read_prompt_rows(recipe.data)

    def carry(dataset):
        return None if dataset is None else with_think_modes(dataset, recipe.template.kwargs, reads_flags, name,
                                                             rendered_kwargs, template is None or template.is_hybrid)

    return PromptRows(carry(rows.train), carry(rows.eval))
