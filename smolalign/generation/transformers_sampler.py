"""transformers' sampling on a CPU, with less work for tokens from the same distribution.

`model.generate` with `do_sample` and a top-p under 1 sorts each row's whole vocabulary at every new token
(`TopPLogitsWarper`): 80 ms a step for 32 rows of 49,152 words on 2 cores, against ~100 ms for the 135M model's own
forward. Its draw, `torch.multinomial`, then races an exponential for every word of every row (41 ms for 32 rows).
While `fast_sampling("cpu")` is open:
- the warper finds the nucleus among each row's most likely tokens (the same tokens stay), with transformers' own sort
  where the nucleus spans a quarter of the vocabulary or where `min_tokens_to_keep` is not 1;
- a draw of one token per row (`torch.multinomial(probs, 1)` on a CPU, as generation calls it) takes one uniform
  number per row from the same generator (smolalign/generation/draw.py): each token with exactly its probability,
  another random stream, so a seed gives other samples than transformers' own draw.
On a GPU nothing changes.
"""

import contextlib
from collections.abc import Iterator

from smolalign.generation.draw import inverse_cdf
from smolalign.generation.nucleus import lowest_kept_logit
from smolalign.library_patch import replaced


def nucleus_top_p(transformers_call):
    """`TopPLogitsWarper.__call__` with the nucleus found among the most likely tokens, and transformers' sort
    (`transformers_call`) for the rows `nucleus.lowest_kept_logit` leaves to one."""

    def top_p_call(self, input_ids, scores):
        if self.min_tokens_to_keep != 1 or scores.dim() != 2:
            return transformers_call(self, input_ids, scores)
        cutoff, to_sort = lowest_kept_logit(scores, self.top_p)
        processed = scores.masked_fill(scores < cutoff, self.filter_value)
        if to_sort.any():
            processed[to_sort] = transformers_call(self, input_ids[to_sort] if input_ids is not None else None,
                                                   scores[to_sort])
        return processed

    return top_p_call


def one_uniform_per_row(torch_multinomial):
    """`torch.multinomial` with one row's token per uniform number for what generation asks of it (a CPU batch of
    rows, one sample each); anything else goes to torch's own (`torch_multinomial`)."""

    def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
        import torch

        if input.dim() != 2 or num_samples != 1 or out is not None or input.device.type != "cpu":
            return torch_multinomial(input, num_samples, replacement, generator=generator, out=out)
        uniforms = torch.rand(len(input), dtype=torch.float64, generator=generator)
        return inverse_cdf(input, uniforms).unsqueeze(1)

    return multinomial


@contextlib.contextmanager
def fast_sampling(accelerator: str) -> Iterator[None]:
    """While it is open, on a CPU ("cpu"), transformers' top-p finds its nucleus and its draw takes one number a row,
    as the module docstring says."""
    if accelerator != "cpu":
        yield
        return
    import torch
    from transformers.generation.logits_process import TopPLogitsWarper

    with replaced(TopPLogitsWarper, "__call__", nucleus_top_p), replaced(torch, "multinomial", one_uniform_per_row):
        yield
