"""`smolalign po pairs` for a recipe with `pairs.graded:`: one model (by default the policy) samples `n` answers
per prompt, the scorer (rewards from the registry, weighted) scores every candidate, and the best-scored answer is
chosen against the worst (or a random lower one); with `unpaired: true` every scored candidate becomes a KTO row
labelled by a threshold.

Each prompt is sampled in its own think mode (`rewards.think_mode.row_mode`: a system flag, then the row's
chat_template_kwargs, then the sampler's `think`, then the template kwargs). Generation is resumable through the
same work log as strong-vs-weak pairs (keyed by what the samples depend on, so a new scorer, margin or pick re-uses
them), the output is written atomically, and every row records the sampler, the scorer and each candidate's scores.
"""

import random
import sys
from pathlib import Path

from rewards.text import whole_turns
from rewards.think_mode import row_mode
from smolalign.errors import SmolalignError
from smolalign.inputs.pairs_file import config_key, pairs_path
from smolalign.models.load import load_tokenizer
from smolalign.pairs.backends import make_generator
from smolalign.pairs.output import (
    PARTIAL_SUFFIX,
    REPORT_SUFFIX,
    WorkLog,
    is_up_to_date,
    write_json_atomically,
    write_jsonl_atomically,
)
from smolalign.pairs.prompts import Prompt, drop_long_prompts, load_prompts
from smolalign.pairs.report import (
    counts_text,
    length_report,
    render_graded_report,
    score_distribution,
    unpaired_lengths,
)
from smolalign.pairs.scorer import Scorer, pick, run_scorer
from smolalign.pairs.sides import answer_fields, exclusion, opener_of
from smolalign.progress import Progress
from smolalign.recipe.schema import Recipe
from smolalign.resolve import Run

SIDE = "graded"


def generate_graded(run: Run, *, force: bool = False) -> Path:
    """Sample, score and pick (or reuse) the recipe's graded pairs; returns the pairs file."""
    recipe = run.recipe
    pairs = recipe.pairs
    out = pairs_path(recipe)
    if not force and is_up_to_date(recipe):
        print(f"pairs: up to date ({out})")
        return out
    scorer = run_scorer(run, "scorer")
    prompt_set = load_prompts(recipe)
    scorer.check(prompt_set.prompts)
    tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, run.source())
    drop_long_prompts(prompt_set, pairs.max_prompt_tokens, tokenizer, template, recipe.template.kwargs)
    prompts = prompt_set.prompts
    log = WorkLog(Path(str(out) + PARTIAL_SUFFIX), config_key(recipe, generation_only=True))
    generated = _sample(recipe, prompts, log)
    try:
        records = [log.get(p.key, SIDE) for p in prompts]
        rows, counts, scores = _grade(recipe, prompts, records, scorer, config_key(recipe))
    finally:
        scorer.close()
    if not rows:
        raise SmolalignError(f"pairs: no prompt gave a usable pair ({counts_text(counts['dropped'])}; candidates: "
                             f"{counts_text(counts['candidates'])}); lower pairs.graded.margin, raise n or "
                             "max_new_tokens, or check the scorer")
    graded = pairs.graded
    report = {"config": config_key(recipe), "output": str(out), "mode": "graded",
              "prompts": {**prompt_set.counts, "used": len(prompts)}, "generated": {SIDE: generated},
              "candidates": counts["candidates"], "dropped": counts["dropped"], "scores": scores,
              "scorer": scorer.describe(), "n": graded.n, "pick": graded.pick, "margin": graded.margin,
              "unpaired": graded.unpaired, "rows": len(rows),
              "lengths": unpaired_lengths(rows, tokenizer) if graded.unpaired else length_report(rows, tokenizer)}
    write_jsonl_atomically(out, rows)
    write_json_atomically(Path(str(out) + REPORT_SUFFIX), report)
    log.path.unlink(missing_ok=True)
    print(render_graded_report(report))
    return out


def prompt_mode(prompt: Prompt, kwargs: dict) -> str:
    """The prompt's think mode, by the one rule, over the sampler's template kwargs."""
    own = prompt.columns.get("chat_template_kwargs")
    return row_mode(prompt.messages, {**kwargs, **(own if isinstance(own, dict) else {})})


def _sample(recipe: Recipe, prompts: list[Prompt], log: WorkLog) -> dict:
    """The candidates prompts still lack, `batch_size` prompts × n samples per call, logged batch by batch."""
    graded = recipe.pairs.graded
    section, n = graded.sampler, graded.n
    todo = [p for p in prompts if not log.has(p.key, SIDE)]
    counts = {"generated": len(todo), "reused": len(prompts) - len(todo)}
    if not todo:
        return counts
    print(f"pairs: sampling {n} answers for each of {len(todo)} prompts with {section.source} ({section.backend}); "
          f"{counts['reused']} reused", file=sys.stderr)
    generator = make_generator("pairs.graded.sampler", section, recipe.template.name, recipe.template.kwargs)
    provenance = generator.provenance()
    try:
        with Progress(len(todo) * n, "pairs: graded", "answers") as progress:
            for start in range(0, len(todo), section.batch_size):
                batch = todo[start:start + section.batch_size]
                seed = recipe.pairs.seed * 1_000_003 + int(batch[0].key[:8], 16) % 1_000_000
                by_mode: dict[str, list[Prompt]] = {}
                for prompt in batch:
                    by_mode.setdefault(prompt_mode(prompt, generator.kwargs), []).append(prompt)
                records = []
                for mode, group in by_mode.items():
                    samples = generator.sample(group, seed, n, {**generator.kwargs, "enable_thinking": mode == "think"})
                    records += [{"key": p.key, "side": SIDE, "mode": mode, "seed": seed, "generator": provenance,
                                 "answers": [answer_fields(a) for a in answers]}
                                for p, answers in zip(group, samples, strict=True)]
                log.append(records)
                progress.update(len(batch) * n)
    finally:
        generator.close()
    return counts


def _grade(recipe: Recipe, prompts: list[Prompt], records: list[dict], scorer: Scorer, key: str
           ) -> tuple[list, dict, dict]:
    """Score every usable candidate in one pass through the scorer, then pick per prompt."""
    graded = recipe.pairs.graded
    candidates = {"sampled": 0, "empty_answer": 0, "cut_off": 0, "unscored": 0, "scored": 0}
    usable = []  # (prompt index, candidate index)
    for i, record in enumerate(records):
        for j, answer in enumerate(record["answers"]):
            candidates["sampled"] += 1
            reason = exclusion(answer)
            if reason:
                candidates[reason] += 1
            else:
                usable.append((i, j))
    names = sorted({c for p in prompts for c in p.columns} - {"chat_template_kwargs"})
    columns = {name: [prompts[i].columns.get(name) for i, _ in usable] for name in names}
    columns["prompts"] = [prompts[i].messages for i, _ in usable]
    columns["chat_template_kwargs"] = [{"enable_thinking": records[i]["mode"] == "think"} for i, _ in usable]
    answers = [records[i]["answers"][j] for i, j in usable]
    if answers and all(a.get("ids") is not None for a in answers):
        columns["completion_ids"] = [a["ids"] for a in answers]
    openers = {mode: opener_of(recipe, graded.sampler, mode) for mode in ("think", "no_think")}
    texts = [whole_turns(records[i]["answers"][j]["text"], openers[records[i]["mode"]]) for i, j in usable]
    totals, parts = scorer.score(texts, columns) if usable else ([], [])
    scores = [[None] * len(r["answers"]) for r in records]
    details = [[{"excluded": exclusion(a), "tokens": a["tokens"]} for a in r["answers"]] for r in records]
    for (i, j), total, part in zip(usable, totals, parts, strict=True):
        scores[i][j] = total
        details[i][j].update(score=total, scores=part)
        candidates["unscored" if total is None else "scored"] += 1
    rows, dropped, picked = [], {"tie": 0, "unscored": 0}, []
    for prompt, record, prompt_scores, detail in zip(prompts, records, scores, details, strict=True):
        choice = pick(prompt_scores, graded.pick, graded.margin, random.Random(f"{recipe.pairs.seed}:{prompt.key}"))
        if isinstance(choice, str):
            dropped[choice] += 1
            continue
        picked.append((prompt_scores[choice[0]], prompt_scores[choice[1]]))
        provenance = {"sampler": {**record["generator"], "seed": record["seed"], "mode": record["mode"]},
                      "scorer": scorer.provenance(), "candidates": detail, "prompt_origin": prompt.origin,
                      "config": key}
        rows += (_unpaired_rows(prompt, record, prompt_scores, provenance, graded.threshold) if graded.unpaired
                 else [_pair_row(prompt, record, choice, provenance)])
    flat = [s for row in scores for s in row if s is not None]
    return rows, {"candidates": candidates, "dropped": dropped}, score_distribution(flat, picked)


def _turn(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def _pair_row(prompt: Prompt, record: dict, choice: tuple[int, int], provenance: dict) -> dict:
    chosen, rejected = choice
    return {"prompt": prompt.messages, "chosen": _turn(record["answers"][chosen]["text"]),
            "rejected": _turn(record["answers"][rejected]["text"]),
            "chat_template_kwargs": {"enable_thinking": record["mode"] == "think"},
            "provenance": {**provenance, "chosen_index": chosen, "rejected_index": rejected}}


def _unpaired_rows(prompt: Prompt, record: dict, scores: list, provenance: dict, threshold: float) -> list[dict]:
    """One row per scored candidate; an answer written twice is kept once."""
    rows, seen = [], set()
    for index, (answer, score) in enumerate(zip(record["answers"], scores, strict=True)):
        if score is None or answer["text"] in seen:
            continue
        seen.add(answer["text"])
        rows.append({"prompt": prompt.messages, "completion": _turn(answer["text"]), "label": score >= threshold,
                     "chat_template_kwargs": {"enable_thinking": record["mode"] == "think"},
                     "provenance": {**provenance, "candidate_index": index, "score": score}})
    return rows
