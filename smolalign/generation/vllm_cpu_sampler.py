"""vLLM 0.31's sampler on a CPU, doing less work for tokens from the same distribution.

On a CPU vLLM samples a batch's next tokens in `TopKTopPSampler.forward_cpu`. With a top-p it sorts every row's whole
vocabulary (49,152 words for SmolLM: 165 ms for 64 rows on 2 cores); it then races exponential noise across the whole
vocabulary of every row (1.3 ms a row), and when requests carry seeds of their own (smolalign's eval and pairs give
each prompt one, so that reruns repeat) it first draws that noise for the whole batch from the global generator,
then again row by row from each request's generator, overwriting the first draw. At the quickstart's evaluation
settings (temperature 0.6, top-p 0.95, seeded) that was two thirds of a decoding step of the bundled 135M model:
369 ms against 112 ms greedy for 64 sequences.

`fast_cpu_sampling` replaces that method while smolalign builds vLLM's engine on a CPU in this process (the engine's
sampler binds the method then, and keeps it after the class has vLLM's own back), with one that
- finds each row's nucleus among its most likely tokens by vLLM's rule (smolalign/generation/nucleus.py), and
  with vLLM's own sort for the rows where it spans a quarter of the vocabulary or ends in a tie;
- draws each row's token from one uniform number (smolalign/generation/draw.py): a seeded request's from its own
  generator, so its tokens do not depend on the batch; the others' from the global generator. Each token comes
  with exactly vLLM's probability; a seed gives other tokens than vLLM's own sampler.

With a top-k, or a top-p of 1 on some row, the mask is vLLM's own. On a GPU nothing is replaced.
"""

import contextlib
from collections.abc import Iterator

from smolalign.generation.draw import inverse_cdf, seeded_uniforms
from smolalign.generation.nucleus import lowest_kept_logit
from smolalign.library_patch import replaced


def nucleus(logits, top_p):
    """`logits` (rows, vocabulary) with every token outside its row's top-p nucleus set to -inf, in place
    (`nucleus.lowest_kept_logit`), with vLLM's sort-based mask for the rows it leaves to a sort."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    cutoff, to_sort = lowest_kept_logit(logits, top_p)
    logits.masked_fill_(logits < cutoff, -float("inf"))  # rows left to a sort have a cutoff of -inf: untouched
    if to_sort.any():
        logits[to_sort] = apply_top_k_top_p_pytorch(logits[to_sort], None, top_p[to_sort], allow_cpu_sync=True)
    return logits


def forward_cpu(self, logits, generators, k, p):
    """vLLM's `TopKTopPSampler.forward_cpu` (logits, {row: its request's generator}, top-k and top-p per row or
    None) with the nucleus and the draw as the module docstring says: (tokens, the logits or log-probs vLLM
    returns for its logprobs mode, or None)."""
    import torch
    from vllm.v1.sample.ops import topk_topp_sampler as vllm_sampler

    if k is None and p is not None and not bool((p >= 1).any()):
        logits = nucleus(logits, p)
    else:
        logits = vllm_sampler.apply_top_k_top_p(logits, k, p)
    logits_to_return = None
    if self.logprobs_mode == "processed_logits":
        logits_to_return = logits
    elif self.logprobs_mode == "processed_logprobs":
        logits_to_return = logits.log_softmax(dim=-1, dtype=torch.float32)

    probs = logits.softmax(dim=-1, dtype=torch.float32)
    return inverse_cdf(probs, seeded_uniforms(len(probs), generators)), logits_to_return


@contextlib.contextmanager
def fast_cpu_sampling(accelerator: str) -> Iterator[None]:
    """While it is open, on a CPU ("cpu"), a vLLM engine built in this process samples as the module docstring says;
    on a GPU nothing changes."""
    if accelerator != "cpu":
        yield
        return
    from vllm.v1.sample.ops.topk_topp_sampler import TopKTopPSampler

    with replaced(TopKTopPSampler, "forward_cpu", lambda vllm_forward_cpu: forward_cpu):
        yield
