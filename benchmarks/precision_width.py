"""From which model width bf16 pays on this CPU, in one run: training (bf16 autocast over float32 weights, smolalign's
default on a CPU with AMX or AVX512-BF16) and generation (bfloat16 weights) against float32, on random Llama models
shaped like the tests' tiny model and like the bundled SmolLM2-135M at a range of widths.

    python benchmarks/precision_width.py [--threads 2] [--widths 64 128 256 384 576] [--layers 4] [--steps 8]

Training: one packed row per step whose length is drawn from 128-512 tokens (packing gives a new length most steps,
and oneDNN builds its bf16 kernels for each new shape), forward, backward and AdamW; the sum of `--steps` steps after
two warm-ups. Generation: transformers `generate`, 8 prompts of 40 tokens, greedy, 32 new tokens, after a warm-up.
Models: "tests' tiny" is tests/tiny_models.py's (64 wide, 2 layers, 128-wide MLP, 512 tokens); the others keep
SmolLM2-135M's vocabulary (49,152), head size (64), 3:1 query to key-value heads (1:1 where the heads are not a multiple of 3) and MLP ratio (1536/576) at each
width, with `--layers` layers (the real model has 30 at width 576). Ratios above 1 mean bf16 is faster.
"""

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

TINY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2}


def smollm2_shaped(width: int, layers: int) -> dict:
    heads = max(1, width // 64)
    return {"vocab_size": 49152, "hidden_size": width, "intermediate_size": width * 1536 // 576 // 8 * 8,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": heads // 3 if heads % 3 == 0 else heads}


def build(shape: dict, dtype):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**shape, max_position_embeddings=1024, tie_word_embeddings=True)
    return LlamaForCausalLM(config).to(dtype)


def training_seconds(shape: dict, mixed: bool, steps: int) -> float:
    import torch

    model = build(shape, torch.float32).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    lengths = random.Random(0)
    spent = 0.0
    for step in range(steps + 2):
        ids = torch.randint(0, shape["vocab_size"], (1, lengths.randint(128, 512)))
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        spent += (time.perf_counter() - start) if step >= 2 else 0.0
    return spent


def generation_seconds(shape: dict, bf16: bool) -> float:
    import torch

    model = build(shape, torch.bfloat16 if bf16 else torch.float32).eval()
    prompts = torch.randint(0, shape["vocab_size"], (8, 40), generator=torch.Generator().manual_seed(0))
    settings = {"do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        model.generate(prompts, max_new_tokens=4, **settings)
        start = time.perf_counter()
        model.generate(prompts, max_new_tokens=32, min_new_tokens=32, **settings)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256, 384, 576])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    import torch
    import transformers

    from smolalign.hardware import cpu_computes_bf16

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or ''}".strip(", "),
                      "cpu_bf16": cpu_computes_bf16(), "threads": args.threads, "torch": torch.__version__}))
    shapes = {"tests' tiny": TINY} | {f"SmolLM2-shaped, {w} wide": smollm2_shaped(w, args.layers) for w in args.widths}
    for name, shape in shapes.items():
        train = {mixed: training_seconds(shape, mixed, args.steps) for mixed in (False, True)}
        generate = {bf16: generation_seconds(shape, bf16) for bf16 in (False, True)}
        print(json.dumps({"model": name, "hidden": shape["hidden_size"], "layers": shape["num_hidden_layers"],
                          "train_s_float32": round(train[False], 2), "train_s_autocast": round(train[True], 2),
                          "train_bf16_speedup": round(train[False] / train[True], 2),
                          "generate_s_float32": round(generate[False], 2), "generate_s_bf16": round(generate[True], 2),
                          "generate_bf16_speedup": round(generate[False] / generate[True], 2)}), flush=True)


if __name__ == "__main__":
    main()
