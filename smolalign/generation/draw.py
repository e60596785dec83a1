"""A sampled token per row from one uniform number (the inverse of its cumulative distribution), on a CPU.

`torch.multinomial` (transformers' sampling) and vLLM's CPU sampler pick each row's token by racing exponential noise
across the whole vocabulary: 49,152 draws, each with a logarithm, per row and new token, 1.3 ms a row on 2 cores
(41 ms for 32 rows, about as long as a decoding step of the bundled 135M model in bf16). After a top-p the race is
among a handful of tokens. `inverse_cdf` takes one uniform number per row and a cumulative sum: each token is drawn
with exactly its probability, from another random stream, so a seed gives other samples than the libraries' own
draw. smolalign/generation/transformers_sampler.py and vllm_cpu_sampler.py put it in the two libraries on a CPU.
"""


BLOCK = 1024
"""Tokens per block: the draw finds a row's block from the blocks' sums, then its token within that block, so that
no float64 copy of the whole (rows, vocabulary) batch is made (a fresh 12 MB one took 8 ms, the page faults)."""


def inverse_cdf(probs, uniforms):
    """(rows,) token ids: per row of `probs` (rows, vocabulary; non-negative, a positive total), the first token whose
    cumulative probability exceeds its uniform number (rows,) in [0, 1) times the row's total. A token of
    probability 0 is never drawn. Sums run in float64, so a vocabulary's worth of small probabilities does not round
    the tail away. A row without a positive, finite total raises, as `torch.multinomial` does."""
    import torch

    rows, vocabulary = probs.shape
    if rows == 0:
        return torch.empty(0, dtype=torch.long, device=probs.device)
    whole = vocabulary // BLOCK * BLOCK
    sums = probs[:, :whole].reshape(rows, -1, BLOCK).sum(dim=-1, dtype=torch.float64)
    if whole < vocabulary:
        sums = torch.cat([sums, probs[:, whole:].sum(dim=-1, dtype=torch.float64, keepdim=True)], dim=1)
    through = sums.cumsum(dim=-1)  # (rows, blocks): the probability up to each block's end
    if not bool((through[:, -1] > 0).all()) or not bool(torch.isfinite(through[:, -1]).all()):
        raise ValueError("invalid multinomial distribution: a row sums to 0 or to inf or nan")
    targets = uniforms.to(torch.float64) * through[:, -1]
    block = _first_above(through, targets, sums)
    before = torch.where(block > 0, through.gather(1, (block - 1).clamp(min=0).unsqueeze(1)).squeeze(1), 0.0)
    positions = block.unsqueeze(1) * BLOCK + torch.arange(BLOCK)
    inside = probs.gather(1, positions.clamp(max=vocabulary - 1)).to(torch.float64) * (positions < vocabulary)
    return block * BLOCK + _first_above(inside.cumsum(dim=-1), targets - before, inside)


def _first_above(cumulative, targets, parts):
    """Per row, the first index whose `cumulative` exceeds its target; where rounding leaves none (a product equal to
    the total, or a block's own sum a little under its share of the blocks' sums), the last index of a positive
    part, which is where the target lies."""
    import torch

    found = torch.searchsorted(cumulative, targets.unsqueeze(1), right=True).squeeze(1)
    past = found >= cumulative.shape[-1]
    if bool(past.any()):
        found[past] = cumulative.shape[-1] - 1 - (parts[past] > 0).flip(-1).int().argmax(dim=-1)
    return found


def seeded_uniforms(rows: int, generators: dict):
    """(rows,) float64 uniform numbers in [0, 1): a row with a generator of its own ({row: generator}) draws one from
    it, so its token does not depend on the batch it is in; the others draw from the global generator."""
    import torch

    uniforms = torch.rand(rows, dtype=torch.float64) if len(generators) != rows else torch.empty(rows, dtype=torch.float64)
    for row, generator in generators.items():
        uniforms[row] = torch.rand((), dtype=torch.float64, generator=generator)
    return uniforms
