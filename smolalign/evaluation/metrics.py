"""Per-prompt scores from K samples, and their means with percentile-bootstrap intervals over prompts.

Every metric is first reduced to one value per prompt (the mean of its K samples, pass@K per prompt), then averaged
over prompts, so each prompt weighs the same. Intervals resample prompts with replacement (seeded: the same indices
for every metric and model), and differences to a baseline are paired: the same resampled prompts on both sides.
A reward of None (a gold answer that does not parse) leaves that sample out; a prompt with no scored sample is left
out of that reward's metrics; a prompt with n < K scored samples counts pass@n, a lower bound of its pass@K.
"""

import warnings
from dataclasses import dataclass

RESAMPLES = 1000
CONFIDENCE = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    import numpy as np

    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def per_prompt(samples: dict, thresholds: dict[str, float], k: int) -> dict:
    """Metric name -> one value per prompt (NaN: no scored sample). `samples` holds (prompts, K) arrays: one per
    reward (NaN for None), and `compliant`, `finished`, `tokens`; with tools, `tool_calls` and `tool_errors`
    (malformed calls included) per answer."""
    import numpy as np

    out = {}
    for name, threshold in thresholds.items():
        rewards = samples["rewards"][name]
        scored = ~np.isnan(rewards)
        n = scored.sum(axis=1)
        solved = (np.where(scored, rewards, -np.inf) >= threshold).sum(axis=1)
        with np.errstate(invalid="ignore"):
            out[f"{name} mean"] = np.where(n > 0, np.nansum(rewards, axis=1) / np.maximum(n, 1), np.nan)
            out[f"{name} avg@{k}"] = np.where(n > 0, solved / np.maximum(n, 1), np.nan)
        if k > 1:
            out[f"{name} pass@{k}"] = np.array([pass_at_k(int(a), int(b), min(k, int(a))) if a else np.nan
                                                for a, b in zip(n, solved, strict=True)])
    out["compliance"] = samples["compliant"].mean(axis=1)
    out["truncation"] = 1.0 - samples["finished"].mean(axis=1)
    out["length"] = samples["tokens"].mean(axis=1)
    if "tool_calls" in samples:
        out["tool-call rate"] = (samples["tool_calls"] > 0).mean(axis=1)
        out["tool errors"] = samples["tool_errors"].mean(axis=1)
    return out


@dataclass(frozen=True)
class Estimate:
    value: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high}


def resample_indices(n_prompts: int, seed: int, resamples: int = RESAMPLES):
    """(resamples, n_prompts) prompt indices drawn with replacement; the same for a given seed."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, n_prompts, size=(resamples, n_prompts))


def estimate(values, indices, confidence: float = CONFIDENCE) -> Estimate:
    """Mean over prompts (NaNs left out) and its percentile-bootstrap interval."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    if np.isnan(values).all():
        return Estimate(None, None, None)
    with warnings.catch_warnings():  # a resample drawing only prompts without a score has no mean: left out
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(values[indices], axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.nanpercentile(means, [tail, 100 - tail])
    return Estimate(float(np.nanmean(values)), float(low), float(high))
