"""AdamW for bfloat16 weights that computes each update in float32 and writes the weight back by stochastic rounding
(why, and the measurements that chose it: stages/low_precision_updates.py)."""

import math

import torch


def round_stochastically(value: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """float32 `value` to bfloat16, each element rounded up or down at random with the probability that keeps its
    expected value: a bf16 number is a float32 whose low 16 bits are zero, so adding a uniform 16-bit number to the
    bits and truncating them rounds away from zero with probability (dropped bits) / 2^16."""
    bits = value.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, device=bits.device, generator=generator)
    return (bits + noise).bitwise_and_(-65536).view(torch.float32).to(torch.bfloat16)


class StochasticRoundingAdamW(torch.optim.Optimizer):
    """torch's AdamW (decoupled weight decay, bias-corrected moments) for bfloat16 weights: float32 moments, the step
    computed in float32, the weight written back by stochastic rounding. float32 parameters (a score head, adapters)
    are updated exactly as torch's AdamW updates them."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, seed: int = 0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.seed = seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def _generator(self, device: torch.device) -> torch.Generator:
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[device]

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                step = state["step"].item()
                grad = p.grad.float()
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denominator = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** step)).add_(group["eps"])
                weight = p.float() if p.dtype != torch.float32 else p
                weight.mul_(1 - group["lr"] * group["weight_decay"])
                weight.addcdiv_(exp_avg, denominator, value=-group["lr"] / (1 - beta1 ** step))
                if p.dtype == torch.bfloat16:
                    p.copy_(round_stochastically(weight, self._generator(p.device)))
                elif p.dtype != torch.float32:
                    p.copy_(weight)
        return loss
