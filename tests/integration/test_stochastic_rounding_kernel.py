"""The fused CUDA step of the stochastic-rounding AdamW (stages/stochastic_rounding_kernel.py), run by Triton's
interpreter on the CPU (TRITON_INTERPRET=1: the kernel's own code, element by element, in NumPy). The expectations
come from torch's AdamW on float32 copies: the moments are torch's, and each new weight is one of the two bf16
neighbours of torch's float32 result, up or down with the probabilities that keep its expected value. On a GPU,
tests/gpu/test_cuda_stochastic_rounding.py checks the compiled kernel and the optimizer's use of it.

Triton is installed apart (`make` puts it in .venv/triton, beside the environment; torch imports Triton wherever it
finds one, so the environment the other tests run in has none) and only the child that runs the kernel sees it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

TRITON_DIR = Path(sys.prefix) / "triton"  # the environment running the tests: .venv/triton under make
if not (TRITON_DIR / "triton").is_dir():
    pytest.skip(f"Triton for its interpreter is not installed in {TRITON_DIR} (make installs it)",
                allow_module_level=True)

# Triton reads TRITON_INTERPRET when triton.language defines its own jitted helpers (tl.randint), so the kernel runs in
# a fresh interpreter that sets it before importing Triton: one child runs every case of this file.
RUNNER = """
import sys, torch
from smolalign.stages.stochastic_rounding_kernel import fused_step
cases = torch.load(sys.argv[1])
for tensors, settings in cases.values():
    fused_step(*tensors, **settings)
torch.save(cases, sys.argv[1])
"""
N = 20_000
N_AVERAGE = 100_000
MOMENTS = {"lr": 3e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "step": 7, "seed": 11}
AVERAGE = {"lr": 1e-4, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0, "step": 1, "seed": 3}


def moments_case():
    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn(N, generator=generator) * 0.05).to(torch.bfloat16)
    exp_avg = torch.randn(N, generator=generator) * 1e-3
    exp_avg_sq = torch.rand(N, generator=generator) * 1e-6
    grad = (torch.randn(N, generator=generator) * 1e-2).to(torch.bfloat16)
    return weight, grad, exp_avg, exp_avg_sq


def average_case():
    return (torch.ones(N_AVERAGE, dtype=torch.bfloat16), torch.full((N_AVERAGE,), -0.5, dtype=torch.bfloat16),
            torch.zeros(N_AVERAGE), torch.zeros(N_AVERAGE))


def seed_case(seed: int):
    tensors = (torch.ones(4096, dtype=torch.bfloat16), torch.full((4096,), -0.5, dtype=torch.bfloat16),
               torch.zeros(4096), torch.zeros(4096))
    return tensors, {**AVERAGE, "lr": 1e-3, "seed": seed}


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """Each case's tensors after `stochastic_rounding_kernel.fused_step` ran on them under Triton's interpreter."""
    cases = {"moments": (moments_case(), MOMENTS), "average": (average_case(), AVERAGE),
             "seed 5": seed_case(5), "seed 5 again": seed_case(5), "seed 6": seed_case(6)}
    exchange = tmp_path_factory.mktemp("kernel") / "cases.pt"
    torch.save(cases, exchange)
    subprocess.run([sys.executable, "-c", RUNNER, str(exchange)], check=True,
                   env={**os.environ, "TRITON_INTERPRET": "1",
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(TRITON_DIR), os.environ.get("PYTHONPATH")]))})
    return {name: tensors for name, (tensors, _) in torch.load(exchange).items()}


def torch_adamw_step(weight: torch.Tensor, grad: torch.Tensor, exp_avg, exp_avg_sq, step: int, **settings):
    """One step of torch's AdamW on float32 copies, from the given moments at step `step`: (weight, m, v)."""
    parameter = torch.nn.Parameter(weight.float().clone())
    optimizer = torch.optim.AdamW([parameter], foreach=False, **settings)
    parameter.grad = grad.float().clone()
    optimizer.state[parameter] = {"step": torch.tensor(float(step - 1)), "exp_avg": exp_avg.clone(),
                                  "exp_avg_sq": exp_avg_sq.clone()}
    optimizer.step()
    state = optimizer.state[parameter]
    return parameter.detach(), state["exp_avg"], state["exp_avg_sq"]


def bf16_neighbours(value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The bf16 numbers at or below and at or above each float32 `value`'s magnitude (by truncating its bits)."""
    bits = value.view(torch.int32)
    down = (bits & -65536).view(torch.float32)
    up = ((bits & -65536) + 65536).view(torch.float32)
    exact = (bits & 0xFFFF) == 0
    return down, torch.where(exact, down, up)


def test_moments_are_torchs_and_each_weight_one_of_its_two_bf16_neighbours(stepped):
    weight, grad, exp_avg, exp_avg_sq = moments_case()
    expected, expected_m, expected_v = torch_adamw_step(weight, grad, exp_avg, exp_avg_sq, 7, lr=3e-3,
                                                        betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    updated, _, m, v = stepped["moments"]
    # a few float32 ulps of the moments' scale: where the lerp cancels, the order of float32 operations shows
    torch.testing.assert_close(m, expected_m, rtol=1e-6, atol=5e-10)
    torch.testing.assert_close(v, expected_v, rtol=1e-6, atol=5e-13)
    assert updated.dtype == torch.bfloat16
    # float32 evaluation order may move torch's result by an ulp across a bf16 number: compare with its neighbours'
    # neighbours at one float32 ulp either side
    low, _ = bf16_neighbours(torch.nextafter(expected, expected - expected.sign()))
    _, high = bf16_neighbours(torch.nextafter(expected, expected + expected.sign()))
    got = updated.float()
    assert bool(((got == low) | (got == high)).all())
    moved_up = (got.abs() > expected.abs()).float().mean().item()
    assert 0.3 < moved_up < 0.7  # both ways, not always to the nearest


def test_an_update_far_below_bf16s_spacing_reaches_the_weights_on_average(stepped):
    """A weight of 1.0 (spacing 2^-7) moved by ~1e-4: to the nearest it stays 1.0; here 100,000 weights move by the
    float32 amount on average (within 5 standard errors), each to 1.0 or 1.0 + 2^-7."""
    expected, _, _ = torch_adamw_step(*average_case(), 1, lr=1e-4, weight_decay=0.0)
    weight = stepped["average"][0]
    assert set(weight.float().unique().tolist()) == {1.0, 1.0 + 2 ** -7}
    p = (expected[0].item() - 1.0) / 2 ** -7
    standard_error = 2 ** -7 * (p * (1 - p) / N_AVERAGE) ** 0.5
    assert weight.float().mean().item() == pytest.approx(expected[0].item(), abs=5 * standard_error)


def test_the_seed_decides_the_noise(stepped):
    assert torch.equal(stepped["seed 5"][0], stepped["seed 5 again"][0])
    assert not torch.equal(stepped["seed 5"][0], stepped["seed 6"][0])
