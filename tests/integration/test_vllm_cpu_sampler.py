"""vLLM's CPU sampler as smolalign installs it (smolalign/generation/vllm_cpu_sampler.py), against vLLM's own: the
top-p nucleus found among the most likely tokens is vLLM's sort-based mask; each row's token, with and without a
top-p, seeded or not, is the one a uniform number from its request's generator (or the global one) points at in the
probabilities vLLM's own mask leaves, worked out by hand; and many draws follow the distribution vLLM's own method
draws from."""

import numpy as np
import pytest
import torch

pytest.importorskip("vllm")

from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler, apply_top_k_top_p_pytorch  # noqa: E402

from smolalign.generation.nucleus import CANDIDATES  # noqa: E402
from smolalign.generation.vllm_cpu_sampler import forward_cpu, nucleus  # noqa: E402

VOCABULARY = 49_152  # SmolLM's

VLLM_FORWARD_CPU = TopKTopPSampler.forward_cpu
"""vLLM's own method (smolalign's replaces it only while an engine is built)."""


def batch_logits(sharpness: float, rows: int = 64, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, VOCABULARY, generator=generator) * sharpness


def generators(rows, seed=0) -> dict[int, torch.Generator]:
    return {row: torch.Generator().manual_seed(seed * 1000 + row) for row in rows}


@pytest.mark.parametrize(("sharpness", "widest"), [
    (8.0, (1, CANDIDATES)),                        # peaked rows: within the first candidates
    (6.0, (CANDIDATES + 1, VOCABULARY // 4)),      # wider: candidates grown
    (2.0, (VOCABULARY // 4 + 1, VOCABULARY))])     # nearly flat: vLLM's own sort
def test_the_nucleus_is_vllms_sort_based_mask(sharpness, widest):
    logits = batch_logits(sharpness)
    top_p = torch.linspace(0.05, 0.99, logits.shape[0])
    expected = apply_top_k_top_p_pytorch(logits.clone(), None, top_p, allow_cpu_sync=True)
    kept = (expected > -float("inf")).sum(dim=-1)
    assert widest[0] <= kept.max() <= widest[1]
    assert torch.equal(nucleus(logits.clone(), top_p), expected)


def test_the_most_likely_token_always_stays():
    logits = batch_logits(40.0, rows=4)
    masked = nucleus(logits.clone(), torch.full((4,), 1e-6))
    assert torch.equal((masked > -float("inf")).sum(dim=-1), torch.ones(4, dtype=torch.long))
    assert torch.equal(masked.argmax(dim=-1), logits.argmax(dim=-1))


def by_hand(probs: torch.Tensor, uniforms: list[float]) -> list[int]:
    """Row by row: the first token whose running sum (float64, in token order) exceeds u times the row's sum."""
    picked = []
    for row, u in zip(probs.double().numpy(), uniforms, strict=True):
        running = np.cumsum(row)
        picked.append(int(np.searchsorted(running, u * running[-1], side="right")))
    return picked


@pytest.mark.parametrize("case", ["top_p, every row seeded", "top_p, half seeded", "no top_p, seeded",
                                  "top_k and top_p", "top_p of 1 on a row", "unseeded", "logits computed in bf16"])
def test_each_token_is_the_one_its_rows_uniform_number_points_at(case):
    rows = 64
    logits = batch_logits(6.0, rows, seed=1) / 0.6
    top_p = torch.full((rows,), 0.95)
    top_k = None
    seeded = range(rows)
    if case == "top_p, half seeded":
        seeded = range(0, rows, 2)
    elif case == "no top_p, seeded":
        top_p = None
    elif case == "top_k and top_p":
        top_k = torch.full((rows,), 20)
    elif case == "top_p of 1 on a row":
        top_p[3] = 1.0
    elif case == "unseeded":
        seeded = []
    elif case == "logits computed in bf16":  # many tokens tie, some across a nucleus's edge
        logits = batch_logits(2.5, rows, seed=1).bfloat16().float()
    kept = apply_top_k_top_p_pytorch(logits.clone(), top_k, top_p, allow_cpu_sync=True)
    torch.manual_seed(7)
    uniforms = torch.rand(rows, dtype=torch.float64).tolist()  # the global draw, for rows without a generator
    for row, generator in generators(seeded, seed=2).items():
        uniforms[row] = torch.rand((), dtype=torch.float64, generator=generator).item()
    torch.manual_seed(7)
    tokens, _ = forward_cpu(TopKTopPSampler(), logits.clone(), generators(seeded, seed=2), top_k, top_p)
    assert tokens.tolist() == by_hand(kept.softmax(dim=-1), uniforms)
    assert len(set(tokens.tolist())) > 8  # sampled from 64 different rows, not one token


def test_many_draws_follow_the_distribution_vllms_own_sampler_draws_from():
    """4 prompts' next-token logits, 2,500 seeded requests each: the counts of each token drawn by smolalign's sampler
    and by vLLM's own agree (chi-square of the two samples, every token either drew 5 times or more)."""
    vocabulary, per_row = 2_048, 2_500
    logits = (torch.randn(4, vocabulary, generator=torch.Generator().manual_seed(5)) * 5.0).repeat_interleave(
        per_row, dim=0)
    top_p = torch.full((len(logits),), 0.9)
    counts = []
    for method, seed in ((VLLM_FORWARD_CPU, 1), (forward_cpu, 2)):
        tokens, _ = method(TopKTopPSampler(), logits.clone(), generators(range(len(logits)), seed=seed), None, top_p)
        counts.append(torch.bincount((tokens.view(4, per_row) + torch.arange(4).unsqueeze(1) * vocabulary).flatten(),
                                     minlength=4 * vocabulary).double())
    theirs, ours = counts
    drawn = (theirs + ours) > 0
    assert int(drawn.sum()) >= 12  # nuclei of several tokens
    assert bool(((theirs + ours)[drawn] >= 10).all())
    chi_square = float(((theirs - ours)[drawn] ** 2 / (theirs + ours)[drawn]).sum())
    degrees = int(drawn.sum()) - 4
    assert chi_square < degrees + 4 * degrees ** 0.5  # about p = 0.001 for these degrees of freedom


def test_seeded_rows_leave_the_global_generator_alone():
    """The batch-wide draw vLLM overwrote is skipped: with every row seeded, the global generator does not move."""
    torch.manual_seed(3)
    before = torch.get_rng_state()
    forward_cpu(TopKTopPSampler(), batch_logits(6.0, 8), generators(range(8)), None, torch.full((8,), 0.9))
    assert torch.equal(torch.get_rng_state(), before)
