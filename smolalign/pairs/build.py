"""`smolalign po pairs`: generate chosen answers with the strong model and rejected ones with the weak model,
filter what would teach nothing or the wrong thing (with `pairs.verifier:`, also what a verifier says is a wrong
chosen or a right rejected answer: `verified`), and write the pairs with their provenance (graded pairs, one
model's candidates ranked by a scorer, are in `graded`).

Generation is resumable (answers go to a work log batch by batch; a rerun generates only what is missing) and the
pairs file is written atomically, with a report of every filter's count and of the chosen vs rejected lengths
(length bias is the classic failure of strong-vs-weak pairs).
"""

from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.inputs.pairs_file import config_key, pairs_path
from smolalign.models.load import load_tokenizer
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
from smolalign.pairs.scorer import run_scorer
from smolalign.pairs.sides import generate_side, pair_row
from smolalign.pairs.thresholds import check_thresholds
from smolalign.pairs.verified import verified_pairs
from smolalign.recipe.schema import Recipe
from smolalign.resolve import Run

SIDES = ("strong", "weak")


def generate_pairs(run: Run, *, force: bool = False) -> Path:
    """Generate (or reuse) the recipe's pairs; returns the pairs file."""
    recipe = run.recipe
    pairs = recipe.pairs
    if pairs is None:
        raise SmolalignError(f"recipe {recipe.source} has no pairs: section to generate from")
    check_thresholds(run)  # `po pairs` comes here without the po stage's checks
    if pairs.graded is not None:
        return generate_graded(run, force=force)
    out = pairs_path(recipe)
    if not force and is_up_to_date(recipe):
        print(f"pairs: up to date ({out})")
        return out
    key = config_key(recipe)
    verifier = run_scorer(run, "verifier") if pairs.verifier else None
    prompt_set = load_prompts(recipe)
    if verifier is not None:
        verifier.check(prompt_set.prompts)
    tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, run.source())
    drop_long_prompts(prompt_set, pairs.max_prompt_tokens, tokenizer, template, recipe.template.kwargs)
    prompts = prompt_set.prompts
    log = WorkLog(Path(str(out) + PARTIAL_SUFFIX), key)
    if verifier is None:
        progress, rows, dropped = _unverified_pairs(recipe, prompts, log, key)
    else:
        try:
            progress, rows, dropped = verified_pairs(recipe, prompts, log, verifier, key)
        finally:
            verifier.close()
    if not rows:
        hint = ("raise verifier.strong_samples or max_new_tokens, or check the generators and the verifier"
                if verifier else "raise max_new_tokens or check the generators")
        raise SmolalignError(f"pairs: every pair was filtered out ({counts_text(dropped)}); {hint}")
    lengths = length_report(rows, tokenizer)
    report = {"config": key, "output": str(out), "prompts": {**prompt_set.counts, "used": len(prompts)},
              "generated": progress, "filtered": dropped, "pairs": len(rows), "lengths": lengths}
    if verifier is not None:
        report["verifier"] = {"rewards": verifier.describe(), "threshold": pairs.verifier.threshold,
                              "strong_samples": pairs.verifier.strong_samples}
    write_jsonl_atomically(out, rows)
    write_json_atomically(Path(str(out) + REPORT_SUFFIX), report)
    log.path.unlink(missing_ok=True)
    print(render_report(report))
    return out


def _unverified_pairs(recipe: Recipe, prompts: list, log: WorkLog, key: str) -> tuple[dict, list[dict], dict]:
    """Both sides answer every prompt; a pair is kept unless an answer is empty, cut off or the two are the same."""
    progress = {side: generate_side(recipe, side, prompts, log) for side in SIDES}
    rows, dropped = [], {"empty_answer": 0, "cut_off": 0, "identical": 0}
    for prompt in prompts:
        chosen, rejected = log.get(prompt.key, "strong"), log.get(prompt.key, "weak")
        reason = _filter_reason(chosen, rejected)
        if reason:
            dropped[reason] += 1
            continue
        rows.append(pair_row(prompt, chosen, rejected, recipe.pairs.strong.think, key))
    return progress, rows, dropped


def _filter_reason(chosen: dict, rejected: dict) -> str | None:
    if not chosen["text"].strip() or not rejected["text"].strip():
        return "empty_answer"
    if not chosen["finished"] or not rejected["finished"]:
        return "cut_off"
    if chosen["text"].strip() == rejected["text"].strip():
        return "identical"
    return None


def render_report(report: dict) -> str:
    prompts, lengths = report["prompts"], report["lengths"]
    lines = [
        f"pairs: {prompts['read']} prompts read, {prompts['duplicate']} duplicate, "
        f"{prompts.get('over_length_budget', 0)} over the length budget, {prompts['used']} used",
        "  " + "; ".join(f"{side}: {c['generated']} generated, {c['reused']} reused"
                         for side, c in report["generated"].items()),
        *([f"  verifier: {report['verifier']['rewards']}, right at >= {report['verifier']['threshold']:g}; strong "
           f"draws up to {report['verifier']['strong_samples']} answers per prompt whose weak answer is wrong"]
          if "verifier" in report else []),
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
