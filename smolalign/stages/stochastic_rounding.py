"""AdamW for bfloat16 weights that computes each update in float32 and writes the weight back by stochastic rounding
(why, and the measurements that chose it: stages/low_precision_updates.py).

On a CUDA device with Triton each contiguous bf16 tensor's step is one fused kernel (stochastic_rounding_kernel.py);
elsewhere the same arithmetic runs as torch operations. The rounding noise of a tensor's step is drawn from a seed made
of the run's seed, the step number and the tensor's place among the optimizer's parameters, so a run resumed from a
checkpoint (which keeps the step numbers) rounds as the uninterrupted run would have."""

import functools
import math

import torch

from smolalign.rounding import round_stochastically

_MIX = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def noise_seed(seed: int, step: int, index: int) -> int:
    """A 62-bit seed for the rounding noise of parameter `index` at `step` (splitmix64's finaliser over the three)."""
    x = (seed * _MIX + step * 0xBF58476D1CE4E5B9 + index * 0x94D049BB133111EB + _MIX) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) >> 2


@functools.cache
def fused_step_available() -> bool:
    """Whether Triton is importable, for the fused CUDA step."""
    try:
        import smolalign.stages.stochastic_rounding_kernel  # noqa: F401
    except ImportError:
        return False
    return True


def _fused(p: torch.Tensor, grad: torch.Tensor) -> bool:
    return (p.is_cuda and p.dtype == torch.bfloat16 and p.is_contiguous() and grad.is_contiguous()
            and fused_step_available())


class StochasticRoundingAdamW(torch.optim.Optimizer):
    """torch's AdamW (decoupled weight decay, bias-corrected moments) for bfloat16 weights: float32 moments, the step
    computed in float32, the weight written back by stochastic rounding. float32 parameters (a score head, adapters)
    are updated exactly as torch's AdamW updates them."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, seed: int = 0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.seed = seed

    def load_state_dict(self, state_dict) -> None:
        """torch's, but the moments stay float32: torch casts every floating state tensor to its parameter's dtype
        when it loads (a resumed run's moments would be bf16, and the next step would refuse them)."""
        saved_ids = [i for group in state_dict["param_groups"] for i in group["params"]]
        moments = {i: {key: value for key, value in state_dict["state"].get(i, {}).items()
                       if key in ("exp_avg", "exp_avg_sq")} for i in saved_ids}
        super().load_state_dict(state_dict)
        parameters = [p for group in self.param_groups for p in group["params"]]
        for i, p in zip(saved_ids, parameters, strict=True):
            for key, value in moments[i].items():
                self.state[p][key] = value.to(device=p.device, dtype=torch.float32)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        index = 0
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                index += 1
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                step = int(state["step"].item())
                seed = noise_seed(self.seed, step, index)
                if _fused(p, p.grad):
                    from smolalign.stages.stochastic_rounding_kernel import fused_step

                    fused_step(p, p.grad, state["exp_avg"], state["exp_avg_sq"], lr=lr, beta1=beta1, beta2=beta2,
                               eps=eps, weight_decay=weight_decay, step=step, seed=seed)
                    continue
                grad = p.grad.float()
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denominator = exp_avg_sq.sqrt().div_(math.sqrt(1 - beta2 ** step)).add_(eps)
                weight = p.float() if p.dtype != torch.float32 else p
                if weight_decay:
                    weight.mul_(1 - lr * weight_decay)
                weight.addcdiv_(exp_avg, denominator, value=-lr / (1 - beta1 ** step))
                if p.dtype == torch.bfloat16:
                    generator = torch.Generator(device=p.device).manual_seed(seed)
                    p.copy_(round_stochastically(weight, generator))
                elif p.dtype != torch.float32:
                    p.copy_(weight)
        return loss
