"""Attention under bf16 autocast on a CPU, by sequence length, in one run: a training step's forward and backward of
the bundled SmolLM2-135M-Instruct (float32 weights, bf16 autocast, as smolalign trains on a CPU with AMX or
AVX512-BF16) on two rows, one of them left-padded by a third (a padding mask, as in GRPO's and DPO's batches), with
transformers' eager attention, its SDPA and smolalign's (smolalign/models/cpu_attention.py: eager up to 512 keys,
SDPA above). It prints the median seconds per step over `--repeats` steps after a first one, and each
implementation's ratio against eager.

    python benchmarks/cpu_attention.py [--lengths 256,512,1024,1536] [--repeats 2] [--threads 2]

Step times swing by 10-35% by the hour on a shared 2-core machine: compare implementations from one run.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def bundled_model_dir() -> str:
    from smolalign.models.load import local_dir
    from smolalign.models.sources import resolve_source

    return str(local_dir(resolve_source("smollm2-135m-instruct")))


def step_seconds(model, length: int, repeats: int) -> float:
    import torch

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (2, length), generator=generator)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, : length // 3] = 0
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=ids, attention_mask=mask).logits
        logits.float().logsumexp(-1).mean().backward()
        model.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="256,512,1024,1536")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    from transformers import AutoModelForCausalLM

    from smolalign.models import cpu_attention

    torch.set_num_threads(args.threads)
    implementations = ("eager", "sdpa", cpu_attention.register())
    lengths = [int(n) for n in args.lengths.split(",")]
    seconds: dict[str, dict[int, float]] = {}
    for name in implementations:
        model = AutoModelForCausalLM.from_pretrained(bundled_model_dir(), dtype=torch.float32,
                                                     attn_implementation=name)
        seconds[name] = {n: round(step_seconds(model, n, args.repeats), 2) for n in lengths}
        del model
    rows = [{"length": n, **{name: seconds[name][n] for name in implementations},
             **{f"{name} vs eager": round(seconds["eager"][n] / seconds[name][n], 2) for name in implementations[1:]}}
            for n in lengths]
    print(json.dumps({"machine": platform.processor() or platform.machine(), "threads": args.threads,
                      "repeats": args.repeats, "seconds_per_step": rows}, indent=1))


if __name__ == "__main__":
    main()
