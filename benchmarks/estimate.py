"""Predicted against measured: peak memory per device and time per step of real SFT steps (TRL's SFTTrainer, random
weights, random tokens), next to what smolalign's plan predicts for the same settings.

    python benchmarks/estimate.py --model smollm3-3b --sharding ddp --batch 1 --length 4096     # on a GPU
    python benchmarks/estimate.py --model smollm3-3b --sharding zero3 --processes 1 --batch 1 --length 4096
    python benchmarks/estimate.py --model small --batch 2 --length 512 --calibrate               # CPU

Measured peak: torch.cuda.max_memory_allocated on a GPU (so the prediction is compared without the CUDA context);
on the CPU, the process's real high-water mark: each run is a fresh subprocess, and its peak resident set
(ru_maxrss) less its resident set just before the model is built (after the imports and the data); `--measure
allocator` gives instead the highest level of live tensor bytes in torch's CPU allocator (the weights plus the
profiler's allocation and free records). Step time: median of the steps after the first, from a run without the
profiler. The models: `small` (the shape the estimate's first tests used) and two held-out shapes no part of the
estimate was checked against before (`held-out-a`, `held-out-b`: other widths, depths, vocabularies, head counts).
Prints one JSON line per run with both sides and their ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file's folder comes first on sys.path when it runs as a script, where benchmarks/rewards.py would shadow the
# `rewards` package that smolalign imports: the folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

ROOT = Path(__file__).resolve().parent.parent
MODELS = {
    # SmolLM3-3B's published shape
    "smollm3-3b": dict(model_type="smollm3", vocab_size=128256, hidden_size=2048, intermediate_size=11008,
                       num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=4, tie_word_embeddings=True,
                       max_position_embeddings=65536),
    # a CPU-sized Llama: states and activations of the same order, so both parts of the estimate are tested
    "small": dict(model_type="llama", vocab_size=8000, hidden_size=512, intermediate_size=1408, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=4, tie_word_embeddings=True, max_position_embeddings=2048),
    # held out: shapes the estimate's tests never saw before they were written (untied head, other ratios)
    "held-out-a": dict(model_type="llama", vocab_size=12000, hidden_size=384, intermediate_size=1024,
                       num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=False,
                       max_position_embeddings=2048),
    "held-out-b": dict(model_type="qwen2", vocab_size=5000, hidden_size=640, intermediate_size=1792,
                       num_hidden_layers=2, num_attention_heads=10, num_key_value_heads=5, tie_word_embeddings=True,
                       max_position_embeddings=2048),
}


def model_config(name: str):
    from transformers import AutoConfig

    fields = dict(MODELS[name])
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _tokenizer():
    """The trainer only needs the pad and end-of-sequence ids: the rows are token ids already."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                   pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def worker(args) -> None:
    """One training process: build, train `steps` steps, write what it measured (rank 0)."""
    import resource

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    gpu = torch.cuda.is_available()
    config = model_config(args.model)
    rows = torch.randint(0, config.vocab_size, (args.batch * args.accumulation * args.steps * 2, args.length)).tolist()
    data = Dataset.from_dict({"input_ids": rows})
    deepspeed = None
    if args.sharding in ("zero2", "zero3"):
        from smolalign.launch import deepspeed_config, read_preset

        deepspeed = deepspeed_config(read_preset(ROOT / "recipes" / "accelerate" / f"{args.sharding}.yaml"))
    flags = {"bf16": True} if gpu else {"use_cpu": True, "bf16": False}
    sft = SFTConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=args.batch, max_steps=args.steps,
                    gradient_accumulation_steps=args.accumulation,
                    gradient_checkpointing=args.checkpointing, max_length=args.length, report_to="none",
                    save_strategy="no", logging_steps=1, dataset_kwargs={"skip_prepare_dataset": True},
                    learning_rate=1e-5, deepspeed=deepspeed, **flags)
    if deepspeed is not None and not gpu:
        import deepspeed as ds

        ds.init_distributed(dist_backend="gloo")
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    baseline = _rss()
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16 if gpu else torch.float32)
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            if gpu:
                torch.cuda.synchronize()
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):
            if gpu:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.start)

    trainer = SFTTrainer(model=model, args=sft, train_dataset=data, processing_class=_tokenizer(),
                         callbacks=[Timer()])
    measured = {}
    if gpu:
        trainer.train()
        measured["peak"] = torch.cuda.max_memory_allocated()
    elif args.profile:  # the profiler slows the steps down: the time comes from a run without it
        from torch.profiler import ProfilerActivity, profile

        held = sum(p.numel() * p.element_size() for p in model.parameters())
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            trainer.train()
        measured["peak"] = held + _allocation_peak(prof)
    else:
        trainer.train()
        measured["rss_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline
    if trainer.is_world_process_zero():
        measured.update(step_seconds=statistics.median(times[1:]),
                        device=torch.cuda.get_device_name(0) if gpu else "cpu")
        Path(args.out).write_text(json.dumps(measured))


def _allocation_peak(prof) -> int:
    """The highest level of live tensor bytes the CPU allocator reached, from the profiler's allocation and free
    records in time order (above what was live when profiling started)."""
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    level = peak = 0
    for event in events:
        level += event.nbytes()
        peak = max(peak, level)
    return peak


def predict(args, device: str) -> dict:
    """What the plan predicts for these settings on this device."""
    from smolalign.estimate.dims import dims_from_config
    from smolalign.estimate.memory import CUDA_CONTEXT, Setup, estimate_memory
    from smolalign.estimate.time import DEFAULT_UTILIZATION, step_time
    from smolalign.gpus import find_gpu

    gpu = device != "cpu"
    config = model_config(args.model)
    dims = dims_from_config(config)
    sharding = args.sharding if args.sharding != "none" or args.processes == 1 else "ddp"
    setup = Setup(processes=args.processes, sharding=sharding, dtype="bfloat16" if gpu else "float32", gpu=gpu)
    settings = {"per_device_train_batch_size": args.batch, "gradient_accumulation_steps": args.accumulation,
                "optim": "adamw_torch_fused",
                "gradient_checkpointing": args.checkpointing, "tokens_per_micro_batch": args.batch * args.length}
    memory = estimate_memory(dims, settings, setup)
    out = {"peak": memory.peak - (CUDA_CONTEXT if gpu else 0), "parts": memory.parts}
    work = {"sequences_per_step": args.batch * args.accumulation, "sequence_length": args.length,
            "gradient_checkpointing": args.checkpointing, "tokens_per_micro_batch": args.batch * args.length}
    table_gpu = find_gpu(device) if gpu else None
    if table_gpu is not None:
        out["step_seconds_flops"] = step_time(dims, work, table_gpu, DEFAULT_UTILIZATION).total
    if args.calibrate:
        from smolalign.estimate.calibrate import calibrate

        out["step_seconds_calibrated"], _ = calibrate(config, dims, settings, work, setup)
    return out


def run(args) -> dict:
    out = Path(tempfile.mkdtemp()) / "measured.json"
    argv = [__file__, "--worker", "--out", str(out), "--model", args.model, "--sharding", args.sharding,
            "--batch", str(args.batch), "--length", str(args.length), "--steps", str(args.steps),
            "--accumulation", str(args.accumulation)]
    argv += ["--checkpointing"] if args.checkpointing else []
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if args.sharding != "none" or args.processes > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(args.processes), *argv]
        import torch

        if not torch.cuda.is_available() and args.sharding.startswith("zero"):
            env["DS_ACCELERATOR"] = "cpu"
    else:
        command = [sys.executable, *argv]
    allocator = args.measure == "allocator"
    subprocess.run([*command, "--profile"] if args.memory_only and allocator else command, env=env, check=True)
    measured = json.loads(out.read_text())
    if measured["device"] == "cpu":
        if allocator and not args.memory_only:
            subprocess.run([*command, "--profile"], env=env, check=True)
            measured["peak"] = json.loads(out.read_text())["peak"]
        elif not allocator:
            measured["peak"] = measured["rss_peak"]
    predicted = predict(args, measured["device"])
    result = {"model": args.model, "sharding": args.sharding, "processes": args.processes, "batch": args.batch,
              "accumulation": args.accumulation,
              "length": args.length, "checkpointing": args.checkpointing, "device": measured["device"],
              "measured_peak": measured["peak"], "predicted_peak": predicted["peak"],
              "peak_ratio": round(predicted["peak"] / measured["peak"], 3),
              "measured_step_seconds": round(measured["step_seconds"], 4),
              "measured_rss_above_start": measured.get("rss_peak"),
              "predicted_parts": predicted["parts"]}
    for key in ("step_seconds_flops", "step_seconds_calibrated"):
        if key in predicted:
            result[f"predicted_{key}"] = round(predicted[key], 4)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="small")
    parser.add_argument("--sharding", choices=("none", "ddp", "zero2", "zero3"), default="none")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--calibrate", action="store_true", help="also predict the step time from a calibration")
    parser.add_argument("--memory-only", action="store_true", help="CPU: one run, for its memory only")
    parser.add_argument("--measure", choices=("rss", "allocator"), default="rss",
                        help="CPU: the process's peak resident set above its start (default), or torch's allocator")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
    else:
        print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
