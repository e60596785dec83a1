"""On a GPU: the stochastic-rounding AdamW steps bf16 weights with its fused Triton kernel, and that kernel's step is
the eager step's in distribution (skipped without CUDA). Run: pytest -m gpu. The kernel's arithmetic is also checked on
a CPU by Triton's interpreter (tests/integration/test_stochastic_rounding_kernel.py)."""

import pytest
import torch

from smolalign.stages import stochastic_rounding
from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def steps(weights: torch.Tensor, fused: bool, monkeypatch, count: int = 10) -> tuple[torch.Tensor, dict, int]:
    """`count` AdamW steps of lr 1e-4 on `weights` with a constant gradient: (weights, state, fused kernel calls)."""
    import smolalign.stages.stochastic_rounding_kernel as kernel

    calls = []
    original = kernel.fused_step
    monkeypatch.setattr(kernel, "fused_step", lambda *a, **k: calls.append(1) or original(*a, **k))
    monkeypatch.setattr(stochastic_rounding, "_fused", lambda p, grad: fused and p.is_cuda)
    parameter = torch.nn.Parameter(weights.clone())
    optimizer = StochasticRoundingAdamW([parameter], lr=1e-4, weight_decay=0.01, seed=0)
    for _ in range(count):
        parameter.grad = torch.full_like(parameter, -0.5)
        optimizer.step()
    return parameter.detach(), optimizer.state[parameter], len(calls)


def test_bf16_weights_on_cuda_step_by_the_fused_kernel_as_the_eager_step_does(monkeypatch):
    weights = torch.ones(1_000_000, dtype=torch.bfloat16, device="cuda")
    fused, fused_state, fused_calls = steps(weights, True, monkeypatch)
    eager, eager_state, eager_calls = steps(weights, False, monkeypatch)
    assert (fused_calls, eager_calls) == (10, 0)
    torch.testing.assert_close(fused_state["exp_avg"], eager_state["exp_avg"], rtol=1e-6, atol=0)
    torch.testing.assert_close(fused_state["exp_avg_sq"], eager_state["exp_avg_sq"], rtol=1e-6, atol=0)
    # ten steps of ~1e-4 (decayed by 1e-6 a step) from 1.0, whose bf16 spacing is 2^-7: both spread over 1.0 and its
    # neighbour with the float32 mean
    assert set(fused.float().unique().tolist()) <= {1.0, 1.0 + 2 ** -7}
    assert fused.float().mean().item() == pytest.approx(eager.float().mean().item(), abs=1e-5)
    assert fused.float().mean().item() == pytest.approx(1.0 + 10 * 1e-4, abs=2e-5)
