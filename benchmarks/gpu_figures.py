"""The GPU figures of the precision and speed work, prepared to run on one GPU in few calls: whether bf16 training
learns at float32 masters' pace, smolalign's tokens/s against plain TRL at equal settings, the plan's step time
against the measured, and flex attention's first step with a cold and a warm compile cache.

    python benchmarks/gpu_figures.py [--parts optimizer,precision,speed,plan,compile] [--out DIR] [--steps 10]
    python benchmarks/gpu_figures.py --smoke      # every part on the CPU with a small model: checks the script

Parts, in the order they matter, with their time on one H200 estimated from the first lease's runs (each child run:
~15 s of start-up, loading and saving around its steps); no call should pass 8 minutes, so the parts go in three
calls, `--parts optimizer,precision`, `--parts speed`, `--parts plan,compile --compile-lengths 4k,16k`:
- optimizer (~30 s): `benchmarks/optimizer_step.py` on the 3B's shapes: the fused stochastic-rounding kernel, its torch
  operations and float32 masters, against `adamw_torch_fused` on bf16 weights.
- precision (~2.5 min): `smolalign sft`, 4,096-token rows, lr 1e-5, sdpa, no Liger: bf16 weights with the default
  (stochastic-rounding AdamW), float32 masters under bf16 autocast (`model.dtype: float32`), bf16 weights with plain
  fused AdamW. The bar: the default's loss at the last step within 3% of float32 masters'.
- speed (~6 min): smolalign against plain TRL, sdpa, 4,096-token rows, Liger on and off, assistant-only loss on and
  off (benchmarks/gpu_sft.py's sides); and smolalign with TRL's optimizer once, to show the optimizer's share.
- plan (~2.5 min without vLLM): the plan's "time per step" (printed by each run) against the measured steady step:
  SFT with flex attention at 4,096 and 16,384 tokens, GRPO with transformers' generation (32 answers of 256 tokens),
  and with vLLM colocated when vLLM is installed.
- compile (4k and 16k: ~6 min, most of it the 16k first compile, 247 s on the first lease): the time to step 1 with
  flex attention at each of --compile-lengths (4k, 16k, 64k), with an empty compile cache and then again with the
  cache the first run left.
Each finished run's row goes to OUT/gpu_figures.md (and its raw numbers to OUT/gpu_figures.jsonl) at once, so a call
that runs out of time keeps what it measured. Without a GPU (and without --smoke) it says so and exits 0.
"""

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
from gpu_model import REPO, conversations, require_gpu, smollm3_3b  # noqa: E402
from gpu_sft import (  # noqa: E402
    Side,
    first_step_seconds,
    plain_trl_run,
    run_smolalign,
    shared_settings,
    smolalign_run,
    steady_rate,
    steady_step_seconds,
    with_checkout,
)

PARTS = ("optimizer", "precision", "speed", "plan", "compile")
LENGTHS = {"4k": 4096, "16k": 16384, "64k": 65536}
SMALL = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2}
"""The model of `--smoke`: SmolLM3's architecture at 2 layers of 256, so every part runs on a CPU in minutes."""


@dataclass
class Context:
    model: Path
    data: Path
    prompts: Path
    work: Path
    out: Path
    steps: int
    warmup: int
    lengths: dict[str, int]
    """The row lengths by the name the figures use ("4k", "16k", "64k"), scaled down by --smoke."""
    smoke: bool
    env: dict = field(default_factory=dict)
    compile_lengths: tuple[str, ...] = ("4k", "16k", "64k")

    def write(self, *lines: str, record: dict | None = None) -> None:
        with (self.out / "gpu_figures.md").open("a") as md:
            md.write("".join(line + "\n" for line in lines))
        if record is not None:
            with (self.out / "gpu_figures.jsonl").open("a") as raw:
                raw.write(json.dumps(record) + "\n")
        print("\n".join(lines), flush=True)


def gib(result: dict) -> str:
    return f"{result['peak_bytes'] / 2 ** 30:.1f} GiB" if result.get("peak_bytes") else "—"


def losses(result: dict) -> list[float]:
    return [row["loss"] for row in result["rows"] if "loss" in row]


def optimizer(ctx: Context) -> None:
    command = [sys.executable, str(_HERE / "optimizer_step.py")]
    command += ["--device", "cpu", "--model", "smollm2-135m", "--repeats", "1"] if ctx.smoke else ["--repeats", "5"]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, cwd=REPO, env=with_checkout()).stdout
    ctx.write("### One AdamW step over SmolLM3-3B's shapes — `python benchmarks/optimizer_step.py`", "",
              *[line for line in out.splitlines() if line.startswith(("|", "copy", "NVIDIA", "CPU"))], "")


def precision(ctx: Context) -> None:
    plain = "adamw_torch" if ctx.smoke else "adamw_torch_fused"
    sides = {"bf16 weights, stochastic-rounding AdamW (the default)": Side(dtype="bfloat16"),
             "float32 masters, bf16 autocast (`model.dtype: float32`)": Side(dtype="float32"),
             f"bf16 weights, plain AdamW (`train.optim: {plain}`)": Side(dtype="bfloat16", optim=plain)}
    settings = shared_settings(ctx.lengths["4k"], ctx.steps)
    ctx.write(f"### Precision: {ctx.steps} SFT steps at lr 1e-5, {ctx.lengths['4k']:,}-token rows, sdpa, no Liger",
              "", "| weights and optimizer | loss at step 1 | at the last step | over float32 masters | s a step "
              f"after step {ctx.warmup} | peak allocated |", "|---|---|---|---|---|---|")
    reference = None
    for number, (label, side) in enumerate(sides.items()):
        result = smolalign_run(ctx.model, ctx.data, ctx.work, settings, side, name=f"precision-{number}",
                               env=ctx.env)
        run_losses = losses(result)
        if side.dtype == "float32":
            reference = run_losses[-1]
        ratio = f"{run_losses[-1] / reference:.3f}x" if reference else "(reference next)"
        ctx.write(f"| {label} | {run_losses[0]:.3f} | {run_losses[-1]:.3f} | {ratio} | "
                  f"{steady_step_seconds(result['points'], ctx.warmup) or 0:.3f} | {gib(result)} |",
                  record={"part": "precision", "label": label, "losses": run_losses, **result})
    ctx.write("")


def speed(ctx: Context) -> None:
    settings = shared_settings(ctx.lengths["4k"], ctx.steps)
    ligers = (False,) if ctx.smoke else (False, True)
    ctx.write(f"### Speed at equal settings: {ctx.lengths['4k']:,}-token rows, sdpa, {ctx.steps} steps, tokens/s "
              f"after step {ctx.warmup}", "", "| settings (both sides) | smolalign | plain TRL | smolalign / TRL | "
              "peak allocated, smolalign / TRL |", "|---|---|---|---|---|")
    for liger in ligers:
        for assistant_only in (True, False):
            side = Side("sdpa", liger, assistant_only)
            tag = f"speed-{int(liger)}{int(assistant_only)}"
            ours = smolalign_run(ctx.model, ctx.data, ctx.work, settings, side, name=f"{tag}-smolalign", env=ctx.env)
            theirs = plain_trl_run(ctx.model, ctx.data, ctx.work, settings, side, name=f"{tag}-trl")
            rate, trl_rate = steady_rate(ours["points"], ctx.warmup), steady_rate(theirs["points"], ctx.warmup)
            ctx.write(f"| {side.label()} | {rate:,.0f} | {trl_rate:,.0f} | {rate / trl_rate:.2f}x | "
                      f"{gib(ours)} / {gib(theirs)} |",
                      record={"part": "speed", "settings": side.label(), "smolalign": ours, "trl": theirs})
    side = Side("sdpa", ligers[-1], True, optim="adamw_torch" if ctx.smoke else "adamw_torch_fused")
    same_optimizer = smolalign_run(ctx.model, ctx.data, ctx.work, settings, side, name="speed-optim", env=ctx.env)
    ctx.write(f"| {side.label()}, smolalign with TRL's optimizer (`train.optim: {side.optim}`) | "
              f"{steady_rate(same_optimizer['points'], ctx.warmup):,.0f} | | | {gib(same_optimizer)} |", "",
              record={"part": "speed", "settings": side.label() + ", TRL's optimizer", "smolalign": same_optimizer})


def grpo_run(ctx: Context, backend: str) -> dict:
    """`smolalign rl` GRPO on the prompts: 4 prompts x 8 answers of up to 256 tokens a step (16 on --smoke)."""
    import yaml

    name = f"grpo-{backend}"
    recipe = {"model": {"source": str(ctx.model), "dtype": "bfloat16", "attn_implementation": "sdpa"},
              "template": {"name": "chatml"}, "method": "grpo", "data": {"sources": [{"path": str(ctx.prompts)}]},
              "rewards": [{"name": "math_accuracy"}], "generation": {"backend": backend},
              "train": {"num_generations": 8, "per_device_train_batch_size": 32,
                        "max_completion_length": 16 if ctx.smoke else 256, "max_steps": max(4, ctx.warmup + 2),
                        "learning_rate": 1e-6, "logging_steps": 1, "save_strategy": "no",
                        "gradient_checkpointing": True}}
    (ctx.work / f"{name}.yaml").write_text(yaml.safe_dump(recipe))
    result = run_smolalign("rl", ctx.work / f"{name}.yaml", ctx.work / f"{name}-run", ctx.env)
    return {**result, "points": [row for row in result["rows"] if "time" in row and "step" in row and "train_runtime" not in row]}


def plan(ctx: Context) -> None:
    ctx.write("### The plan's step time against the measured", "", "| run | planned s a step | measured s a step "
              f"after step {ctx.warmup} | planned / measured | time to step 1 |", "|---|---|---|---|---|")

    def row(label: str, result: dict, warmup: int) -> None:
        measured = steady_step_seconds(result["points"], warmup)
        planned = result["planned_step_seconds"]
        ratio = f"{planned / measured:.2f}" if planned and measured else "—"
        ctx.write(f"| {label} | {planned or '—'} | {measured or 0:.3f} | {ratio} | {first_step_seconds(result):.0f} s |",
                  record={"part": "plan", "label": label, **result})

    lengths = ["4k"] if ctx.smoke else ["4k", "16k"]
    for length in lengths:
        settings = shared_settings(ctx.lengths[length], ctx.steps)
        result = smolalign_run(ctx.model, ctx.data, ctx.work, settings, Side("flex_attention"), name=f"plan-{length}",
                               env=ctx.env)
        row(f"SFT, flex attention, {ctx.lengths[length]:,}-token rows", result, ctx.warmup)
    row("GRPO, transformers generation, 32 answers", grpo_run(ctx, "transformers"), 2)
    if importlib.util.find_spec("vllm") is not None and not ctx.smoke:
        row("GRPO, vLLM colocated, 32 answers", grpo_run(ctx, "vllm_colocate"), 2)
    ctx.write("")


def compile_times(ctx: Context) -> None:
    ctx.write("### Flex attention's first step: an empty compile cache, then the cache the first run left", "",
              "| rows | time to step 1, empty cache | with the cache | peak allocated |", "|---|---|---|---|")
    for length in ["4k"] if ctx.smoke else ctx.compile_lengths:
        cache = Path(tempfile.mkdtemp(prefix=f"inductor-{length}-", dir=ctx.work))
        env = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton")}
        settings = shared_settings(ctx.lengths[length], 3)
        firsts = []
        for attempt in ("cold", "warm"):
            result = smolalign_run(ctx.model, ctx.data, ctx.work, settings, Side("flex_attention"),
                                   name=f"compile-{length}-{attempt}", env={**ctx.env, **env})
            firsts.append(first_step_seconds(result))
        ctx.write(f"| {ctx.lengths[length]:,} tokens | {firsts[0]:.0f} s | {firsts[1]:.0f} s | {gib(result)} |",
                  record={"part": "compile", "length": ctx.lengths[length], "first_step_seconds": firsts})
    ctx.write("")


RUNS = {"optimizer": optimizer, "precision": precision, "speed": speed, "plan": plan, "compile": compile_times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "."))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the steady-state rates")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "smolalign-gpu-figures")
    parser.add_argument("--compile-lengths", default="4k,16k,64k", help="the compile part's row lengths")
    parser.add_argument("--smoke", action="store_true", help="run on the CPU with a small model (checks the script)")
    args = parser.parse_args()
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    if unknown := [part for part in parts if part not in RUNS]:
        parser.error(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    if unknown := [length for length in args.compile_lengths.split(",") if length.strip() not in LENGTHS]:
        parser.error(f"unknown --compile-lengths {unknown}; choose from {', '.join(LENGTHS)}")
    if not args.smoke:
        require_gpu("precision, speed against TRL, the plan's step time and flex attention's compilation")
    import torch
    import transformers
    import trl

    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    scale = 8 if args.smoke else 1
    model = smollm3_3b(args.work / ("smollm3-small" if args.smoke else "smollm3-3b-random"),
                       **({"layers": 2, "device": "cpu", **SMALL} if args.smoke else {}))
    data = args.work / "chat.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in conversations(800, 75 if args.smoke else 600)))
    prompts = args.work / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"what is {i} plus {i + 7}?", "solution": str(2 * i + 7)}) + "\n"
                               for i in range(256)))
    ctx = Context(model, data, prompts, args.work, args.out, 3 if args.smoke else args.steps,
                  1 if args.smoke else args.warmup,
                  {name: tokens // scale for name, tokens in LENGTHS.items()}, args.smoke,
                  {"SMOLALIGN_CPU_BF16": "1"} if args.smoke else {},
                  tuple(length.strip() for length in args.compile_lengths.split(",") if length.strip()))
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not args.smoke else "CPU (--smoke)"
    ctx.write(f"## GPU figures on {device} — `python benchmarks/gpu_figures.py --parts {','.join(parts)}` "
              f"({datetime.date.today()})", "", f"torch {torch.__version__}, transformers {transformers.__version__}, "
              f"trl {trl.__version__}; a random SmolLM3 ({'2 layers of 256, --smoke' if args.smoke else '3B'}).", "")
    for part in parts:
        started = time.perf_counter()
        RUNS[part](ctx)
        print(f"[{part}: {time.perf_counter() - started:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
