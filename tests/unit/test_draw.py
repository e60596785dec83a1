"""The sampled token from one uniform number (smolalign/generation/draw.py) against an inverse CDF worked out row by
row in NumPy, and against the probabilities themselves: the tokens drawn are the ones the definition picks, a token of
probability 0 never comes out, and many draws follow the distribution (a chi-square test at fixed seeds)."""

import numpy as np
import pytest
import torch

from smolalign.generation.draw import BLOCK, inverse_cdf, seeded_uniforms


def by_hand(probs: torch.Tensor, uniforms: torch.Tensor) -> list[int]:
    """Row by row: the first token whose running sum (float64, in token order) exceeds u times the row's sum."""
    picked = []
    for row, u in zip(probs.double().numpy(), uniforms.double().numpy(), strict=True):
        running = np.cumsum(row)
        picked.append(int(np.searchsorted(running, u * running[-1], side="right")))
    return picked


@pytest.mark.parametrize("vocabulary", [7, BLOCK, BLOCK + 5, 3 * BLOCK - 1, 49_152])
def test_each_row_gets_the_token_its_uniform_number_points_at(vocabulary):
    generator = torch.Generator().manual_seed(vocabulary)
    probs = torch.rand(300, vocabulary, generator=generator) ** 8
    probs[:, ::3] = 0  # tokens that can never come out, in every block
    probs[:5, : vocabulary // 2] = 0  # rows whose first blocks hold nothing
    uniforms = torch.rand(300, dtype=torch.float64, generator=generator)
    drawn = inverse_cdf(probs, uniforms)
    assert drawn.tolist() == by_hand(probs, uniforms)
    assert bool((probs.gather(1, drawn.unsqueeze(1)) > 0).all())


def test_the_ends_of_the_unit_interval_pick_the_first_and_last_possible_tokens():
    probs = torch.zeros(1, 3 * BLOCK)
    probs[0, [10, BLOCK + 3, 2 * BLOCK + 7]] = torch.tensor([0.2, 0.5, 0.3])
    assert inverse_cdf(probs, torch.tensor([0.0])).tolist() == [10]
    assert inverse_cdf(probs, torch.tensor([0.2])).tolist() == [BLOCK + 3]  # at a boundary: the next token
    assert inverse_cdf(probs, torch.tensor([np.nextafter(1.0, 0.0)])).tolist() == [2 * BLOCK + 7]
    assert inverse_cdf(probs, torch.tensor([1.0])).tolist() == [2 * BLOCK + 7]  # a product that reaches the total


def test_draws_follow_the_probabilities():
    generator = torch.Generator().manual_seed(0)
    vocabulary = 2 * BLOCK + 100
    tokens = torch.randperm(vocabulary, generator=generator)[:20]  # scattered across the blocks
    probs = torch.zeros(vocabulary)
    probs[tokens] = torch.rand(20, generator=generator) + 0.05
    batch = probs.expand(2_000, -1).contiguous()
    drawn = torch.cat([inverse_cdf(batch, torch.rand(len(batch), dtype=torch.float64, generator=generator))
                       for _ in range(50)])  # 100,000 draws
    counts = torch.bincount(drawn, minlength=vocabulary).double()
    expected = probs.double() / probs.sum() * len(drawn)
    assert counts[probs == 0].sum() == 0
    chi_square = float(((counts[tokens] - expected[tokens]) ** 2 / expected[tokens]).sum())
    assert chi_square < 43.8  # 19 degrees of freedom, p = 0.001


def test_no_rows_draw_nothing_as_torch_does():
    assert inverse_cdf(torch.rand(0, 50), torch.rand(0, dtype=torch.float64)).shape == (0,)
    assert torch.multinomial(torch.rand(0, 50), 1).shape == (0, 1)


def test_a_row_without_a_distribution_is_refused_as_torch_does():
    for bad in (torch.zeros(2, 10), torch.full((2, 10), float("nan"))):
        with pytest.raises(ValueError, match="invalid multinomial distribution"):
            inverse_cdf(bad, torch.rand(2, dtype=torch.float64))
        with pytest.raises(RuntimeError):
            torch.multinomial(bad, 1)


def test_a_seeded_row_draws_from_its_own_generator_whatever_the_batch():
    def generators(rows):
        return {row: torch.Generator().manual_seed(100 + row) for row in rows}

    alone = seeded_uniforms(1, {0: torch.Generator().manual_seed(103)})
    torch.manual_seed(0)
    mixed = seeded_uniforms(6, generators([1, 3, 4]))
    assert mixed[3] == alone[0]
    assert mixed[1] == torch.rand((), dtype=torch.float64, generator=torch.Generator().manual_seed(101))
    torch.manual_seed(0)
    assert torch.equal(mixed[[0, 2, 5]], torch.rand(6, dtype=torch.float64)[[0, 2, 5]])  # the others: global
    before = torch.get_rng_state()
    seeded_uniforms(3, generators(range(3)))
    assert torch.equal(torch.get_rng_state(), before)  # every row seeded: the global generator does not move
