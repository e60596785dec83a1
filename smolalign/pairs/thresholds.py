"""The pairs' thresholds against what their rewards can score, checked before anything generates: a graded margin
wider than any two scores can differ, or a verifier threshold no answer (or every answer) reaches, would throw away
every generated answer after all of them were sampled and scored. Only rewards that state their `score_range` (the
built-in ones that score in [0, 1]) are bounded; with any other in the sum, nothing is refused."""

from smolalign.errors import SmolalignError
from smolalign.resolve import Run


def weighted_range(sections, built) -> tuple[float, float] | None:
    """The lowest and highest weighted sum of the rewards' scores, or None when one of them states no range."""
    low = high = 0.0
    for section, reward in zip(sections, built, strict=True):
        bounds = getattr(reward, "score_range", None)
        if bounds is None:
            return None
        ends = (section.weight * bounds[0], section.weight * bounds[1])
        low, high = low + min(ends), high + max(ends)
    return low, high


def check_thresholds(run: Run) -> None:
    """pairs.graded.margin within the scorer's span, pairs.graded.threshold (unpaired) and pairs.verifier.threshold
    within its range, refused naming the key and the range."""
    pairs = run.recipe.pairs
    if pairs is None:
        return
    if pairs.graded is not None and (span := weighted_range(pairs.graded.scorer, run.rewards.scorer)) is not None:
        low, high = span
        graded = pairs.graded
        if graded.margin > high - low:
            raise SmolalignError(f"pairs.graded.margin {graded.margin:g}: wider than any two candidates' scores can "
                                 f"differ (the scorer's weighted sum lies in [{low:g}, {high:g}]), so every prompt "
                                 "would be dropped after its candidates were sampled; lower it")
        if graded.unpaired and not low < graded.threshold <= high:
            label = "desirable" if graded.threshold <= low else "undesirable"
            raise SmolalignError(f"pairs.graded.threshold {graded.threshold:g}: every candidate would be labelled "
                                 f"{label} (the scorer's weighted sum lies in [{low:g}, {high:g}]); set it inside "
                                 "that range")
    if pairs.verifier is not None and (span := weighted_range(pairs.verifier.rewards, run.rewards.verifier)) is not None:
        low, high = span
        threshold = pairs.verifier.threshold
        if threshold > high:
            raise SmolalignError(f"pairs.verifier.threshold {threshold:g}: no answer can reach it (the rewards' "
                                 f"weighted sum is at most {high:g}), so no strong answer would ever be chosen; "
                                 "lower it")
        if threshold <= low:
            raise SmolalignError(f"pairs.verifier.threshold {threshold:g}: every answer reaches it (the rewards' "
                                 f"weighted sum is at least {low:g}), so every weak answer would pass and its prompt "
                                 "be dropped; raise it")
