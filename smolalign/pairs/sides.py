"""The two sides of strong-vs-weak pairs: generating one side's answers into the work log, batch by batch, and the
pair row written from a chosen and a rejected answer with their provenance (used by `build` and `verified`); and
what every generated answer is logged as and excluded for (graded pairs too)."""

import sys

from rewards.think_mode import row_mode
from smolalign.pairs.backends import make_generator, template_kwargs
from smolalign.pairs.output import WorkLog
from smolalign.pairs.prompts import Prompt
from smolalign.progress import Progress
from smolalign.recipe.schema import Recipe
from smolalign.templates.registry import MODE_KWARG, MODEL_TEMPLATE, resolve_template
from smolalign.templates.render import opened_think


def answer_fields(answer) -> dict:
    return {"text": answer.text, "finished": answer.finished, "tokens": answer.tokens, "ids": answer.ids}


def exclusion(answer: dict) -> str | None:
    """Why a logged answer can be neither chosen nor rejected: empty, or cut off by max_new_tokens."""
    if not answer["text"].strip():
        return "empty_answer"
    return None if answer["finished"] else "cut_off"


def generate_side(recipe: Recipe, side: str, prompts: list[Prompt], log: WorkLog, samples: int = 1) -> dict:
    """Generate the answers `side` still lacks, one batch at a time, each batch logged before the next starts. One
    answer per prompt is logged as the record's own fields; `samples` > 1 are logged as its `answers`."""
    section = getattr(recipe.pairs, side)
    todo = [p for p in prompts if not log.has(p.key, side)]
    counts = {"generated": len(todo), "reused": len(prompts) - len(todo)}
    if not todo:
        return counts
    each = f" ({samples} per prompt)" if samples > 1 else ""
    print(f"pairs: {side} ({section.source}, {section.backend}): {len(todo)} to generate{each}, {counts['reused']} "
          "reused", file=sys.stderr)
    generator = make_generator(f"pairs.{side}", section, recipe.template.name, recipe.template.kwargs)
    provenance = generator.provenance()
    try:
        with Progress(len(todo) * samples, f"pairs: {side}", "answers") as progress:
            for start in range(0, len(todo), section.batch_size):
                batch = todo[start:start + section.batch_size]
                seed = recipe.pairs.seed * 1_000_003 + int(batch[0].key[:8], 16) % 1_000_000
                drawn = generator.sample(batch, seed, samples)
                log.append([{"key": p.key, "side": side, "seed": seed, "generator": provenance,
                             **(answer_fields(answers[0]) if samples == 1 else
                                {"answers": [answer_fields(a) for a in answers]})}
                            for p, answers in zip(batch, drawn, strict=True)])
                progress.update(len(batch) * samples)
    finally:
        generator.close()
    return counts


def pair_row(prompt: Prompt, chosen: dict, rejected: dict, think: bool | None, key: str) -> dict:
    """A pair from two logged answers (each with its side's generator, seed and token count)."""
    provenance = {side: {**record["generator"], "seed": record["seed"], "tokens": record["tokens"]}
                  for side, record in (("strong", chosen), ("weak", rejected))}
    return {
        "prompt": prompt.messages,
        "chosen": [{"role": "assistant", "content": chosen["text"]}],
        "rejected": [{"role": "assistant", "content": rejected["text"]}],
        # The mode the policy's template will render the pair in: a flag in the prompt wins over `think`.
        "chat_template_kwargs": {} if think is None else {
            "enable_thinking": row_mode(prompt.messages, {"enable_thinking": think}) == "think"},
        "provenance": {**provenance, "prompt_origin": prompt.origin, "config": key},
    }


def side_mode(recipe: Recipe, side: str) -> str:
    """The mode a side generates in: its `think`, else the recipe's template kwargs, else the template's default."""
    return row_mode(None, side_kwargs(recipe, getattr(recipe.pairs, side)))


def warn_sides_in_other_modes(recipe: Recipe) -> None:
    """A pair trains both answers under the mode of the strong side (pair_row), so a weak side that generates in the
    other mode gives rejected answers sampled after another prompt than the one they are trained under: warned, as
    preferring reasoning over none can be meant."""
    if recipe.pairs is None or recipe.pairs.strong is None:
        return
    strong, weak = side_mode(recipe, "strong"), side_mode(recipe, "weak")
    if strong != weak:
        print(f"warning: pairs.strong generates in {strong} mode and pairs.weak in {weak} mode; each pair trains "
              f"both answers under the {strong} prompt, so the rejected answers are trained after a prompt they "
              "were not sampled from. Set the same think: on both sides unless that is what you mean",
              file=sys.stderr)


def side_kwargs(recipe: Recipe, section) -> dict:
    """The template kwargs a side generates with: the recipe's, with its `think`."""
    return template_kwargs(section, recipe.template.kwargs)


def opener_of(recipe: Recipe, section, mode: str | None = None) -> str:
    """The `<think>\n` a side's template opens in its generation prompt (`templates.render.opened_think`; in `mode`
    when given), to put back in front of each answer before it is scored, as rl's rewards and eval read answers;
    "" for a server's or the model's own template, which is not read here."""
    name = section.template or recipe.template.name
    if section.backend == "openai" or name == MODEL_TEMPLATE:
        return ""
    kwargs = side_kwargs(recipe, section)
    if mode is not None:
        kwargs[MODE_KWARG] = mode == "think"
    return opened_think(resolve_template(name), kwargs)
