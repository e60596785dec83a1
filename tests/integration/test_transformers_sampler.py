"""transformers' sampling on a CPU as smolalign runs it (smolalign/generation/transformers_sampler.py, nucleus.py and
draw.py): the nucleus is transformers' own `TopPLogitsWarper` mask; generation draws each token from one uniform
number of the global generator, replayed here by hand (transformers' own warper on a full forward of each prefix,
the running sum in NumPy); other multinomial draws are torch's own; and real runs sample through it: GRPO's
rollouts from the CLI, and the transformers backend of `smolalign eval`."""

import numpy as np
import pytest
import torch
from tiny_models import addition_prompts, grpo_recipe, write_jsonl

import smolalign.generation.transformers_sampler as sampler
from smolalign.generation.nucleus import CANDIDATES, lowest_kept_logit

VOCABULARY = 49_152


def batch_logits(sharpness: float, rows: int = 32) -> torch.Tensor:
    return torch.randn(rows, VOCABULARY, generator=torch.Generator().manual_seed(0)) * sharpness


@pytest.mark.parametrize(("sharpness", "widest"), [
    (8.0, (1, CANDIDATES)), (6.0, (CANDIDATES + 1, VOCABULARY // 4)), (2.0, (VOCABULARY // 4 + 1, VOCABULARY))])
@pytest.mark.parametrize("top_p", [0.5, 0.95])
@pytest.mark.parametrize("computed_in", [torch.float32, torch.bfloat16])  # bf16 logits tie, across an edge too
def test_the_nucleus_is_transformers_top_p_mask(sharpness, widest, top_p, computed_in):
    from transformers.generation.logits_process import TopPLogitsWarper

    logits = batch_logits(sharpness).to(computed_in).float()
    warper = TopPLogitsWarper(top_p)
    expected = warper(None, logits.clone())
    kept = (expected > -float("inf")).sum(dim=-1)
    assert widest[0] <= kept.max() <= widest[1] or top_p == 0.5  # the regime the sharpness is for, at top-p 0.95
    if computed_in == torch.float32:  # only the rows of a nucleus too wide for the candidates are sorted
        assert torch.equal(lowest_kept_logit(logits, top_p)[1], kept > VOCABULARY // 4)
    with sampler.fast_sampling("cpu"):
        assert TopPLogitsWarper.__call__.__qualname__.startswith("nucleus_top_p.")
        got = warper(None, logits.clone())
    differing = (got != expected).any(dim=-1)
    assert torch.equal(got[~differing], expected[~differing])
    for row in differing.nonzero().flatten().tolist():  # only where the row's mass ties with top_p in float32
        assert on_the_edge(logits[row], got[row], expected[row], top_p), f"row {row} differs away from the edge"


def on_the_edge(logits: torch.Tensor, got: torch.Tensor, expected: torch.Tensor, top_p: float) -> bool:
    """The one exception nucleus.py states: the two nuclei differ by the single token at the edge, and the mass of
    the tokens more likely than it is top_p within float32 error (the library sums ascending, smolalign descending,
    and the order of a float sum decides which side of top_p such a row lands on; which it does is the CPU's)."""
    kept_got, kept_expected = got > -float("inf"), expected > -float("inf")
    if (kept_got ^ kept_expected).sum() != 1:
        return False
    token = (kept_got ^ kept_expected).nonzero().item()
    probs = logits.double().softmax(dim=-1)
    above = probs[probs > probs[token]].sum().item()
    return abs(above - top_p) < 1e-6


def by_hand(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Row by row: the first token whose running sum (float64, in token order) exceeds u times the row's sum."""
    picked = []
    for row, u in zip(probs.double().numpy(), uniforms.double().numpy(), strict=True):
        running = np.cumsum(row)
        picked.append(int(np.searchsorted(running, u * running[-1], side="right")))
    return torch.tensor(picked)


def test_generation_draws_each_token_from_one_uniform_number(tiny_dir, monkeypatch):
    from transformers import AutoModelForCausalLM
    from transformers.generation.logits_process import TopPLogitsWarper

    found, cutoff = [], sampler.lowest_kept_logit
    monkeypatch.setattr(sampler, "lowest_kept_logit", lambda *args: found.append(cutoff(*args)) or found[-1])
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    model.generation_config.eos_token_id = None  # every row runs to the budget, as the replay below does
    model.lm_head.weight.data *= 7  # peaked enough that the nucleus lies among the candidates, not one token
    prompt = torch.tensor([[5, 17, 42, 9]] * 16)
    torch.manual_seed(0)
    with sampler.fast_sampling("cpu"), torch.no_grad():
        sampled = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=True, top_p=0.9,
                                 top_k=None, temperature=1.0, max_new_tokens=12, pad_token_id=0)
    torch.manual_seed(0)
    replayed, warper = prompt, TopPLogitsWarper(0.9)
    with torch.no_grad():
        for _ in range(12):
            probs = warper(replayed, model(replayed).logits[:, -1, :].float()).softmax(dim=-1)
            drawn = by_hand(probs, torch.rand(len(replayed), dtype=torch.float64))
            replayed = torch.cat([replayed, drawn.unsqueeze(1)], dim=1)
    assert torch.equal(sampled, replayed)
    assert len({tuple(row) for row in sampled[:, 4:].tolist()}) > 1  # sampled: the rows differ
    assert found and not any(to_sort.any() for _, to_sort in found)  # every nucleus from the candidates


def test_other_multinomial_draws_are_torchs_own():
    """Several samples a row, or a single row: what generation never asks for is drawn as torch draws it."""
    probs = torch.rand(4, 50)
    draws = []
    for opened in (False, True):
        torch.manual_seed(3)
        with sampler.fast_sampling("cpu" if opened else "cuda"):
            draws.append([torch.multinomial(probs, 5), torch.multinomial(probs[0], 1),
                          torch.multinomial(probs, 2, replacement=True)])
    for before, during in zip(*draws, strict=True):
        assert torch.equal(before, during)


def test_nothing_changes_on_a_gpu_and_everything_comes_back():
    from transformers.generation.logits_process import TopPLogitsWarper

    before, draw = TopPLogitsWarper.__call__, torch.multinomial
    with sampler.fast_sampling("cuda"):
        assert TopPLogitsWarper.__call__ is before and torch.multinomial is draw
    with sampler.fast_sampling("cpu"):
        assert TopPLogitsWarper.__call__.__qualname__.startswith("nucleus_top_p.")
        assert torch.multinomial.__qualname__.startswith("one_uniform_per_row.")
    assert TopPLogitsWarper.__call__ is before and torch.multinomial is draw


@pytest.fixture
def nuclei(monkeypatch):
    """How many rows each nucleus search took, in real runs."""
    seen, cutoff = [], sampler.lowest_kept_logit

    def counted(logits, top_p):
        seen.append(len(logits))
        return cutoff(logits, top_p)

    monkeypatch.setattr(sampler, "lowest_kept_logit", counted)
    return seen


def test_a_grpo_run_with_a_top_p_finds_its_rollouts_nucleus(cli, write_recipe, tiny_dir, tmp_path, nuclei):
    data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(8))
    recipe = write_recipe(grpo_recipe(tiny_dir, data, "chatml", max_completion_length=6, save_steps=2, top_p=0.9))
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert nuclei and set(nuclei) == {8}  # each token of a batch of 8 rollouts


def test_eval_with_transformers_samples_through_the_nucleus(cli, tiny_dir, tmp_path, nuclei):
    data = write_jsonl(tmp_path / "q.jsonl", [{"prompt": f"what is {i} plus {i}", "solution": str(2 * i)}
                                              for i in range(4)])
    code, _, err = cli("eval", tiny_dir, "--data", data, "--reward", "math_accuracy", "--max-new-tokens", "5",
                       "--template", "chatml", "--modes", "no_think", "--temperature", "0.6", "--top-p", "0.95",
                       "--json", tmp_path / "eval.json")
    assert code == 0, err
    assert nuclei and set(nuclei) == {4}
