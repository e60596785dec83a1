"""The GPU figures of the precision and speed work, prepared to run on one GPU in few calls: whether bf16 training
learns at float32 masters' pace, smolalign's tokens/s against plain TRL at equal settings, the plan's step time
against the measured, and flex attention's first step with a cold and a warm compile cache.

    python benchmarks/gpu_figures.py [--parts optimizer,precision,speed,plan,compile] [--out DIR] [--steps 10]
    python benchmarks/gpu_figures.py --smoke      # every part on the CPU with a small model: checks the script

Parts, in the order they matter, with their time on one H200 estimated from the first lease's runs (each child run:
~15 s of start-up, loading and saving around its steps):
- optimizer (~30 s): `benchmarks/optimizer_step.py` on the 3B's shapes: the fused stochastic-rounding kernel, its torch
  operations and float32 masters, against `adamw_torch_fused` on bf16 weights.
- precision (~2.5 min): `smolalign sft`, 4,096-token rows, lr 1e-5, sdpa, no Liger: bf16 weights with the default
  (stochastic-rounding AdamW), float32 masters under bf16 autocast (`model.dtype: float32`), bf16 weights with the
  trainer's own fused AdamW (smolalign's choice switched off: `Side.plain_adamw`; torch's AdamW named in train.optim
  still gets the stochastic rounding). The bar: the default's loss at the last step within 3% of float32 masters'.
- speed (~6 min): smolalign against plain TRL, sdpa, 4,096-token rows, Liger on (first) and off, assistant-only loss
  on and off (benchmarks/gpu_sft.py's sides); and smolalign with TRL's optimizer once, to show the optimizer's share.
  Every row names the optimizer each run's trainer created.
  Each side profiles the last two steps of its warm-up (benchmarks/step_profile.py): wall time, the device's busy
  share, the host's waits and the longest kernels, a row each, the full tables in OUT/profile-*.md.
- plan (~6 min without vLLM, most of it compiling flex attention for 16k rows: 247 s on the first lease): the plan's
  "time per step" (printed by each run) against the measured steady step: SFT with flex attention at 4,096 and 16,384
  tokens, each from an empty compile cache, GRPO with transformers' generation (32 answers of 256 tokens), and with
  vLLM colocated when vLLM is installed.
- compile (~1.5 min after plan): the time to step 1 with flex attention at each of --compile-lengths (4k, 16k, 64k),
  with an empty compile cache and then with the cache that run left; the plan part's flex runs are the empty-cache
  side of their lengths, so after it only the warm runs are left.
What the GPU image lacks (TRL, datasets, Liger, DeepSpeed, ...) travels as wheels: `benchmarks/gpu_wheels.py` says how.
A session's 15 minutes of device time, a fresh machine's start included, hold two calls made back to back (the
machine stays warm between them): `--parts optimizer,precision,speed --deadline 440` (timeout 480), then `--parts
plan,compile --compile-lengths 4k,16k --deadline N` with N a minute under the time left. --deadline starts no run
with under 45 s left and kills a run still going at it, so the call ends inside its limit. Each finished run's row goes
to OUT/gpu_figures.md (and its raw numbers to OUT/gpu_figures.jsonl) at once, a failed run's row says why (its
standard error in OUT/gpu_figures.log) and the next run starts. Without a GPU (and without --smoke) it says so and
exits 0.
"""

import argparse
import datetime
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
import step_profile  # noqa: E402
from gpu_model import conversations, require_gpu, smollm3_3b  # noqa: E402
from gpu_sft import (  # noqa: E402
    ChildFailed,
    Side,
    first_step_seconds,
    plain_trl_run,
    run_child,
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


MIN_RUN_SECONDS = 45
"""A run is not started with less of --deadline left: a child's start-up, loading and saving alone take ~15 s."""


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
    deadline: float | None = None
    """time.monotonic() by which every run has ended (--deadline): later runs are not started, a late one is killed."""
    cold_compiles: dict[str, tuple[dict, float]] = field(default_factory=dict)
    """By row length: the compile-cache environment of a flex run that started with an empty cache, and its time to
    step 1 (the plan part's runs), so that the compile part only runs the warm side."""

    @property
    def profile_steps(self) -> tuple[int, int]:
        """The steps a speed run profiles: the last two of its warm-up, before the span its rate is measured over."""
        return max(1, self.warmup - 1), self.warmup

    def profiled(self, name: str) -> dict:
        """The environment that has a benchmark child profile its steps into OUT/`step_profile.tables_file(name)`."""
        first, last = self.profile_steps
        return step_profile.environment(self.out / step_profile.tables_file(name), f"{first}-{last}")

    def write(self, *lines: str, record: dict | None = None) -> None:
        with (self.out / "gpu_figures.md").open("a") as md:
            md.write("".join(line + "\n" for line in lines))
        if record is not None:
            with (self.out / "gpu_figures.jsonl").open("a") as raw:
                raw.write(json.dumps(record) + "\n")
        print("\n".join(lines), flush=True)

    def attempt(self, label: str, run: Callable[..., Any], *args, **kwargs) -> Any:
        """`run(*args, **kwargs, timeout=...)`'s result, given the time --deadline leaves; None, with a row saying so,
        when it failed or too little time is left to start it. A failed child's standard error goes to
        OUT/gpu_figures.log, and the next run starts."""
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and left < MIN_RUN_SECONDS:
            self.write(f"| {label} | not run: {max(left, 0):.0f} s of --deadline left |")
            return None
        try:
            return run(*args, **kwargs, timeout=left)
        except Exception as failure:  # noqa: BLE001 (a run that failed in any way must not cost the runs after it)
            reason = failure.reason if isinstance(failure, ChildFailed) else f"{type(failure).__name__}: {failure}"
            detail = failure.stderr if isinstance(failure, ChildFailed) else traceback.format_exc()
            with (self.out / "gpu_figures.log").open("a") as log:
                log.write(f"=== {label}: {reason}\n{detail}\n")
            print(detail, file=sys.stderr, flush=True)
            self.write(f"| {label} | failed: {reason.replace('|', '/')[:300]} (gpu_figures.log) |")
            return None


def gib(result: dict) -> str:
    return f"{result['peak_bytes'] / 2 ** 30:.1f} GiB" if result.get("peak_bytes") else "—"


def losses(result: dict) -> list[float]:
    return [row["loss"] for row in result["rows"] if "loss" in row]


def optimizer(ctx: Context) -> None:
    command = [sys.executable, str(_HERE / "optimizer_step.py")]
    command += ["--device", "cpu", "--model", "smollm2-135m", "--repeats", "1"] if ctx.smoke else ["--repeats", "5"]
    out = ctx.attempt("one AdamW step", run_child, command, with_checkout())
    if out:
        ctx.write("### One AdamW step over SmolLM3-3B's shapes — `python benchmarks/optimizer_step.py`", "",
                  *[line for line in out.splitlines() if line.startswith(("|", "copy", "NVIDIA", "CPU"))], "")


PRECISION_BAR = 1.03
"""The default's loss at step 10 over float32 masters' on the 3B (issue 52: within 3%)."""


def precision(ctx: Context) -> None:
    sides = {"bf16 weights, stochastic-rounding AdamW (the default)": Side(dtype="bfloat16"),
             "float32 masters, bf16 autocast (`model.dtype: float32`)": Side(dtype="float32"),
             "bf16 weights, the trainer's own AdamW rounded to the nearest (smolalign's choice switched off)":
                 Side(dtype="bfloat16", plain_adamw=True)}
    settings = shared_settings(ctx.lengths["4k"], ctx.steps)
    ctx.write(f"### Precision: {ctx.steps} SFT steps at lr 1e-5, {ctx.lengths['4k']:,}-token rows, sdpa, no Liger",
              "", "| weights and optimizer | optimizer that ran | loss at step 1 | at the last step | s a step "
              f"after step {ctx.warmup} | peak allocated |", "|---|---|---|---|---|---|")
    last = {}
    for number, (label, side) in enumerate(sides.items()):
        result = ctx.attempt(label, smolalign_run, ctx.model, ctx.data, ctx.work, settings, side,
                             name=f"precision-{number}", env=ctx.env)
        if result is None:
            continue
        run_losses = losses(result)
        last[label] = run_losses[-1]
        ctx.write(f"| {label} | {result.get('optimizer')} | {run_losses[0]:.3f} | {run_losses[-1]:.3f} | "
                  f"{steady_step_seconds(result['points'], ctx.warmup) or 0:.3f} | {gib(result)} |",
                  record={"part": "precision", "label": label, "losses": run_losses, **result})
    default, reference = (last.get(label) for label in list(sides)[:2])
    if default is not None and reference is not None:
        ratio = default / reference
        ctx.write("", f"The default's loss at step {ctx.steps} over float32 masters': {ratio:.3f}x "
                  f"({'within' if ratio <= PRECISION_BAR else 'outside'} the {PRECISION_BAR - 1:.0%} bar).")
    ctx.write("")


def speed(ctx: Context) -> None:
    settings = shared_settings(ctx.lengths["4k"], ctx.steps)
    ligers = (False,) if ctx.smoke else (True, False)
    ctx.write(f"### Speed at equal settings: {ctx.lengths['4k']:,}-token rows, sdpa, {ctx.steps} steps, tokens/s "
              f"after step {ctx.warmup}", "", "| settings (both sides) | smolalign | plain TRL | smolalign / TRL | "
              "peak allocated, smolalign / TRL | optimizers that ran, smolalign / TRL |", "|---|---|---|---|---|---|")
    profiles = {}
    for liger in ligers:
        for assistant_only in (True, False):
            side = Side("sdpa", liger, assistant_only)
            tag = f"speed-{int(liger)}{int(assistant_only)}"
            our_name, trl_name = f"{tag}-smolalign", f"{tag}-trl"
            ours = ctx.attempt(f"{side.label()}: smolalign", smolalign_run, ctx.model, ctx.data, ctx.work, settings,
                               side, name=our_name, env={**ctx.env, **ctx.profiled(our_name)})
            theirs = ctx.attempt(f"{side.label()}: plain TRL", plain_trl_run, ctx.model, ctx.data, ctx.work, settings,
                                 side, name=trl_name, env=ctx.profiled(trl_name))
            for who, name, result in (("smolalign", our_name, ours), ("plain TRL", trl_name, theirs)):
                if result is not None:
                    profiles[f"{side.label()}: {who}"] = (result.get("profile"), step_profile.tables_file(name))
            if ours is None or theirs is None:
                continue
            rate, trl_rate = steady_rate(ours["points"], ctx.warmup), steady_rate(theirs["points"], ctx.warmup)
            ctx.write(f"| {side.label()} | {rate:,.0f} | {trl_rate:,.0f} | {rate / trl_rate:.2f}x | "
                      f"{gib(ours)} / {gib(theirs)} | {ours.get('optimizer')} / {theirs.get('optimizer')} |",
                      record={"part": "speed", "settings": side.label(), "smolalign": ours, "trl": theirs})
    side = Side("sdpa", ligers[0], True, plain_adamw=True)
    same_optimizer = ctx.attempt(f"{side.label()}, smolalign with TRL's optimizer", smolalign_run, ctx.model,
                                 ctx.data, ctx.work, settings, side, name="speed-optim", env=ctx.env)
    if same_optimizer is not None:
        label = f"{side.label()}, smolalign with TRL's optimizer ({same_optimizer['optimizer']} ran)"
        ctx.write(f"| {label} | {steady_rate(same_optimizer['points'], ctx.warmup):,.0f} | | | "
                  f"{gib(same_optimizer)} | {same_optimizer['optimizer']} |", record={"part": "speed", "settings": label, "smolalign": same_optimizer})
    ctx.write("")
    write_profiles(ctx, profiles)


def write_profiles(ctx: Context, profiles: dict[str, tuple[dict | None, str]]) -> None:
    """Where the speed part's steps went: one row a run from its step profile (benchmarks/step_profile.py), whose
    tables are in OUT/FILE."""
    first, last = ctx.profile_steps
    ctx.write(f"Where the time of steps {first}-{last} went (torch's profiler; those steps run before the measured "
              "span):", "", "| run | s a step (wall) | device busy | host waits a step | the longest kernels, ms a step "
              "| tables |", "|---|---|---|---|---|---|")
    for label, (summary, file) in profiles.items():
        if summary is None:
            ctx.write(f"| {label} | no profile printed | | | | |")
            continue
        share = summary["device_busy_share"]
        kernels = "; ".join(f"{name[:40]} {seconds * 1e3:.1f}" for name, seconds in summary["top_device"][:3]) or "—"
        ctx.write(f"| {label} | {summary['wall_s_per_step']:.3f} | {'—' if share is None else f'{share:.0%}'} | "
                  f"{summary['host_syncs_per_step']:g} | {kernels.replace('|', '/')} | {file} |",
                  record={"part": "profile", "label": label, **summary})
    ctx.write("")


def grpo_run(ctx: Context, backend: str, timeout: float | None = None) -> dict:
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
    result = run_smolalign("rl", ctx.work / f"{name}.yaml", ctx.work / f"{name}-run", ctx.env, timeout)
    return {**result, "points": [row for row in result["rows"] if "time" in row and "step" in row and "train_runtime" not in row]}


def empty_compile_cache(ctx: Context, length: str) -> dict:
    """The environment of a run whose compiled kernels go to a new, empty cache."""
    cache = Path(tempfile.mkdtemp(prefix=f"inductor-{length}-", dir=ctx.work))
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton")}


def plan(ctx: Context) -> None:
    ctx.write("### The plan's step time against the measured", "", "| run | planned s a step | measured s a step "
              f"after step {ctx.warmup} | planned / measured | time to step 1 |", "|---|---|---|---|---|")

    def row(label: str, result: dict | None, warmup: int) -> None:
        if result is None:
            return
        measured = steady_step_seconds(result["points"], warmup)
        planned = result["planned_step_seconds"]
        ratio = f"{planned / measured:.2f}" if planned and measured else "—"
        ctx.write(f"| {label} | {planned or '—'} | {measured or 0:.3f} | {ratio} | {first_step_seconds(result):.0f} s |",
                  record={"part": "plan", "label": label, **result})

    for length in ["4k"] if ctx.smoke else ["4k", "16k"]:
        settings = shared_settings(ctx.lengths[length], ctx.steps)
        cache = empty_compile_cache(ctx, length)
        label = f"SFT, flex attention, {ctx.lengths[length]:,}-token rows (empty compile cache)"
        result = ctx.attempt(label, smolalign_run, ctx.model, ctx.data, ctx.work, settings, Side("flex_attention"),
                             name=f"plan-{length}", env={**ctx.env, **cache})
        row(label, result, ctx.warmup)
        if result is not None:
            ctx.cold_compiles[length] = (cache, first_step_seconds(result))
    label = "GRPO, transformers generation, 32 answers"
    row(label, ctx.attempt(label, grpo_run, ctx, "transformers"), 2)
    if importlib.util.find_spec("vllm") is not None and not ctx.smoke:
        label = "GRPO, vLLM colocated, 32 answers"
        row(label, ctx.attempt(label, grpo_run, ctx, "vllm_colocate"), 2)
    ctx.write("")


def compile_times(ctx: Context) -> None:
    ctx.write("### Flex attention's first step: an empty compile cache, then the cache the first run left", "",
              "| rows | time to step 1, empty cache | with the cache | peak allocated |", "|---|---|---|---|")
    for length in ["4k"] if ctx.smoke else ctx.compile_lengths:
        settings = shared_settings(ctx.lengths[length], 3)
        if length in ctx.cold_compiles:  # the plan part's run was the empty-cache side
            cache, cold = ctx.cold_compiles[length]
            firsts = [cold]
        else:
            cache, firsts = empty_compile_cache(ctx, length), []
        result = None
        while len(firsts) < 2:
            attempt = "warm" if firsts else "cold"
            result = ctx.attempt(f"{ctx.lengths[length]:,} tokens, {attempt} cache", smolalign_run, ctx.model,
                                 ctx.data, ctx.work, settings, Side("flex_attention"),
                                 name=f"compile-{length}-{attempt}", env={**ctx.env, **cache})
            if result is None:
                break
            firsts.append(first_step_seconds(result))
        if len(firsts) == 2:
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
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds from the start by which every run has ended: later runs are not started and a "
                             "late one is killed, so a call ends inside its limit with its rows written")
    args = parser.parse_args()
    deadline = None if args.deadline is None else time.monotonic() + args.deadline
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
                  tuple(length.strip() for length in args.compile_lengths.split(",") if length.strip()), deadline)
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
