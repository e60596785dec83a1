"""SFT throughput on one GPU: `smolalign sft` against plain TRL `SFTTrainer`, on the same randomly initialised
SmolLM3-3B, the same conversations and the same padding-free BFD packing, one run each, side by side.

    python benchmarks/gpu_sft.py [--steps 30] [--max-length 16384] [--words 1500] [--peak-tflops 989]
                                 [--only smolalign|trl]

smolalign runs its recipe path (flex attention, Liger when installed, gradient checkpointing, bf16); plain TRL runs
SFTConfig with the same batch, packing and checkpointing and its defaults otherwise. tokens/s = the tokens trained
between the end of step --warmup and the last step over the wall time between them (both logged each step), so the
first steps' compilation (flex attention's block mask compiles for minutes) is left out; the whole run's rate, first
steps included, is printed beside it, and so is the time to the first logged step (loading, compilation, one step).
Each run's result is printed as it ends (`RUN name {json}`), so a lease that ends during the second run keeps the
first's; `--only` runs one of them. MFU =
tokens/s × (6 N + 12 L d s̄) / peak, with N parameters, L layers, d hidden size and s̄ the mean document length
(packed documents do not attend to each other). Without a GPU it says so and exits 0.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, where benchmarks/rewards.py would shadow the
# `rewards` package that smolalign imports: the folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
from gpu_model import REPO, conversations, parameter_count, peak_flops, require_gpu, smollm3_3b  # noqa: E402

PLAIN_TRL = """
import json, sys, time
import datasets, torch
from transformers import AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer
model, data, out, settings = sys.argv[1:5]
settings = json.loads(settings)
tokenizer = AutoTokenizer.from_pretrained(model)
args = SFTConfig(output_dir=out, bf16=True, report_to="none", save_strategy="no", logging_steps=1,
                 model_init_kwargs={"dtype": torch.bfloat16}, **settings)
points = []
class Clock(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "num_tokens" in logs:
            points.append({"step": state.global_step, "time": time.time(), "num_tokens": logs["num_tokens"]})
trainer = SFTTrainer(model=model, args=args, train_dataset=datasets.load_dataset("json", data_files=data)["train"],
                     processing_class=tokenizer, callbacks=[Clock()])
result = trainer.train()
print("RESULT " + json.dumps({"train_runtime": result.metrics["train_runtime"], "num_tokens": points[-1]["num_tokens"],
                              "points": points}))
"""


def steady_rate(points: list[dict], warmup: int) -> float | None:
    """Tokens per second between the end of step `warmup` and the last logged step (None if too few steps)."""
    start = next((p for p in points if p["step"] == warmup), None)
    end = points[-1] if points else None
    if start is None or end is start or end["time"] <= start["time"]:
        return None
    return (end["num_tokens"] - start["num_tokens"]) / (end["time"] - start["time"])


def first_step_seconds(result: dict) -> float:
    """Seconds from the trainer's start to its first logged step: the run's time less the logged steps' span."""
    points = result["points"]
    return result["train_runtime"] - (points[-1]["time"] - points[0]["time"])


def smolalign_run(model: Path, data: Path, work: Path, settings: dict) -> dict:
    import importlib.util

    import yaml

    train = {**settings, "logging_steps": 1, "save_strategy": "no", "learning_rate": 1e-5}
    if importlib.util.find_spec("liger_kernel"):
        train["use_liger_kernel"] = True
    recipe = work / "sft.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(model), "dtype": "bfloat16", "attn_implementation": "flex_attention"},
        "template": {"name": "chatml"}, "data": {"sources": [{"path": str(data)}]}, "train": train}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "smolalign", "sft", str(recipe), "-o", str(work / "smolalign-run"),
                    "--overwrite"], check=True, env=env, cwd=REPO)
    rows = [json.loads(line) for line in (work / "smolalign-run" / "metrics.jsonl").read_text().splitlines()]
    runtime = next(r["train_runtime"] for r in rows if "train_runtime" in r)
    points = [r for r in rows if "num_tokens" in r and "time" in r]
    return {"train_runtime": runtime, "num_tokens": points[-1]["num_tokens"], "points": points,
            "liger": "use_liger_kernel" in train}


def plain_trl_run(model: Path, data: Path, work: Path, settings: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", PLAIN_TRL, str(model), str(data), str(work / "trl-run"),
                          json.dumps(settings)], check=True, stdout=subprocess.PIPE, text=True, cwd=REPO)
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--max-length", type=int, default=16384)
    parser.add_argument("--words", type=int, default=1500, help="mean assistant words per conversation")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of the steady-state rate")
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--only", choices=("smolalign", "trl"), default=None, help="run only this side")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "smolalign-gpu-bench")
    args = parser.parse_args()
    require_gpu("SFT tokens/s and MFU, smolalign vs plain TRL")
    import torch
    from transformers import AutoConfig, AutoTokenizer

    args.work.mkdir(parents=True, exist_ok=True)
    model = smollm3_3b(args.work / "smollm3-3b-random")
    tokenizer = AutoTokenizer.from_pretrained(model)
    rows = conversations(4000, args.words)
    data = args.work / "chat.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lengths = [len(tokenizer.apply_chat_template(r["messages"], tokenize=True, return_dict=False)) for r in rows[:200]]
    mean_doc = sum(lengths) / len(lengths)
    settings = {"max_length": args.max_length, "packing": True, "packing_strategy": "bfd", "max_steps": args.steps,
                "per_device_train_batch_size": args.batch, "gradient_accumulation_steps": 1,
                "gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"use_reentrant": False}}
    config = AutoConfig.from_pretrained(model)
    n = parameter_count(model)
    flops_per_token = 6 * n + 12 * config.num_hidden_layers * config.hidden_size * mean_doc
    device = torch.cuda.get_device_name(0)
    peak = peak_flops(device, args.peak_tflops)
    print(f"GPU {device}; SmolLM3 random init, {n / 1e9:.2f} B parameters; rows of {args.max_length} tokens, "
          f"documents of {mean_doc:.0f} tokens on average; {args.steps} steps")
    runs = {"smolalign sft": smolalign_run, "plain TRL SFTTrainer": plain_trl_run}
    if args.only:
        runs = {name: run for name, run in runs.items() if args.only in name.lower()}
    results = {}
    for name, run in runs.items():
        results[name] = run(model, data, args.work, settings)
        print(f"RUN {name} " + json.dumps(results[name]), flush=True)
    print(f"| run | tokens/s after step {args.warmup} | MFU | tokens/s, whole run | time to step 1 |\n"
          "|---|---|---|---|---|")
    rates = {}
    for name, result in results.items():
        whole = result["num_tokens"] / result["train_runtime"]
        rates[name] = steady_rate(result["points"], args.warmup) or whole
        mfu = f"{rates[name] * flops_per_token / peak:.1%}" if peak else "(pass --peak-tflops)"
        print(f"| {name}{' (Liger)' if result.get('liger') else ''} | {rates[name]:,.0f} | {mfu} | {whole:,.0f} | "
              f"{first_step_seconds(result):.0f} s |")
    if len(rates) == 2:
        print(f"ratio smolalign / TRL: {rates['smolalign sft'] / rates['plain TRL SFTTrainer']:.2f}")


if __name__ == "__main__":
    main()
