"""The sections of what smolalign generates and scores: how an rl recipe generates (`generation:`: transformers, a
vLLM engine or a vLLM server), a generator of pairs (a model and how to sample from it), a reward (of an rl recipe, a
graded-pairs scorer or a pairs verifier), the graded-pairs options and the strong-vs-weak verifier; `schema.PairsSection` and `schema.Recipe` hold them."""

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from smolalign.errors import SmolalignError


@dataclass(frozen=True)
class GeneratorSection:
    """One side of pair generation: a model and how to sample from it."""

    source: str
    """A model source (as model.source) for transformers/vllm; the served model's name for openai."""
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    """transformers (CPU or GPU, batched), vllm (in-process engine; on a CPU its CPU build) or openai (a vLLM or TGI
    server already running, at `base_url`)."""
    base_url: str | None = None
    """openai backend: the server's API root, e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str | None = None
    """openai backend: the environment variable holding the API key (none is sent when unset)."""
    template: str | None = None
    """Chat template for transformers/vllm; default: the recipe's template."""
    think: bool | None = None
    """enable_thinking for the template (true: /think, false: /no_think); null leaves the template's default."""
    temperature: float = 0.7
    """Sampling temperature (0: greedy)."""
    top_p: float = 1.0
    """Nucleus sampling (1.0: the whole distribution)."""
    max_new_tokens: int = 512
    """Answer budget in tokens; an answer cut off there is dropped from the pairs and counted."""
    batch_size: int = 8
    """Prompts per generate call (transformers, vllm) or concurrent requests (openai)."""
    timeout: float = 300.0
    """openai backend: seconds to wait for one response."""
    tensor_parallel: int = 1
    """vllm backend: GPUs the model is split across (a 32B model in bf16 needs 2 H100s with room for the cache)."""

    def __post_init__(self) -> None:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend openai needs base_url (e.g. http://127.0.0.1:8000/v1)")
        read_by = {"base_url": ("openai",), "api_key_env": ("openai",), "timeout": ("openai",),
                   "tensor_parallel": ("vllm",), "template": ("transformers", "vllm")}  # a server renders its own
        for name, backends in read_by.items():
            if getattr(self, name) != _GENERATOR_DEFAULTS[name] and self.backend not in backends:
                raise ValueError(f"{name} is read by backend {' and '.join(backends)} only, and this side generates "
                                 f"with {self.backend}: set backend, or drop {name}")
        if self.batch_size < 1 or self.max_new_tokens < 1:
            raise ValueError("batch_size and max_new_tokens must be at least 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")


@dataclass(frozen=True)
class RewardSection:
    """One reward (of an `rl` recipe, or of a graded-pairs scorer): a built-in name, `model:PATH` (a reward model) or
    `path/to/file.py:function`, its parameters and weight."""

    name: str
    """A built-in reward, `model:PATH` (a reward model) or `path/to/file.py:function` (params make it a factory)."""
    weight: float = 1.0
    """The reward's weight in the sum (TRL's reward_weights for GRPO)."""
    params: dict[str, Any] = field(default_factory=dict)
    """The reward's parameters (see the rewards reference); an unknown or missing one is refused."""


_UNPAIRED_THRESHOLD = 0.5
"""The default score at which an unpaired candidate is desirable."""


@dataclass(frozen=True)
class GradedSection:
    """On-policy graded pairs: one model samples `n` answers per prompt and the scorer ranks them."""

    scorer: list[RewardSection]
    """Rewards (built-in, `model:PATH`, judge, a team's file.py:function); a candidate's score is their weighted
    sum, and a candidate one of them cannot score (None) is left out."""
    sampler: GeneratorSection | None = None
    """The model that writes the candidates; default: the policy (model.source) with the transformers backend."""
    n: int = 4
    """Candidates per prompt (at least 2), sampled in one call per batch of prompts."""
    margin: float = 0.0
    """Prompts whose chosen and rejected scores differ by less than this are dropped (a tie always is)."""
    pick: Literal["best_worst", "best_random"] = "best_worst"
    """The rejected answer: the lowest-scored candidate, or a random one scored at least `margin` below the best."""
    unpaired: bool = False
    """Write KTO rows (prompt/completion/label) instead of pairs: every scored candidate, labelled by `threshold`."""
    threshold: float = _UNPAIRED_THRESHOLD
    """unpaired: a candidate scored at or above this is desirable (label true); refused for pairs."""

    def __post_init__(self) -> None:
        if not self.scorer:
            raise ValueError("scorer must list at least one reward, e.g. [{name: math_accuracy}]")
        if self.n < 2:
            raise ValueError(f"n must be at least 2 (a pair needs two candidates), got {self.n}")
        if not math.isfinite(self.margin) or self.margin < 0:
            raise ValueError(f"margin must be a number >= 0, got {self.margin}")
        if self.threshold != _UNPAIRED_THRESHOLD and not self.unpaired:
            raise ValueError(f"threshold {self.threshold} labels unpaired (KTO) rows, and these are pairs (unpaired: "
                             "false): the chosen answer is the best-scored one; for a gap, set margin")
        if self.margin and self.unpaired:
            raise ValueError(f"margin {self.margin} picks a pair's rejected answer, and unpaired rows are labelled by "
                             "threshold instead: drop margin, or set unpaired: false")


@dataclass(frozen=True)
class VerifierSection:
    """Strong-vs-weak pairs checked by rewards: the chosen answer must score at least `threshold`, the rejected one
    less, so that a strong model's wrong answer is never chosen nor a weak model's right one rejected. The weak side
    answers first; a prompt whose weak answer passes is dropped before the strong side samples it."""

    rewards: list[RewardSection]
    """Rewards that check an answer (built-in, `model:PATH`, judge, a team's file.py:function); an answer's score is
    their weighted sum, and an answer one of them cannot score (None) is never used."""
    threshold: float = 1.0
    """An answer scoring at least this is right (math_accuracy: 1 when the final answer equals the solution)."""
    strong_samples: int = 1
    """The strong side's budget: answers it draws per prompt; the first one verified right is chosen."""

    def __post_init__(self) -> None:
        if not self.rewards:
            raise ValueError("rewards must list at least one reward, e.g. [{name: math_accuracy}]")
        if self.strong_samples < 1:
            raise ValueError(f"strong_samples must be at least 1, got {self.strong_samples}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"threshold must be a number, got {self.threshold}")


_GENERATOR_DEFAULTS = {f.name: f.default for f in dataclasses.fields(GeneratorSection)}


@dataclass(frozen=True)
class VllmServerSection:
    """A vLLM server for generation: one already running (base_url), or one smolalign starts and stops."""

    base_url: str | None = None
    """A running server (http://host:8000); unset: smolalign starts `vllm serve` itself."""
    gpus: list[int] = field(default_factory=list)
    """GPUs the started server uses (CUDA_VISIBLE_DEVICES); training keeps the others."""
    port: int | None = None
    """The port a started server listens on (it must be free: a port in use is refused, naming it); unset: a free
    one chosen when the run starts, stated (on a Slurm job's server node: 8000)."""
    group_port: int | None = None
    """The port training's main process hosts the weight-transfer group on, which the server joins (TRL's
    vllm_group_port); unset: a free one chosen when the run starts, stated, so runs sharing a node never meet."""
    tensor_parallel: int = 1
    """GPUs a started server splits the model across (without `gpus`, the last ones visible)."""
    startup_timeout: float = 600.0
    """Seconds to wait for a started server to answer /health."""

    def __post_init__(self) -> None:
        for name in ("port", "group_port"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= 65535:
                raise ValueError(f"{name} must be a TCP port (1-65535), or null for a free one, got {value}")


@dataclass(frozen=True)
class GenerationSection:
    """How `rl` generates: transformers `generate`, vLLM in the training process (colocate), or a vLLM server."""

    backend: Literal["transformers", "vllm_colocate", "vllm_server"] = "transformers"
    """transformers `generate` in the training process, a vLLM engine in it (`vllm_colocate`), or a vLLM server
    (`vllm_server`: `server.base_url`, or one smolalign starts)."""
    server: VllmServerSection = field(default_factory=VllmServerSection)
    """The server of `vllm_server`."""
    stall_timeout: float | None = None
    """Fail the run when no training step finishes for this many seconds (a stalled generation or weight sync);
    default: none with transformers, 1800 with vLLM."""
    sync_timeout: float | None = None
    """Fail the run when one weight sync into vLLM (the policy's weights copied into the engine or server) takes
    longer than this many seconds, naming the server's log; default 600 with vLLM (none with transformers)."""

    def __post_init__(self) -> None:
        for name in ("stall_timeout", "sync_timeout"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds (or null for the default), got {value}")
        if self.backend != "vllm_server":
            default = VllmServerSection()
            given = [f.name for f in dataclasses.fields(VllmServerSection)
                     if getattr(self.server, f.name) != getattr(default, f.name)]
            if given:
                raise ValueError(f"server.{given[0]} configures the vLLM server of backend vllm_server, and this "
                                 f"recipe generates with {self.backend}: set backend: vllm_server, or drop server:")
        if self.backend == "transformers" and self.sync_timeout is not None:
            raise ValueError("sync_timeout times the weight syncs into vLLM, and backend transformers generates "
                             "with the training weights themselves: drop it, or choose a vLLM backend")


VLLM_ONLY_IN_COLOCATE = ("vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "vllm_enable_sleep_mode",
                         "vllm_model_impl")
"""TRL's vllm_* fields that build its colocated engine: a server is configured by generation.server (or, on Slurm,
--vllm-set), not by them."""
VLLM_ONLY_IN_SERVER = ("vllm_server_timeout",)


def unread_vllm_keys(backend: str, train: dict) -> dict[str, str]:
    """`train:` keys of TRL's vLLM settings that `backend` never reads, with why: every vllm_* with transformers, the
    colocated engine's with a server, the server's with colocate."""
    unread = {}
    for key in sorted(k for k, value in train.items() if k.startswith("vllm_") and value is not None):
        if backend == "transformers":
            unread[key] = ("the policy generates with transformers (generation.backend); TRL reads vllm_* settings "
                           "only with vLLM")
        elif backend == "vllm_server" and key in VLLM_ONLY_IN_COLOCATE:
            unread[key] = ("it builds TRL's colocated engine, and this recipe generates with a vLLM server: configure "
                           "it with generation.server (tensor_parallel, gpus) or, on Slurm, launch slurm --vllm-set")
        elif backend == "vllm_colocate" and key in VLLM_ONLY_IN_SERVER:
            unread[key] = "it is read for a vLLM server, and this recipe generates with a colocated engine"
    return unread


def check_generation_keys(generation: GenerationSection | None, train: dict) -> None:
    """The vLLM settings in `train:` the recipe's generation backend never reads are refused, naming the key."""
    unread = unread_vllm_keys(generation.backend if generation is not None else "transformers", train)
    if unread:
        key, why = next(iter(unread.items()))
        raise SmolalignError(f"train.{key} would not be used: {why}")
