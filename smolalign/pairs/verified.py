"""Strong-vs-weak pairs checked by a verifier (`pairs.verifier:`): the weak side answers every prompt first, and a
prompt whose weak answer the verifier passes can make no pair, so the strong side never samples it; the strong side
then draws up to `strong_samples` answers per remaining prompt and the first one verified right is chosen. Every
pair's chosen answer scores at least the threshold and its rejected answer less; the rest are dropped and counted.
"""

from rewards.text import whole_turns
from rewards.think_mode import row_mode
from smolalign.pairs.output import WorkLog
from smolalign.pairs.prompts import Prompt, load_prompts
from smolalign.pairs.scorer import Scorer, run_scorer
from smolalign.pairs.sides import exclusion, generate_side, opener_of, pair_row, side_kwargs
from smolalign.recipe.schema import Recipe
from smolalign.resolve import Run

DROPPED = ("empty_answer", "cut_off", "unscored", "weak_right", "strong_never_right")
"""Why a prompt gives no verified pair, in the order the checks run."""


def verified_pairs(recipe: Recipe, prompts: list[Prompt], log: WorkLog, verifier: Scorer, key: str
                   ) -> tuple[dict, list[dict], dict]:
    """(generation counts by side, pair rows, dropped prompts by reason)."""
    pairs, threshold = recipe.pairs, recipe.pairs.verifier.threshold
    dropped = dict.fromkeys(DROPPED, 0)
    progress = {"weak": generate_side(recipe, "weak", prompts, log)}
    weak = [log.get(p.key, "weak") for p in prompts]
    weak_scores = _score(verifier, prompts, [[record] for record in weak], recipe, pairs.weak)
    open_prompts = []
    for prompt, record, (score,) in zip(prompts, weak, weak_scores, strict=True):
        reason = exclusion(record) or _weak_verdict(score, threshold)
        if reason:
            dropped[reason] += 1
        else:
            open_prompts.append((prompt, record, score))
    samples = pairs.verifier.strong_samples
    progress["strong"] = generate_side(recipe, "strong", [p for p, _, _ in open_prompts], log, samples)
    strong = [_answers(log.get(p.key, "strong")) for p, _, _ in open_prompts]
    strong_scores = _score(verifier, [p for p, _, _ in open_prompts], strong, recipe, pairs.strong)
    rows = []
    for (prompt, rejected, rejected_score), answers, scores in zip(open_prompts, strong, strong_scores, strict=True):
        right = [i for i, (answer, score) in enumerate(zip(answers, scores, strict=True))
                 if not exclusion(answer) and score is not None and score[0] >= threshold]
        if not right:
            dropped["strong_never_right"] += 1
            continue
        index = right[0]
        row = pair_row(prompt, answers[index], rejected, pairs.strong.think, key)
        row["provenance"]["strong"].update(sample=index, samples=samples)
        row["provenance"]["verifier"] = {
            "rewards": verifier.provenance(), "threshold": threshold,
            "chosen": {"score": scores[index][0], "scores": scores[index][1]},
            "rejected": {"score": rejected_score[0], "scores": rejected_score[1]}}
        rows.append(row)
    return progress, rows, dropped


def verifier_plan_row(run: Run) -> str:
    """The plan's line for the verifier, after checking it can score the prompts' rows (the columns its rewards read,
    a gold answer that parses) before anything loads. Its rewards stay open for the pairs' generation."""
    section = run.recipe.pairs.verifier
    verifier = run_scorer(run, "verifier")
    verifier.check(load_prompts(run.recipe).prompts)
    budget = (f"strong draws up to {section.strong_samples} answers for each prompt whose weak answer fails"
              if section.strong_samples > 1 else "strong answers each prompt whose weak answer fails")
    return (f"{verifier.describe()}: a pair's chosen answer scores >= {section.threshold:g}, its rejected one less; "
            f"weak answers first, {budget}")


def _answers(record: dict) -> list[dict]:
    """A logged strong record's answers, each carrying the record's generator and seed (as a pair row needs)."""
    answers = record["answers"] if "answers" in record else [record]
    return [{**answer, "generator": record["generator"], "seed": record["seed"]} for answer in answers]


def _weak_verdict(score: tuple | None, threshold: float) -> str | None:
    """Why a weak answer cannot be rejected: the verifier could not score it, or scored it right."""
    if score is None:
        return "unscored"
    return "weak_right" if score[0] >= threshold else None


def _score(verifier: Scorer, prompts: list[Prompt], answers: list[list[dict]], recipe: Recipe, side
           ) -> list[list[tuple[float, dict] | None]]:
    """(weighted sum, {reward: value}) for every usable answer, None for one excluded or unscorable: one pass of
    the verifier over all of them, with the prompt's columns as TRL passes them to a reward, each row in the mode
    the side generated it in, and each answer whole (`rewards.text.whole_turns`)."""
    kwargs, opener = side_kwargs(recipe, side), opener_of(recipe, side)
    usable = [(i, j) for i, group in enumerate(answers) for j, a in enumerate(group) if not exclusion(a)]
    results: list[list[tuple[float, dict] | None]] = [[None] * len(group) for group in answers]
    if not usable:
        return results
    names = sorted({c for p in prompts for c in p.columns} - {"chat_template_kwargs"})
    columns = {name: [prompts[i].columns.get(name) for i, _ in usable] for name in names}
    columns["prompts"] = [prompts[i].messages for i, _ in usable]
    columns["chat_template_kwargs"] = [{"enable_thinking": row_mode(prompts[i].messages, kwargs) == "think"}
                                       for i, _ in usable]
    chosen = [answers[i][j] for i, j in usable]
    if all(a.get("ids") is not None for a in chosen):
        columns["completion_ids"] = [a["ids"] for a in chosen]
    totals, parts = verifier.score([whole_turns(a["text"], opener) for a in chosen], columns)
    for (i, j), total, part in zip(usable, totals, parts, strict=True):
        results[i][j] = None if total is None else (total, part)
    return results
