"""The optimizer's share of a step: one AdamW step over a real model's parameter shapes, for each way smolalign can
update weights, against torch's AdamW on bf16 weights (plain TRL's default, whose small updates are lost) measured in
the same run.

    python benchmarks/optimizer_step.py [--model smollm3-3b|smollm2-135m] [--repeats 5] [--device cuda|cpu]

Configurations, all on the same shapes with gradients of 1e-3:
- `torch AdamW, bf16 weights`: transformers' default optimizer (`adamw_torch_fused` on a GPU, foreach on a CPU).
- `stochastic rounding`: smolalign's AdamW for bf16 weights (stages/stochastic_rounding.py): on CUDA its fused
  Triton kernel, on a CPU its torch operations.
- `stochastic rounding, torch operations`: the same optimizer with the kernel switched off (what a GPU ran before it).
- `torch AdamW, float32 masters`: float32 weights (what float32 master weights cost the optimizer).
Prints milliseconds a step (median of --repeats after one warm-up step), bytes of optimizer traffic a parameter
implied at the device's measured copy bandwidth, and each over the first.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

MODELS = {"smollm3-3b": "SmolLM3Config", "smollm2-135m": "LlamaConfig"}


def shapes(model: str) -> list[tuple[int, ...]]:
    """The parameter shapes of `model` (built on the meta device from its config: no weights, no download)."""
    import torch
    import transformers

    if model == "smollm2-135m":
        config = transformers.LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                          num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                          tie_word_embeddings=True)
    else:
        config = transformers.SmolLM3Config()  # the 3B's defaults
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config)
    return [tuple(p.shape) for p in built.parameters()]


def synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(make_optimizer, dtype, sizes, device: str, repeats: int) -> float:
    """Median seconds of one optimizer step over parameters of `sizes` in `dtype`."""
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    parameters = []
    for size in sizes:
        parameter = torch.nn.Parameter(torch.randn(size, device=device, dtype=dtype, generator=generator) * 0.02)
        parameter.grad = torch.randn(size, device=device, dtype=dtype, generator=generator) * 1e-3
        parameters.append(parameter)
    optimizer = make_optimizer(parameters)
    optimizer.step()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        optimizer.step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    del optimizer, parameters
    if device == "cuda":
        torch.cuda.empty_cache()
    return statistics.median(times)


def copy_bandwidth(device: str) -> float:
    """Bytes a second that copying a 1 GiB tensor moves (read and write)."""
    import torch

    source = torch.empty(1 << 28, dtype=torch.float32, device=device).fill_(1.0)
    target = torch.empty_like(source)
    target.copy_(source)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(3):
        target.copy_(source)
    synchronize(device)
    return 3 * 2 * source.numel() * 4 / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default=None,
                        help="default: smollm3-3b on a GPU, smollm2-135m on a CPU")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    args = parser.parse_args()
    import torch

    from smolalign.stages import stochastic_rounding
    from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = args.model or ("smollm3-3b" if device == "cuda" else "smollm2-135m")
    sizes = shapes(model)
    count = sum(torch.Size(size).numel() for size in sizes)
    name = torch.cuda.get_device_name(0) if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"{name}; {model}: {len(sizes)} tensors, {count / 1e9:.3f} B parameters; torch {torch.__version__}")
    bandwidth = copy_bandwidth(device)
    kernel = getattr(stochastic_rounding, "_fused", None)  # None: a tree from before the kernel

    def torch_adamw(parameters):
        fused = {"fused": True} if device == "cuda" else {"foreach": True}
        return torch.optim.AdamW(parameters, lr=1e-5, weight_decay=0.0, **fused)

    def ours(parameters):
        return StochasticRoundingAdamW(parameters, lr=1e-5, weight_decay=0.0)

    def without_kernel(parameters):
        stochastic_rounding._fused = lambda p, grad: False
        return ours(parameters)

    configurations = [("torch AdamW, bf16 weights", torch_adamw, torch.bfloat16),
                      ("stochastic rounding" + (" (fused kernel)" if device == "cuda" else ""), ours, torch.bfloat16)]
    if device == "cuda":
        configurations.append(("stochastic rounding, torch operations", without_kernel, torch.bfloat16))
    configurations.append(("torch AdamW, float32 masters", torch_adamw, torch.float32))
    print(f"copy bandwidth {bandwidth / 1e9:,.0f} GB/s\n| optimizer | ms a step | bytes a parameter at copy bandwidth "
          f"| over torch AdamW, bf16 |\n|---|---|---|---|")
    baseline = None
    for label, make, dtype in configurations:
        seconds = time_steps(make, dtype, sizes, device, args.repeats)
        if kernel is not None:
            stochastic_rounding._fused = kernel
        baseline = baseline or seconds
        print(f"| {label} | {seconds * 1e3:,.1f} | {seconds * bandwidth / count:.0f} | {seconds / baseline:.2f}x |",
              flush=True)


if __name__ == "__main__":
    main()
