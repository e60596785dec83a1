"""The stochastic-rounding AdamW's noise follows the run, not the process: a tensor's rounding at a step is drawn from
the run's seed, the step number and the tensor's place, so an optimizer restored from a checkpoint's state (what
`--resume` does) rounds as the uninterrupted one, bit for bit, and two tensors or two steps never share their noise."""

import torch

from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW, noise_seed


def trained(steps: int, *, resume_after: int | None = None) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    parameters = [torch.nn.Parameter(torch.randn(3000, generator=generator).to(torch.bfloat16)) for _ in range(2)]
    gradients = [[torch.randn(3000, generator=generator) * 1e-2 for _ in parameters] for _ in range(steps)]
    optimizer = StochasticRoundingAdamW(parameters, lr=1e-4, weight_decay=0.01, seed=7)
    for step, grads in enumerate(gradients, start=1):
        for parameter, grad in zip(parameters, grads, strict=True):
            parameter.grad = grad.to(torch.bfloat16)
        optimizer.step()
        if step == resume_after:  # a new process: a fresh optimizer given the saved state, as the trainer does
            saved = optimizer.state_dict()
            optimizer = StochasticRoundingAdamW(parameters, lr=1e-4, weight_decay=0.01, seed=7)
            optimizer.load_state_dict(saved)
    return [p.detach().clone() for p in parameters]


def test_a_resumed_optimizer_rounds_as_the_uninterrupted_one():
    uninterrupted = trained(6)
    resumed = trained(6, resume_after=3)
    assert all(torch.equal(a, b) for a, b in zip(uninterrupted, resumed, strict=True))
    # the rounding is random: another seed lands elsewhere (so the equality above is not the rounding's absence)
    other = StochasticRoundingAdamW([p := torch.nn.Parameter(torch.ones(3000, dtype=torch.bfloat16))], lr=1e-4, seed=8)
    p.grad = torch.full_like(p, -0.5)
    other.step()
    assert 0 < int((p != 1.0).sum()) < 3000


def test_each_tensor_and_step_gets_its_own_noise_seed():
    seeds = {noise_seed(0, step, index) for step in range(1, 200) for index in range(1, 400)}
    assert len(seeds) == 199 * 399
    assert all(0 <= seed < 2 ** 62 for seed in seeds)
