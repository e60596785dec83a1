"""SFT throughput on one GPU: `smolalign sft` against plain TRL `SFTTrainer`, on the same randomly initialised
SmolLM3-3B, the same conversations, the same padding-free BFD packing and the same settings, one run each, side by side.

    python benchmarks/gpu_sft.py [--steps 30] [--max-length 16384] [--words 1500] [--peak-tflops 989]
                                 [--attention sdpa|flex_attention] [--trl-attention sdpa|flex_attention]
                                 [--liger on|off] [--loss assistant|all] [--only smolalign|trl]
                                 [--profile FIRST-LAST]

Both sides get the same attention (`--attention`, flex by default; `--trl-attention` gives TRL another one, for the
unequal comparison of RESULTS' first row), the same Liger setting (`--liger`, on when liger-kernel is installed), the
same loss (`--loss assistant`: assistant tokens only, smolalign's default and TRL's `assistant_only_loss` through a
template with generation markers; `all`: every token), gradient checkpointing, batch and packing. Precision is each
side's default for bf16 weights: TRL's fused AdamW, smolalign's stochastic-rounding AdamW (`--optim` gives smolalign
another train.optim; `--plain-adamw` keeps TRL's AdamW on smolalign's side too, which a recipe cannot ask for); each
side prints the optimizer its trainer created. tokens/s = the tokens trained between the end of step --warmup and the last step over the wall
time between them (both logged each step), so the first steps' compilation (flex attention's block mask compiles for
minutes) is left out; the whole run's rate, first steps included, is printed beside it, and so is the time to the
first logged step (loading, compilation, one step), and each side's peak allocated memory. Each run's result is
printed as it ends (`RUN name {json}`), so a lease that ends during the second run keeps the first's; `--only` runs
one of them. MFU = tokens/s × (6 N + 12 L d s̄) / peak, with N parameters, L layers, d hidden size and s̄ the mean
document length (packed documents do not attend to each other). Without a GPU it says so and exits 0.
"""

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, where benchmarks/rewards.py would shadow the
# `rewards` package that smolalign imports: the folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
import step_profile  # noqa: E402
from gpu_model import REPO, conversations, parameter_count, peak_flops, require_gpu, smollm3_3b  # noqa: E402

PEAK = "PEAK "
"""The line each child ends with: its peak allocated GPU memory in bytes (null on a CPU)."""
OPTIMIZER = "OPTIMIZER "
"""The line a child prints when its trainer has created its optimizer: the optimizer's class."""
CHILD_PREAMBLE = ("import atexit, json, sys, torch\n"
                  "atexit.register(lambda: print('PEAK ' + json.dumps(torch.cuda.max_memory_allocated() "
                  "if torch.cuda.is_available() else None), flush=True))\n"
                  # Last on the path: benchmarks/rewards.py must not shadow the `rewards` package smolalign imports.
                  f"sys.path.append({str(_HERE)!r})\n"
                  "import step_profile\n"
                  "step_profile.install_from_environment()\n"
                  "import transformers\n"
                  "_create_optimizer = transformers.Trainer.create_optimizer\n"
                  "def _reported(self, *args, **kwargs):\n"
                  "    optimizer = _create_optimizer(self, *args, **kwargs)\n"
                  "    print('OPTIMIZER ' + type(getattr(optimizer, 'optimizer', optimizer)).__name__, flush=True)\n"
                  "    return optimizer\n"
                  "transformers.Trainer.create_optimizer = _reported\n")
"""What each child runs first: the peak-memory line at exit, the optimizer's class when the trainer creates it (what
ran, not what was asked for), and the step profile when BENCH_PROFILE asks for it (benchmarks/step_profile.py)."""

PLAIN_TRL = CHILD_PREAMBLE + """
import json, sys, time
import datasets, torch
from transformers import AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer
model, data, out, settings, side = sys.argv[1:6]
settings, side = json.loads(settings), json.loads(side)
tokenizer = AutoTokenizer.from_pretrained(model)
args = SFTConfig(output_dir=out, bf16=True, report_to="none", save_strategy="no", logging_steps=1,
                 use_cpu=not torch.cuda.is_available(),
                 model_init_kwargs={"dtype": torch.bfloat16, "attn_implementation": side["attention"]},
                 use_liger_kernel=side["liger"], assistant_only_loss=side["assistant_only"], **settings)
points = []
class Clock(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "num_tokens" in logs:
            points.append({"step": state.global_step, "time": time.time(), "num_tokens": logs["num_tokens"],
                           "loss": logs.get("loss")})
trainer = SFTTrainer(model=model, args=args, train_dataset=datasets.load_dataset("json", data_files=data)["train"],
                     processing_class=tokenizer, callbacks=[Clock()])
result = trainer.train()
print("RESULT " + json.dumps({"train_runtime": result.metrics["train_runtime"], "num_tokens": points[-1]["num_tokens"],
                              "points": points}))
"""

PLAIN_ADAMW = "BENCH_PLAIN_ADAMW"
"""Set to 1 in a smolalign child's environment: the run keeps the trainer's own AdamW on bf16 weights (rounded to the
nearest, as plain TRL's) instead of smolalign's stochastic-rounding one, which recipes cannot ask for: a measurement
of what that choice costs and buys, not a setting."""
SMOLALIGN = CHILD_PREAMBLE + f"""
import os, runpy, sys
if os.environ.get({PLAIN_ADAMW!r}) == "1":
    import smolalign.stages.lifecycle
    smolalign.stages.lifecycle.keep_low_precision_updates = lambda trainer: False
sys.argv = ["smolalign"] + sys.argv[1:]
runpy.run_module("smolalign", run_name="__main__")
"""


@dataclass(frozen=True)
class Side:
    """What a run sets beyond the shared TRL settings; both sides of a comparison get the same one."""

    attention: str = "sdpa"
    liger: bool = False
    assistant_only: bool = True
    dtype: str = "bfloat16"
    """smolalign's model.dtype (TRL's side always loads bf16 weights)."""
    optim: str | None = None
    """smolalign's train.optim; None: its default for the weights (stochastic-rounding AdamW for bf16)."""
    plain_adamw: bool = False
    """smolalign keeps the trainer's own AdamW on bf16 weights, as plain TRL does (`PLAIN_ADAMW`)."""

    def label(self) -> str:
        return (f"{self.attention}, Liger {'on' if self.liger else 'off'}, "
                f"{'assistant-only' if self.assistant_only else 'every-token'} loss")


def steady_span(points: list[dict], warmup: int) -> tuple[dict, dict] | None:
    """The logged points at the end of step `warmup` and at the last step (None if too few steps)."""
    start = next((p for p in points if p["step"] == warmup), None)
    end = points[-1] if points else None
    if start is None or end is start or end["time"] <= start["time"]:
        return None
    return start, end


def steady_rate(points: list[dict], warmup: int) -> float | None:
    """Tokens per second between the end of step `warmup` and the last logged step (None if too few steps)."""
    span = steady_span(points, warmup)
    return (span[1]["num_tokens"] - span[0]["num_tokens"]) / (span[1]["time"] - span[0]["time"]) if span else None


def steady_step_seconds(points: list[dict], warmup: int) -> float | None:
    """Seconds a step between the end of step `warmup` and the last logged step."""
    span = steady_span(points, warmup)
    return (span[1]["time"] - span[0]["time"]) / (span[1]["step"] - span[0]["step"]) if span else None


def first_step_seconds(result: dict) -> float:
    """Seconds from the trainer's start to its first logged step: the run's time less the logged steps' span."""
    points = result["points"]
    return result["train_runtime"] - (points[-1]["time"] - points[0]["time"])


def peak_of(output: str) -> int | None:
    line = next((line for line in reversed(output.splitlines()) if line.startswith(PEAK)), None)
    return json.loads(line[len(PEAK):]) if line else None


def optimizer_of(output: str) -> str | None:
    """The class of the optimizer the child's trainer created (None if it printed none)."""
    line = next((line for line in output.splitlines() if line.startswith(OPTIMIZER)), None)
    return line[len(OPTIMIZER):].strip() if line else None


PLANNED = re.compile(r"time per step\s+≈ ([\d.,]+) (ms|s|min|h)\b")
UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def planned_step_seconds(output: str) -> float | None:
    """The plan's "time per step" estimate, as the run printed it before training."""
    found = PLANNED.search(output)
    return float(found.group(1).replace(",", "")) * UNITS[found.group(2)] if found else None


def smolalign_run(model: Path, data: Path, work: Path, settings: dict, side: Side = Side(), name: str = "smolalign",
                  env: dict | None = None, timeout: float | None = None) -> dict:
    import yaml

    train = {**settings, "logging_steps": 1, "save_strategy": "no", "learning_rate": 1e-5,
             "assistant_only_loss": side.assistant_only}
    if side.liger:
        train["use_liger_kernel"] = True
    if side.optim:
        train["optim"] = side.optim
    recipe = work / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(model), "dtype": side.dtype, "attn_implementation": side.attention},
        "template": {"name": "chatml"}, "data": {"sources": [{"path": str(data)}]}, "train": train}))
    if side.plain_adamw:
        env = {**(env or {}), PLAIN_ADAMW: "1"}
    result = run_smolalign("sft", recipe, work / f"{name}-run", env, timeout)
    points = [r for r in result["rows"] if "num_tokens" in r and "time" in r]
    return {**result, "num_tokens": points[-1]["num_tokens"], "points": points, "liger": side.liger}


def with_checkout(env: dict | None = None) -> dict:
    """This process's environment with `env` over it and the checkout first on PYTHONPATH (a GPU image has no
    smolalign installed)."""
    return {**os.environ, **(env or {}),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


class ChildFailed(Exception):
    """A benchmark's child run that exited non-zero or ran past its time."""

    def __init__(self, reason: str, stderr: str):
        super().__init__(reason)
        self.reason = reason
        self.stderr = stderr
        """The end of what the child wrote to its standard error."""


def run_child(command: list[str], env: dict | None = None, timeout: float | None = None) -> str:
    """Run `command` in a process group of its own and return its standard output; raises ChildFailed when it exits
    non-zero or is still running after `timeout` seconds. Whatever of its group is left when it ends (compile
    workers, a vLLM engine) is killed then, so nothing holds the GPU into the next run; its output goes through files,
    so a survivor holding it cannot keep this waiting."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, env=env, cwd=REPO, stdout=out, stderr=err, text=True,
                                 start_new_session=True)
        timed_out = False
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:  # the group ended with the child
                pass
            child.wait()
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if timed_out:
        raise ChildFailed(f"still running after {timeout:.0f} s, killed", stderr[-6000:])
    if child.returncode != 0:
        last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
        raise ChildFailed(f"exit {child.returncode}: {last[:200]}", stderr[-6000:])
    return stdout


def run_smolalign(verb: str, recipe: Path, run_dir: Path, env: dict | None = None,
                  timeout: float | None = None) -> dict:
    """`smolalign VERB RECIPE` in a child: its metrics rows, time, peak memory, the plan's step estimate and
    (BENCH_PROFILE in `env`) its step profile."""
    out = run_child([sys.executable, "-c", SMOLALIGN, verb, str(recipe), "-o", str(run_dir), "--overwrite"],
                    with_checkout(env), timeout)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"rows": rows, "train_runtime": next(r["train_runtime"] for r in rows if "train_runtime" in r),
            "peak_bytes": peak_of(out), "optimizer": optimizer_of(out), "planned_step_seconds": planned_step_seconds(out),
            "profile": step_profile.profile_of(out)}


def plain_trl_run(model: Path, data: Path, work: Path, settings: dict, side: Side = Side(),
                  name: str = "trl", env: dict | None = None, timeout: float | None = None) -> dict:
    """Plain TRL's SFTTrainer in a child: its logged points, time, peak memory and (BENCH_PROFILE in `env`) its step
    profile."""
    out = run_child([sys.executable, "-c", PLAIN_TRL, str(model), str(data), str(work / f"{name}-run"),
                     json.dumps(settings), json.dumps({"attention": side.attention, "liger": side.liger,
                                                       "assistant_only": side.assistant_only})],
                    {**os.environ, **env} if env else None, timeout)
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    return {**json.loads(line[len("RESULT "):]), "liger": side.liger, "peak_bytes": peak_of(out),
            "optimizer": optimizer_of(out), "profile": step_profile.profile_of(out)}


def shared_settings(max_length: int, steps: int, batch: int = 1) -> dict:
    """The TRL settings both sides share: padding-free BFD rows, gradient checkpointing, one row a device."""
    return {"max_length": max_length, "packing": True, "packing_strategy": "bfd", "max_steps": steps,
            "per_device_train_batch_size": batch, "gradient_accumulation_steps": 1,
            "gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"use_reentrant": False}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--max-length", type=int, default=16384)
    parser.add_argument("--words", type=int, default=1500, help="mean assistant words per conversation")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of the steady-state rate")
    parser.add_argument("--attention", choices=("sdpa", "flex_attention"), default="flex_attention")
    parser.add_argument("--trl-attention", choices=("sdpa", "flex_attention"), default=None,
                        help="TRL's attention when it should differ from --attention (an unequal comparison)")
    parser.add_argument("--liger", choices=("on", "off"), default=None,
                        help="both sides; default on when liger-kernel is installed")
    parser.add_argument("--loss", choices=("assistant", "all"), default="assistant")
    parser.add_argument("--optim", default=None, help="smolalign's train.optim (default: its choice for bf16)")
    parser.add_argument("--plain-adamw", action="store_true",
                        help="smolalign keeps the trainer's own AdamW on bf16 weights, as plain TRL does")
    parser.add_argument("--profile", default=None, metavar="FIRST-LAST",
                        help="profile these steps on both sides (benchmarks/step_profile.py): tables in --work; keep "
                             "them inside --warmup")
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
    settings = shared_settings(args.max_length, args.steps, args.batch)
    liger = importlib.util.find_spec("liger_kernel") is not None if args.liger is None else args.liger == "on"
    ours = Side(args.attention, liger, args.loss == "assistant", optim=args.optim, plain_adamw=args.plain_adamw)
    theirs = Side(args.trl_attention or args.attention, liger, args.loss == "assistant")
    config = AutoConfig.from_pretrained(model)
    n = parameter_count(model)
    flops_per_token = 6 * n + 12 * config.num_hidden_layers * config.hidden_size * mean_doc
    device = torch.cuda.get_device_name(0)
    peak = peak_flops(device, args.peak_tflops)
    print(f"GPU {device}; SmolLM3 random init, {n / 1e9:.2f} B parameters; rows of {args.max_length} tokens, "
          f"documents of {mean_doc:.0f} tokens on average; {args.steps} steps")
    runs = {"smolalign sft": (smolalign_run, ours), "plain TRL SFTTrainer": (plain_trl_run, theirs)}
    if args.only:
        runs = {name: run for name, run in runs.items() if args.only in name.lower()}
    results = {}
    for name, (run, side) in runs.items():
        try:
            tables = args.work / step_profile.tables_file(name)
            profiled = step_profile.environment(tables, args.profile) if args.profile else None
            results[name] = run(model, data, args.work, settings, side, env=profiled)
        except ChildFailed as failure:
            sys.exit(f"{name} failed: {failure.reason}\n{failure.stderr}")
        print(f"RUN {name} " + json.dumps(results[name]), flush=True)
    print(f"| run | settings | tokens/s after step {args.warmup} | MFU | tokens/s, whole run | time to step 1 | "
          "peak allocated |\n|---|---|---|---|---|---|---|")
    rates = {}
    for name, result in results.items():
        whole = result["num_tokens"] / result["train_runtime"]
        rates[name] = steady_rate(result["points"], args.warmup) or whole
        mfu = f"{rates[name] * flops_per_token / peak:.1%}" if peak else "(pass --peak-tflops)"
        memory = f"{result['peak_bytes'] / 2 ** 30:.1f} GiB" if result.get("peak_bytes") else "—"
        print(f"| {name} | {runs[name][1].label()}, {result.get('optimizer')} | {rates[name]:,.0f} | {mfu} | {whole:,.0f} | "
              f"{first_step_seconds(result):.0f} s | {memory} |")
    if len(rates) == 2:
        print(f"ratio smolalign / TRL: {rates['smolalign sft'] / rates['plain TRL SFTTrainer']:.2f}")


if __name__ == "__main__":
    main()
