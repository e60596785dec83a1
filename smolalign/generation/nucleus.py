"""Top-p sampling's nucleus with less work: transformers (`TopPLogitsWarper`) and vLLM's CPU sampler find it by
sorting every row's whole vocabulary at every new token (49,152 words for SmolLM: 165 ms for 64 rows on 2 cores);
`lowest_kept_logit` looks for it among each row's most likely tokens (`torch.topk`), by the rule both apply after
sorting. smolalign/generation/vllm_cpu_sampler.py and transformers_sampler.py put it in the two libraries.
"""

CANDIDATES = 64
"""The most likely tokens the nucleus is first looked for among."""


def lowest_kept_logit(logits, top_p):
    """(cutoff, to_sort): per row (rows, 1) the smallest logit of its top-p nucleus, and (rows,) the rows whose
    nucleus the caller must find by sorting (their cutoff is -inf, so masking with it leaves them whole): a nucleus
    spanning a quarter of the
    vocabulary (a sort is then as cheap), or a token left out that ties with the last one kept (which of tied tokens
    stay is the sort's order; logits computed in bf16 tie often). `logits` is (rows, vocabulary); `top_p` a float or
    one per row.

    The rule is the libraries': a token stays when the probability of the tokens more likely than it is under top_p
    (after their ascending sort, when its cumulative probability exceeds 1 - top_p); the most likely always stays.
    The same tokens stay, except where a row's mass lies within float error of top_p (the two sums round
    differently). Candidates start at CANDIDATES and grow fourfold for the rows whose nucleus does not end within
    them."""
    import torch

    probs = logits.softmax(dim=-1)
    rows, vocabulary = logits.shape
    top_p = torch.as_tensor(top_p, dtype=probs.dtype).expand(rows)
    cutoff = torch.full((rows, 1), -float("inf"), dtype=logits.dtype)
    open_rows = torch.arange(rows)
    to_sort = torch.zeros(rows, dtype=torch.bool)
    candidates = CANDIDATES
    while len(open_rows) and candidates * 4 <= vocabulary:
        top, index = probs[open_rows].topk(candidates, dim=-1)  # most likely first
        above = torch.cat([torch.zeros_like(top[:, :1]), top[:, :-1].cumsum(dim=-1)], dim=-1)
        kept = above < top_p[open_rows].unsqueeze(1)  # a prefix of each row: `above` never decreases
        ends = ~kept[:, -1]  # the nucleus ends before the last candidate
        last = (kept.sum(dim=-1, keepdim=True) - 1).clamp(max=candidates - 2)
        rows_of = open_rows.unsqueeze(1)
        lowest = logits[rows_of, index.gather(1, last)]
        tie = (logits[rows_of, index.gather(1, last + 1)] == lowest).squeeze(1)
        cutoff[open_rows[ends & ~tie]] = lowest[ends & ~tie]
        to_sort[open_rows[ends & tie]] = True
        open_rows = open_rows[~ends]
        candidates *= 4
    to_sort[open_rows] = True
    return cutoff, to_sort
