"""The prompts pairs are generated for: read from datasets, normalised to messages, de-duplicated and kept within
the length budget, each step counted for the report."""

import hashlib
import json
from dataclasses import dataclass, field

from smolalign.data.mixture import ORIGIN
from smolalign.data.prompts import as_messages, source_prompts
from smolalign.errors import SmolalignError
from smolalign.recipe.schema import Recipe
from smolalign.templates.render import render


@dataclass
class Prompt:
    key: str
    """Stable identity of the prompt (hash of its messages): what the work log and resumption go by."""
    messages: list[dict]
    origin: str
    """file#row it came from."""
    columns: dict = field(default_factory=dict)
    """The row's other columns (a gold answer, chat_template_kwargs), which rewards read."""


@dataclass
class PromptSet:
    prompts: list[Prompt]
    counts: dict[str, int] = field(default_factory=dict)


def prompt_key(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def system_prompt_of(recipe: Recipe) -> str | None:
    """The recipe's `data.system_prompt`: training puts it into each pair's prompt, so the answers are sampled under
    it too."""
    return recipe.data.system_prompt if recipe.data is not None else None


def load_prompts(recipe: Recipe) -> PromptSet:
    """Every prompt of every source of the recipe's pairs (weighted and seeded like `data:` sources), each with
    `data.system_prompt` where it has no system message (the prompt its pairs train under), first occurrence kept;
    `max_prompts` cuts the list after de-duplication."""
    pairs = recipe.pairs
    prompts, seen, counts = [], set(), {"read": 0, "duplicate": 0}
    for row in source_prompts(pairs.prompts, pairs.seed, system_prompt_of(recipe)).train:
        messages = as_messages(row["prompt"], row[ORIGIN])
        counts["read"] += 1
        key = prompt_key(messages)
        if key in seen:
            counts["duplicate"] += 1
            continue
        seen.add(key)
        columns = {k: v for k, v in row.items() if k not in ("prompt", ORIGIN)}
        prompts.append(Prompt(key, messages, row[ORIGIN], columns))
    if pairs.max_prompts is not None and len(prompts) > pairs.max_prompts:
        counts["beyond_max_prompts"] = len(prompts) - pairs.max_prompts
        prompts = prompts[:pairs.max_prompts]
    if not prompts:
        raise SmolalignError("pairs.prompts: no prompts were read")
    return PromptSet(prompts, counts)


def drop_long_prompts(prompt_set: PromptSet, limit: int | None, tokenizer, template, kwargs: dict) -> None:
    """Prompts whose templated form (with the generation prompt) exceeds `limit` tokens of the policy are dropped."""
    if limit is None:
        prompt_set.counts["over_length_budget"] = 0
        return

    specials = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    texts = [render(template, p.messages, add_generation_prompt=True, special_tokens=specials, **kwargs)[0]
             for p in prompt_set.prompts]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    kept = [p for p, n in zip(prompt_set.prompts, lengths, strict=True) if n <= limit]
    prompt_set.counts["over_length_budget"] = len(prompt_set.prompts) - len(kept)
    prompt_set.prompts = kept
    if not kept:
        raise SmolalignError(f"pairs.max_prompt_tokens {limit}: every prompt is longer than that")
