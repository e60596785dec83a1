"""nanotron -> transformers conversion: throughput and peak memory of `smolalign convert` against a plain copy of
the same bytes (read once, written once: the disk's limit) and against the obvious load-everything-then-save converter, in the same run.

    python benchmarks/convert.py [--layers 12] [--hidden 1024] [--vocab 49152] [--tp 2] [--dtype bfloat16]

Writes a SmolLM3-shaped checkpoint (tied embeddings, NoPE every 4th layer, TP-padded vocabulary) in nanotron's
format, then converts it in fresh subprocesses so the writer's memory does not count. Peak memory is the process's
RSS high-water mark (VmHWM) minus its RSS after imports; target: under 2x the model size (it should be near
the largest tensor). The converted weights are checked bit-identical to the model that was saved.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

CHILD = r"""
import json, sys, time
sys.path[:0] = sys.argv[4:]
import torch, safetensors.torch, transformers  # imported before the baseline is read
from transformers import AutoModelForCausalLM
from smolalign.checkpoints import convert as _convert, plan as _plan, nanotron_shards as _shards, nanotron_hf as _hf

def status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

mode, source, target = sys.argv[1:4]
baseline = status_kb("VmRSS")
start = time.perf_counter()
if mode == "smolalign":
    _convert.convert(source, target)
elif mode == "naive":
    # The obvious converter: every unsharded parameter in memory, every HF tensor in memory, one save_file.
    from pathlib import Path
    step = _convert.detect(source).path
    config, _ = _hf.read_model_config(step)
    params = _shards.scan(step)
    loaded = {name: _shards.load(p) for name, p in params.items()}
    plan = _hf.tensor_plan(params, config, config["vocab_size"], step)
    _plan._load_last = lambda parameter: loaded[parameter.name]  # the plan cuts from what is already in memory
    state = {}
    for item in plan:
        state[item.name] = item.produce().clone()
    Path(target).mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(state, f"{target}/model.safetensors", metadata={"format": "pt"})
else:  # copy: read every byte and write it once through user space, the least any converter does
    from pathlib import Path
    for index, path in enumerate(sorted(Path(source).rglob("*.safetensors"))):
        out = Path(target) / f"{index}.bin"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(path.read_bytes())
seconds = time.perf_counter() - start
# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the forking parent across exec.
peak = status_kb("VmHWM")
print(json.dumps({"seconds": seconds, "peak_kb": peak, "baseline_kb": baseline}))
"""


def write_checkpoint(args, folder: Path):
    import torch
    from nanotron_writer import write_nanotron
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    torch.manual_seed(0)
    config = SmolLM3Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                           num_hidden_layers=args.layers, num_attention_heads=16, num_key_value_heads=4,
                           max_position_embeddings=4096, no_rope_layer_interval=4, tie_word_embeddings=True,
                           bos_token_id=None, eos_token_id=2, pad_token_id=None)
    model = SmolLM3ForCausalLM(config).to(getattr(torch, args.dtype))
    write_nanotron(model, folder, tp=args.tp, pad_vocab_to=128)
    return model


def run_child(mode: str, source: Path, target: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, mode, str(source), str(target), str(REPO)],
                            capture_output=True, text=True, check=False)
    if result.returncode:
        raise SystemExit(f"{mode} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def content_key_seconds(work: Path) -> tuple[float, float]:
    """(first, repeated) seconds to compute a model source's cache key: every byte hashed, then the per-file memo."""
    import time

    from smolalign.checkpoints.content_key import content_key
    from smolalign.checkpoints.detect import detect

    detected, memo = detect(work / "run"), work / "digests.json"
    times = []
    for _ in range(2):
        start = time.perf_counter()
        content_key(detected, None, memo)
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()

    import torch
    from safetensors import safe_open

    work = Path(tempfile.mkdtemp(prefix="bench-convert-"))
    try:
        model = write_checkpoint(args, work / "run")
        state = model.state_dict()
        model_bytes = sum(t.numel() * t.element_size() for n, t in state.items() if n != "lm_head.weight")
        largest = max(t.numel() * t.element_size() for t in state.values())
        files = sum(f.stat().st_size for f in (work / "run").rglob("*") if f.is_file())
        shard_files = sum(1 for _ in (work / "run").rglob("*.safetensors"))
        results = {mode: run_child(mode, work / "run", work / mode) for mode in ("copy", "smolalign", "naive")}
        key_seconds = content_key_seconds(work)
        with safe_open(str(work / "smolalign" / "model.safetensors"), framework="pt") as converted:
            identical = all(torch.equal(converted.get_tensor(n), t) for n, t in state.items() if n != "lm_head.weight")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = 1024**2
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, python {platform.python_version()}, torch {torch.__version__}")
    print(f"checkpoint: SmolLM3-shaped, {args.layers} layers, hidden {args.hidden}, vocab {args.vocab} (padded for "
          f"TP {args.tp}), {args.dtype}, tied; model {model_bytes / mb:.0f} MB, largest tensor {largest / mb:.0f} MB, "
          f"{files / mb:.0f} MB on disk in {shard_files} files")
    for mode, label in (("copy", "read + write every byte (disk limit)"), ("smolalign", "smolalign convert (streamed)"),
                        ("naive", "load everything, then save_file")):
        r = results[mode]
        extra = (r["peak_kb"] - r["baseline_kb"]) * 1024
        print(f"{label:40s} {r['seconds']:6.2f} s  {model_bytes / r['seconds'] / 1024**3:5.2f} GB/s  "
              f"peak RSS {r['peak_kb'] / 1024:6.0f} MB (+{extra / mb:5.0f} MB over imports = "
              f"{extra / model_bytes:.2f}x model, {extra / largest:.2f}x largest tensor)")
    ours, copy, naive = results["smolalign"], results["copy"], results["naive"]
    print(f"throughput ratio smolalign / read+write: {copy['seconds'] / ours['seconds']:.2f}; "
          f"smolalign / naive: {naive['seconds'] / ours['seconds']:.2f}")
    ours_extra = (ours["peak_kb"] - ours["baseline_kb"]) * 1024
    naive_extra = (naive["peak_kb"] - naive["baseline_kb"]) * 1024
    print(f"model-source cache key (sha256 of the checkpoint's content): {key_seconds[0]:.2f} s the first time "
          f"({files / key_seconds[0] / 1024**3:.2f} GB/s), {key_seconds[1] * 1000:.0f} ms once the file digests are memoized")
    print(f"peak memory over imports: smolalign {ours_extra / model_bytes:.2f}x model (target < 2x), naive "
          f"{naive_extra / model_bytes:.2f}x; weights bit-identical to the saved model: {identical}")


if __name__ == "__main__":
    main()
