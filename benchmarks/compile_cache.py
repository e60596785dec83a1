"""What keeping compiled kernels across runs saves (smolalign/stages/compile_cache.py), measured on a CPU: flex
attention's first forward over a packed row, in a fresh process each time, as a new run would pay it.

    python benchmarks/compile_cache.py [--lengths 1k,4k,16k] [--threads 2] [--header-in-tmp]

Three processes a row length, each building a random SmolLM3 (2 layers of 256) with flex attention and timing its
first forward over one row of four packed documents (position ids restarting, the block mask built from them), less
its second (the compilation alone):
- as it comes, in a container or a Slurm job: no cache variable set and a private temporary directory, so
  TorchInductor's default cache (torchinductor_<user> under it) starts empty, as it does in every new job;
- smolalign's setting, first run: `keep_compiled_kernels()` points the caches under an empty SMOLALIGN_CACHE;
- smolalign's setting, second run: the same SMOLALIGN_CACHE, holding what the first run compiled.
Every process has a temporary directory of its own, as each job has. smolalign's setting includes what a training
run on a CPU does while it compiles: TorchInductor's precompiled C++ header kept beside the other kernels
(`precompiled_header_kept`); `--header-in-tmp` leaves it in the job's temporary directory, as torch does.
The first and the third are the before and after of a second job. A CPU has no flex attention backward (smolalign
trains with another attention there); on a GPU the forward and backward compile, and gpu_figures.py's compile part
measures the same three states there.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

# This file's folder would come first on sys.path, where benchmarks/rewards.py shadows the `rewards` package that
# smolalign imports.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
REPO = Path(__file__).resolve().parent.parent
LENGTHS = {"1k": 1024, "4k": 4096, "16k": 16384}

FIRST_FORWARD = """
import json, sys, time
started = time.perf_counter()
import contextlib
kept = contextlib.nullcontext()
if sys.argv[2] == "smolalign":
    from smolalign.stages.compile_cache import keep_compiled_kernels, precompiled_header_kept
    keep_compiled_kernels()
    kept = precompiled_header_kept("cpu", compiles=sys.argv[3] == "keep-header")
import torch
from transformers import AutoModelForCausalLM, SmolLM3Config
length = int(sys.argv[1])
config = SmolLM3Config(num_hidden_layers=2, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=4096, pad_token_id=0)
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(config, attn_implementation="flex_attention").eval()
ids = torch.randint(0, config.vocab_size, (1, length))
positions = torch.cat([torch.arange(length // 4)] * 4).unsqueeze(0)
built = time.perf_counter()
with torch.no_grad(), kept:
    model(input_ids=ids, position_ids=positions)
first = time.perf_counter()
with torch.no_grad():
    model(input_ids=ids, position_ids=positions)
print(json.dumps({"first": first - built, "second": time.perf_counter() - first, "setup": built - started}))
"""


def first_forward(length: int, setting: str, environment: dict, header: str = "keep-header") -> dict:
    """The first and second forward's seconds in a new process with a temporary directory of its own, as a new job
    has."""
    with tempfile.TemporaryDirectory() as job_tmp:
        out = subprocess.run([sys.executable, "-c", FIRST_FORWARD, str(length), setting, header], cwd=REPO,
                             env={**environment, "TMPDIR": job_tmp}, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"the {setting} run at {length} tokens failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1k,4k,16k")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--header-in-tmp", action="store_true",
                        help="leave TorchInductor's precompiled header in each job's temporary directory, as torch does")
    args = parser.parse_args()
    from smolalign.stages.compile_cache import COMPILE_CACHES

    base = {name: value for name, value in os.environ.items() if name not in (*COMPILE_CACHES, "SMOLALIGN_CACHE")}
    base |= {"OMP_NUM_THREADS": str(args.threads),
             "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {args.threads} threads")
    print("Compilation: the first forward less a compiled one (the last column), in the run's own process.\n")
    header = "tmp-header" if args.header_in_tmp else "keep-header"
    second = "smolalign, second run (new job" + (", header in its tmp)" if args.header_in_tmp else ")")
    print(f"| row | as it comes (new job) | smolalign, first run | {second} | second / new job | a forward once compiled "
          "|\n|---|---|---|---|---|---|")
    for name in args.lengths.split(","):
        length = LENGTHS[name.strip()]
        with tempfile.TemporaryDirectory() as cache:
            as_it_comes = first_forward(length, "plain", base)
            ours = {**base, "SMOLALIGN_CACHE": cache}
            cold = first_forward(length, "smolalign", ours, header)
            warm = first_forward(length, "smolalign", ours, header)
        compiled = {name: run["first"] - run["second"] for name, run in
                    (("new job", as_it_comes), ("first", cold), ("second", warm))}
        print(f"| {length:,} tokens | {compiled['new job']:.1f} s | {compiled['first']:.1f} s | "
              f"{compiled['second']:.1f} s | {compiled['second'] / compiled['new job']:.2f} | {warm['second']:.2f} s |",
              flush=True)


if __name__ == "__main__":
    main()
