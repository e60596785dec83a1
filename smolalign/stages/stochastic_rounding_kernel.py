"""One bfloat16 tensor's stochastic-rounding AdamW step on a CUDA device, as a single Triton kernel.

Written as torch operations (stochastic_rounding.py's eager step) the step reads and writes each element about fifteen
times (float32 copies of the gradient and the weight, the denominator, the noise, the rounding), some 126 bytes per
parameter against fused AdamW's 14: on a GPU the optimizer is bound by memory bandwidth, so that is ~0.1 s a step for
3 B parameters on an H200. Here one pass reads the bf16 weight and gradient and the float32 moments, computes the
update in float32 exactly as torch's AdamW does, and writes the moments and the stochastically rounded weight: 22 bytes
per parameter. The rounding noise is Triton's counter-based Philox draw at (seed, element index), so the kernel needs no
random tensor and a given seed reproduces it.

Importing this module imports Triton; `stochastic_rounding.fused_step_available` decides whether it is used.
"""

import triton
import triton.language as tl

BLOCK = 2048


@triton.jit
def _adamw_stochastic_rounding(weight_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr, n_elements, beta1, beta2, decay,
                               step_size, bias_correction2_sqrt, eps, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    inside = offsets < n_elements
    grad = tl.load(grad_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    exp_avg = tl.load(exp_avg_ptr + offsets, mask=inside, other=0.0)
    exp_avg_sq = tl.load(exp_avg_sq_ptr + offsets, mask=inside, other=0.0)
    weight = tl.load(weight_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    # torch's AdamW, element by element: lerp of the first moment, decayed second moment, decoupled weight decay
    exp_avg = exp_avg + (1.0 - beta1) * (grad - exp_avg)
    exp_avg_sq = exp_avg_sq * beta2 + (1.0 - beta2) * grad * grad
    denominator = tl.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps
    weight = weight * decay - step_size * (exp_avg / denominator)
    # A bf16 number is a float32 whose low 16 bits are zero: adding 16 random bits and clearing them rounds away from
    # zero with probability (dropped bits) / 2^16, which keeps the expected value.
    noise = (tl.randint(seed, offsets.to(tl.uint32)) & 0xFFFF).to(tl.int32)
    bits = (weight.to(tl.int32, bitcast=True) + noise) & -65536
    rounded = bits.to(tl.float32, bitcast=True).to(tl.bfloat16)
    tl.store(exp_avg_ptr + offsets, exp_avg, mask=inside)
    tl.store(exp_avg_sq_ptr + offsets, exp_avg_sq, mask=inside)
    tl.store(weight_ptr + offsets, rounded, mask=inside)


def fused_step(weight, grad, exp_avg, exp_avg_sq, *,
               lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int, seed: int) -> None:
    """Update contiguous `weight` (bf16), `exp_avg` and `exp_avg_sq` (float32) in place from `grad` (bf16 or
    float32): AdamW step number `step` (from 1), the weight rounded stochastically with noise drawn from `seed`."""
    n = weight.numel()
    launch = _adamw_stochastic_rounding[(triton.cdiv(n, BLOCK),)]
    arguments = (weight, grad, exp_avg, exp_avg_sq, n, beta1, beta2, 1.0 - lr * weight_decay,
                 lr / (1.0 - beta1 ** step), (1.0 - beta2 ** step) ** 0.5, eps, seed)
    if weight.is_cuda:  # Triton launches on the current device: make it the weight's
        import torch

        with torch.cuda.device(weight.device):
            launch(*arguments, BLOCK_SIZE=BLOCK)
    else:  # Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors
        launch(*arguments, BLOCK_SIZE=BLOCK)
