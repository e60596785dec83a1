"""What the reports of pair generation show: answer lengths in the policy's tokens (length bias is the classic failure
of preference pairs), score distributions of graded candidates, and the graded report's text."""

import statistics
from collections import Counter

LENGTH_BIAS_RATIO = 1.5
"""Warn when one side's mean length is this many times the other's."""


def length_report(rows: list[dict], tokenizer) -> dict:
    """Chosen vs rejected answer lengths in the policy's tokens."""
    def count(side: str) -> list[int]:
        texts = [row[side][0]["content"] for row in rows]
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

    chosen, rejected = count("chosen"), count("rejected")
    report = {
        "chosen_mean": statistics.fmean(chosen), "rejected_mean": statistics.fmean(rejected),
        "chosen_median": statistics.median(chosen), "rejected_median": statistics.median(rejected),
        "chosen_longer_share": sum(c > r for c, r in zip(chosen, rejected, strict=True)) / len(rows),
    }
    ratio = report["chosen_mean"] / max(report["rejected_mean"], 1e-9)
    report["mean_ratio"] = ratio
    report["length_bias"] = ratio > LENGTH_BIAS_RATIO or ratio < 1 / LENGTH_BIAS_RATIO
    return report


def counts_text(counts: dict) -> str:
    return ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items())


def score_distribution(scores: list[float], picked: list[tuple[float, float]]) -> dict:
    """Candidate scores (summary and the most common values), and chosen vs rejected scores."""
    if not scores:
        return {"count": 0}
    summary = {"count": len(scores), "min": min(scores), "max": max(scores), "mean": statistics.fmean(scores),
               "median": statistics.median(scores),
               "most_common": [[value, count] for value, count in Counter(round(s, 4) for s in scores).most_common(8)]}
    if picked:
        summary["chosen_mean"] = statistics.fmean(c for c, _ in picked)
        summary["rejected_mean"] = statistics.fmean(r for _, r in picked)
    return summary


def unpaired_lengths(rows: list[dict], tokenizer) -> dict:
    """Desirable vs undesirable answer lengths in the policy's tokens (KTO's length bias)."""
    lengths = {True: [], False: []}
    counts = tokenizer([row["completion"][0]["content"] for row in rows], add_special_tokens=False)["input_ids"]
    for row, ids in zip(rows, counts, strict=True):
        lengths[row["label"]].append(len(ids))
    return {"desirable": len(lengths[True]), "undesirable": len(lengths[False]),
            "desirable_mean": statistics.fmean(lengths[True]) if lengths[True] else None,
            "undesirable_mean": statistics.fmean(lengths[False]) if lengths[False] else None}


def render_graded_report(report: dict) -> str:
    prompts, scores, lengths = report["prompts"], report["scores"], report["lengths"]
    lines = [
        f"pairs (graded, {report['n']} per prompt, scorer {report['scorer']}): {prompts['read']} prompts read, "
        f"{prompts['duplicate']} duplicate, {prompts.get('over_length_budget', 0)} over the length budget, "
        f"{prompts['used']} used ({report['generated']['graded']['generated']} sampled, "
        f"{report['generated']['graded']['reused']} reused)",
        f"  candidates: {counts_text(report['candidates'])}",
        f"  prompts dropped: {counts_text(report['dropped'])} (margin {report['margin']:g}, pick {report['pick']})",
    ]
    if scores.get("count"):
        lines.append(f"  scores: min {scores['min']:g}, median {scores['median']:g}, mean {scores['mean']:.3f}, max "
                     f"{scores['max']:g}; most common: "
                     + ", ".join(f"{value:g} ×{count}" for value, count in scores["most_common"]))
    if report["unpaired"]:
        lines.append(f"  {report['rows']} unpaired rows: {lengths['desirable']} desirable, {lengths['undesirable']} "
                     f"undesirable; mean length desirable {lengths['desirable_mean'] or 0:.1f}, undesirable "
                     f"{lengths['undesirable_mean'] or 0:.1f} policy tokens")
    else:
        lines.append(f"  {report['rows']} pairs; chosen score mean {scores['chosen_mean']:.3f} vs rejected "
                     f"{scores['rejected_mean']:.3f}; lengths (policy tokens): chosen mean {lengths['chosen_mean']:.1f}, "
                     f"rejected mean {lengths['rejected_mean']:.1f}; chosen longer in {lengths['chosen_longer_share']:.0%}")
        if lengths["length_bias"]:
            lines.append(f"  warning: length bias: chosen answers are {lengths['mean_ratio']:.2f}x as long as "
                         "rejected ones on average; the policy may learn length instead of quality")
    lines.append(f"wrote {report['output']}")
    return "\n".join(lines)
