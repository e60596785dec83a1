"""Training and generation speed of the bundled SmolLM2-135M-Instruct in each precision smolalign can pick on a CPU,
in one run: float32, bf16 autocast over float32 weights (smolalign's training default on a CPU with AMX or
AVX512-BF16) and bfloat16 weights (`model.dtype: bfloat16`; generation's default there).

    python benchmarks/precision.py [--threads 2] [--tokens 512] [--steps 3]

Training: one row of `--tokens` tokens per step, forward, backward and AdamW, the mean of `--steps` steps after one
warm-up. Generation: transformers `generate`, 32 prompts of the quickstart's evaluation, greedy, 40 new tokens.
Prints one JSON line per measurement and the ratios against float32. On a CPU without native bf16 torch emulates it
and the bf16 rows are slower than float32: that is the reason smolalign keeps float32 there.
"""

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

PRECISIONS = {"float32": ("float32", False), "bf16 autocast": ("float32", True), "bfloat16 weights": ("bfloat16", False)}


def bundled_model_dir() -> str:
    from smolalign.models.load import local_dir
    from smolalign.models.sources import resolve_source

    return str(local_dir(resolve_source("smollm2-135m-instruct")))


def autocast(on: bool):
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16) if on else contextlib.nullcontext()


def training_seconds(model_dir: str, dtype: str, mixed: bool, tokens: int, steps: int) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))
    times = []
    for _ in range(steps + 1):
        start = time.perf_counter()
        with autocast(mixed):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - start)
    return sum(times[1:]) / steps


def generation_tokens_per_s(model_dir: str, dtype: str, mixed: bool) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()
    rows = [json.loads(line) for line in (ROOT / "recipes/quickstart/data/arithmetic_eval.jsonl").read_text().splitlines()]
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": row["prompt"] if isinstance(row["prompt"], str)
                                               else row["prompt"][-1]["content"]}], add_generation_prompt=True,
                                             tokenize=False) for row in rows[:32]]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad(), autocast(mixed):
        model.generate(**{k: v[:2] for k, v in batch.items()}, max_new_tokens=4, do_sample=False)  # warm-up
        start = time.perf_counter()
        output = model.generate(**batch, max_new_tokens=40, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        seconds = time.perf_counter() - start
    new = output[:, batch["input_ids"].shape[1]:]
    generated = int(sum((row != tokenizer.pad_token_id).sum() for row in new))
    return generated / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    import torch

    from smolalign.hardware import cpu_computes_bf16

    torch.set_num_threads(args.threads)
    model_dir = bundled_model_dir()
    print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or ''}".strip(", "),
                      "cpu_bf16": cpu_computes_bf16(), "threads": args.threads, "torch": torch.__version__}))
    train, generate = {}, {}
    for name, (dtype, mixed) in PRECISIONS.items():
        train[name] = training_seconds(model_dir, dtype, mixed, args.tokens, args.steps)
        generate[name] = generation_tokens_per_s(model_dir, dtype, mixed)
        print(json.dumps({"precision": name, "train_s_per_step": round(train[name], 3),
                          "generate_tokens_per_s": round(generate[name], 1)}), flush=True)
    print(json.dumps({"train_speedup_over_float32": {k: round(train["float32"] / v, 2) for k, v in train.items()},
                      "generate_speedup_over_float32": {k: round(v / generate["float32"], 2)
                                                        for k, v in generate.items()}}))


if __name__ == "__main__":
    main()
