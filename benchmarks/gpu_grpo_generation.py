"""GRPO generation throughput on one GPU: vLLM colocated (the engine `generation.backend: vllm_colocate` runs in the
training process, at TRL's colocate memory share) against transformers `generate` (`backend: transformers`), on the
same randomly initialised SmolLM3-3B, the same prompts, group size, sampling and completion budget.

    python benchmarks/gpu_grpo_generation.py [--prompts 32] [--generations 8] [--max-tokens 512] [--memory 0.3]

tokens/s counts generated tokens (a random model rarely stops, so nearly the whole budget) over generation time,
model and engine start-up excluded. Without a GPU or vLLM it says so and exits 0.
"""

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, where benchmarks/rewards.py would shadow the
# `rewards` package that smolalign imports: the folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
from gpu_model import require_gpu, smollm3_3b  # noqa: E402


def prompts(tokenizer, count: int) -> list[list[int]]:
    questions = [f"what is {i} plus {i + 7}? Explain step by step." for i in range(count)]
    return [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                          tokenize=True, return_dict=False) for q in questions]


def transformers_rate(model_dir: Path, ids: list[list[int]], args) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, device_map={"": 0}).eval()
    batch = tokenizer.pad({"input_ids": [p for p in ids for _ in range(args.generations)]}, return_tensors="pt")
    batch = {k: v.to("cuda") for k, v in batch.items()}
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**batch, do_sample=True, temperature=1.0, max_new_tokens=args.max_tokens,
                             pad_token_id=tokenizer.pad_token_id)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    new = out[:, batch["input_ids"].shape[1]:]
    produced = int((new != tokenizer.pad_token_id).sum())
    del model
    torch.cuda.empty_cache()
    return produced / elapsed


def vllm_rate(model_dir: Path, ids: list[list[int]], args) -> float:
    from vllm import LLM, SamplingParams

    llm = LLM(str(model_dir), dtype="bfloat16", gpu_memory_utilization=args.memory,
              max_model_len=args.max_tokens + 256, seed=0)
    params = SamplingParams(n=args.generations, temperature=1.0, max_tokens=args.max_tokens)
    start = time.perf_counter()
    outputs = llm.generate([{"prompt_token_ids": p} for p in ids], params, use_tqdm=False)
    elapsed = time.perf_counter() - start
    return sum(len(c.token_ids) for o in outputs for c in o.outputs) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--memory", type=float, default=0.3, help="vLLM's GPU memory share (TRL's colocate default)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "smolalign-gpu-bench")
    args = parser.parse_args()
    require_gpu("GRPO generation tokens/s, vLLM colocate vs transformers")
    if importlib.util.find_spec("vllm") is None:
        print("GRPO generation: needs vLLM (pip install 'smolalign[vllm]'); not measured here")
        return
    import torch
    from transformers import AutoTokenizer

    model_dir = smollm3_3b(args.work / "smollm3-3b-random")
    ids = prompts(AutoTokenizer.from_pretrained(model_dir), args.prompts)
    print(f"GPU {torch.cuda.get_device_name(0)}; {args.prompts} prompts × {args.generations} generations, "
          f"≤ {args.max_tokens} new tokens, T=1.0")
    hf = transformers_rate(model_dir, ids, args)
    print(f"transformers generate: {hf:,.0f} tokens/s")
    fast = vllm_rate(model_dir, ids, args)
    print(f"vLLM colocated (gpu_memory_utilization {args.memory}): {fast:,.0f} tokens/s")
    print(f"ratio vLLM / transformers: {fast / hf:.2f}")


if __name__ == "__main__":
    main()
