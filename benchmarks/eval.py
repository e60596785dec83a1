"""Evaluation throughput with the transformers backend: batched generation against one prompt at a time (its K
samples still in one call), on the same model, prompts, modes and seeds, measured in the same run; with a GPU and
vLLM installed, vLLM against batched transformers too.

    python benchmarks/eval.py [--model smollm2-135m-instruct] [--prompts 16] [--samples 2] [--batch-size 32]
                              [--max-new-tokens 64]

Prompts are the quickstart's held-out arithmetic questions, generated in think and no_think mode with the smollm3
template and scored with math_accuracy; prompts/s counts a prompt once per mode. Model loading is excluded.
"""

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
# This file's folder comes first on sys.path when it runs as a script, and benchmarks/rewards.py would shadow the
# `rewards` package that the evaluation imports.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
HELD_OUT = Path(__file__).resolve().parent.parent / "recipes" / "quickstart" / "data" / "arithmetic_eval.jsonl"


def eval_inputs(model: str, backend: str, args, batch_size: int):
    from smolalign.evaluation.inputs import EvalModel, prepare
    from smolalign.recipe.data_schema import SourceSection
    from smolalign.recipe.eval_schema import EvalRewardSection, EvalSection

    section = EvalSection(data=[SourceSection(str(HELD_OUT))], rewards=[EvalRewardSection("math_accuracy")],
                          samples=args.samples, max_new_tokens=args.max_new_tokens, backend=backend,
                          batch_size=batch_size, max_prompts=args.prompts)
    return prepare(section, [EvalModel("model", model)], None, "smollm3")


def prompts_per_second(inputs) -> tuple[float, dict]:
    """(prompts/s over both modes, {mode: (compliance, truncation)})."""
    from smolalign.evaluation.generate import evaluate_mode, generator_section
    from smolalign.pairs.backends import make_generator

    model = inputs.models[0]
    generator = make_generator("eval", generator_section(inputs, model), inputs.template_name, {})
    try:
        start = time.perf_counter()
        samples = {mode: evaluate_mode(inputs, generator, model, mode) for mode in inputs.section.modes}
        elapsed = time.perf_counter() - start
    finally:
        generator.close()
    rates = {mode: (s.arrays["compliant"].mean(), 1 - s.arrays["finished"].mean()) for mode, s in samples.items()}
    return len(inputs.prompts) * len(samples) / elapsed, rates


def describe(rates: dict) -> str:
    return ", ".join(f"{mode}: compliance {c:.0%}, truncated {t:.0%}" for mode, (c, t) in rates.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    import importlib.util

    import torch

    from smolalign.models.load import local_dir
    from smolalign.models.sources import resolve_source

    local_dir(resolve_source(args.model))  # convert a GGUF source once, outside the timings
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"torch {torch.__version__}, cuda={torch.cuda.is_available()}; python {sys.version.split()[0]}")
    print(f"model {args.model}, {args.prompts} prompts × {args.samples} samples × 2 modes, max_new_tokens "
          f"{args.max_new_tokens}; generation + scoring time (model loading excluded)")
    one, rates = prompts_per_second(eval_inputs(args.model, "transformers", args, args.samples))
    print(f"one prompt at a time: {one:.3f} prompts/s ({describe(rates)})")
    batched, rates = prompts_per_second(eval_inputs(args.model, "transformers", args, args.batch_size))
    print(f"batched ({args.batch_size} sequences): {batched:.3f} prompts/s ({describe(rates)})")
    print(f"ratio batched / one at a time: {batched / one:.2f}")
    if torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None:
        vllm, rates = prompts_per_second(eval_inputs(args.model, "vllm", args, args.batch_size))
        print(f"vLLM: {vllm:.3f} prompts/s ({describe(rates)})")
        print(f"ratio vLLM / batched transformers: {vllm / batched:.2f}")
    else:
        print("vLLM vs transformers: needs a GPU and vLLM (pip install 'smolalign[vllm]'); not measured here")


if __name__ == "__main__":
    main()
