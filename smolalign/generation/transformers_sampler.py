"""transformers' top-p on a CPU, for the same tokens with less work (smolalign/generation/nucleus.py).

`model.generate` with `do_sample` and a top-p under 1 sorts each row's whole vocabulary at every new token
(`TopPLogitsWarper`): 80 ms a step for 32 rows of 49,152 words on 2 cores, against ~100 ms for the 135M model's own
forward. While `fast_sampling("cpu")` is open, the warper finds the nucleus among each row's most likely tokens (the
same tokens stay, so the same samples are drawn), with transformers' own sort where the nucleus spans a quarter of
the vocabulary or where `min_tokens_to_keep` is not 1. On a GPU nothing changes.

The draw itself stays `torch.multinomial` (an exponential for every word of every row, 44 ms for 32 rows): a draw
from one uniform number per row is as exact but another random stream, and it would change every seeded sample
smolalign has recorded.
"""

import contextlib
from collections.abc import Iterator

from smolalign.generation.nucleus import lowest_kept_logit


def top_p_call(self, input_ids, scores):
    """`TopPLogitsWarper.__call__` with the nucleus found among the most likely tokens, and transformers' sort for
    the rows `nucleus.lowest_kept_logit` leaves to one."""
    original = top_p_call.transformers
    if self.min_tokens_to_keep != 1 or scores.dim() != 2:
        return original(self, input_ids, scores)
    cutoff, to_sort = lowest_kept_logit(scores, self.top_p)
    processed = scores.masked_fill(scores < cutoff, self.filter_value)
    if to_sort.any():
        processed[to_sort] = original(self, input_ids[to_sort] if input_ids is not None else None, scores[to_sort])
    return processed


@contextlib.contextmanager
def fast_sampling(accelerator: str) -> Iterator[None]:
    """While it is open, on a CPU ("cpu"), transformers' top-p finds its nucleus as the module docstring says."""
    if accelerator != "cpu":
        yield
        return
    from transformers.generation.logits_process import TopPLogitsWarper

    saved = TopPLogitsWarper.__call__
    if saved is not top_p_call:
        top_p_call.transformers = saved
    TopPLogitsWarper.__call__ = top_p_call
    try:
        yield
    finally:
        TopPLogitsWarper.__call__ = saved
