"""`smolalign po pairs`: generate chosen answers with the strong model and rejected ones with the weak model,
filter what would teach nothing or the wrong thing, and write the pairs with their provenance (graded pairs, one
model's candidates ranked by a scorer, are in `graded`).

Generation is resumable (answers go to a work log batch by batch; a rerun generates only what is missing) and the
pairs file is written atomically, with a report of every filter's count and of the chosen vs rejected lengths
(length bias is the classic failure of strong-vs-weak pairs).
"""

import sys
from pathlib import Path

from rewards.think_mode import row_mode
from smolalign.errors import SmolalignError
from smolalign.inputs.pairs_file import config_key, pairs_path
from smolalign.models.load import load_tokenizer
from smolalign.pairs.backends import make_generator
from smolalign.pairs.graded import generate_graded
from smolalign.pairs.output import (
    PARTIAL_SUFFIX,
    REPORT_SUFFIX,
    WorkLog,
    is_up_to_date,
    write_json_atomically,
    write_jsonl_atomically,
)
from smolalign.pairs.prompts import drop_long_prompts, load_prompts
from smolalign.pairs.report import counts_text, length_report
from smolalign.progress import Progress
from smolalign.recipe.schema import Recipe
from smolalign.resolve import Run

SIDES = ("strong", "weak")


def generate_pairs(run: Run, *, force: bool = False) -> Path:
    """Generate (or reuse) the recipe's pairs; returns the pairs file."""
    recipe = run.recipe
    pairs = recipe.pairs
    if pairs is None:
        raise SmolalignError(f"recipe {recipe.source} has no pairs: section to generate from")
    if pairs.graded is not None:
        return generate_graded(run, force=force)
    out = pairs_path(pairs)
    if not force and is_up_to_date(recipe):
        print(f"pairs: up to date ({out})")
        return out
    key = config_key(pairs)
    prompt_set = load_prompts(pairs)
    tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, run.source())
    drop_long_prompts(prompt_set, pairs.max_prompt_tokens, tokenizer, template, recipe.template.kwargs)
    prompts = prompt_set.prompts
    log = WorkLog(Path(str(out) + PARTIAL_SUFFIX), key)
    progress = {side: _generate_side(recipe, side, prompts, log) for side in SIDES}

    rows, dropped = [], {"empty_answer": 0, "cut_off": 0, "identical": 0}
    for prompt in prompts:
        chosen, rejected = log.get(prompt.key, "strong"), log.get(prompt.key, "weak")
        reason = _filter_reason(chosen, rejected)
        if reason:
            dropped[reason] += 1
            continue
        rows.append(_pair_row(prompt, chosen, rejected, pairs.strong.think, key))
    if not rows:
        raise SmolalignError(f"pairs: every pair was filtered out ({counts_text(dropped)}); raise max_new_tokens or "
                             "check the generators")
    lengths = length_report(rows, tokenizer)
    report = {"config": key, "output": str(out), "prompts": {**prompt_set.counts, "used": len(prompts)},
              "generated": progress, "filtered": dropped, "pairs": len(rows), "lengths": lengths}
    write_jsonl_atomically(out, rows)
    write_json_atomically(Path(str(out) + REPORT_SUFFIX), report)
    log.path.unlink(missing_ok=True)
    print(render_report(report))
    return out


def _generate_side(recipe: Recipe, side: str, prompts: list, log: WorkLog) -> dict:
    """Generate the answers `side` still lacks, one batch at a time, each batch logged before the next starts."""
    section = getattr(recipe.pairs, side)
    todo = [p for p in prompts if not log.has(p.key, side)]
    counts = {"generated": len(todo), "reused": len(prompts) - len(todo)}
    if not todo:
        return counts
    print(f"pairs: {side} ({section.source}, {section.backend}): {len(todo)} to generate, {counts['reused']} "
          "reused", file=sys.stderr)
    generator = make_generator(f"pairs.{side}", section, recipe.template.name, recipe.template.kwargs)
    provenance = generator.provenance()
    try:
        with Progress(len(todo), f"pairs: {side}", "answers") as progress:
            for start in range(0, len(todo), section.batch_size):
                batch = todo[start:start + section.batch_size]
                seed = recipe.pairs.seed * 1_000_003 + int(batch[0].key[:8], 16) % 1_000_000
                answers = generator.generate(batch, seed)
                log.append([{"key": p.key, "side": side, "text": a.text, "finished": a.finished, "tokens": a.tokens,
                             "seed": seed, "generator": provenance} for p, a in zip(batch, answers, strict=True)])
                progress.update(len(batch))
    finally:
        generator.close()
    return counts


def _filter_reason(chosen: dict, rejected: dict) -> str | None:
    if not chosen["text"].strip() or not rejected["text"].strip():
        return "empty_answer"
    if not chosen["finished"] or not rejected["finished"]:
        return "cut_off"
    if chosen["text"].strip() == rejected["text"].strip():
        return "identical"
    return None


def _pair_row(prompt, chosen: dict, rejected: dict, think: bool | None, key: str) -> dict:
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


def render_report(report: dict) -> str:
    prompts, lengths = report["prompts"], report["lengths"]
    lines = [
        f"pairs: {prompts['read']} prompts read, {prompts['duplicate']} duplicate, "
        f"{prompts.get('over_length_budget', 0)} over the length budget, {prompts['used']} used",
        "  " + "; ".join(f"{side}: {c['generated']} generated, {c['reused']} reused"
                         for side, c in report["generated"].items()),
        f"  filtered: {counts_text(report['filtered'])} -> {report['pairs']} pairs",
        f"  lengths (policy tokens): chosen mean {lengths['chosen_mean']:.1f} (median {lengths['chosen_median']:g}), "
        f"rejected mean {lengths['rejected_mean']:.1f} (median {lengths['rejected_median']:g}); chosen longer in "
        f"{lengths['chosen_longer_share']:.0%} of pairs",
    ]
    if lengths["length_bias"]:
        lines.append(f"  warning: length bias: chosen answers are {lengths['mean_ratio']:.2f}x as long as rejected "
                     "ones on average; the policy may learn length instead of quality")
    lines.append(f"wrote {report['output']}")
    return "\n".join(lines)
