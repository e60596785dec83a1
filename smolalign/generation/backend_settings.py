"""What a run's `generation:` section means for TRL's config and the plan: the vLLM fields of the trainer's config,
the plan's `generation` row, and how long a generating run may go without a finished step."""

from dataclasses import dataclass

from smolalign.recipe.generation_schema import GenerationSection

DEFAULT_VLLM_STALL_TIMEOUT = 1800.0
"""Seconds without a finished step before a run that generates with vLLM is failed (a hung engine or server)."""


DEFAULT_SYNC_TIMEOUT = 600.0
"""Seconds one weight sync into vLLM may take before the run is failed (a 70B model over NCCL takes tens of
seconds; a hung transfer never ends)."""


def sync_timeout(generation: GenerationSection | None) -> float | None:
    """generation.sync_timeout, else DEFAULT_SYNC_TIMEOUT when a vLLM backend generates (none with transformers)."""
    if generation is None or generation.backend == "transformers":
        return None
    return DEFAULT_SYNC_TIMEOUT if generation.sync_timeout is None else generation.sync_timeout


def stall_timeout(generation: GenerationSection | None) -> float | None:
    """generation.stall_timeout, else DEFAULT_VLLM_STALL_TIMEOUT when a vLLM backend generates (none with
    transformers)."""
    if generation is None:
        return None
    if generation.stall_timeout is None and generation.backend != "transformers":
        return DEFAULT_VLLM_STALL_TIMEOUT
    return generation.stall_timeout


@dataclass(frozen=True)
class ServerAddress:
    """Where a run's vLLM server is reached, and where training hosts the weight sync it joins."""

    base_url: str
    group_port: int
    """TRL's vllm_group_port."""


def vllm_fields(generation: GenerationSection | None, server: ServerAddress | None) -> dict:
    """The TRL config fields (GRPO, online DPO, distillation, GOLD) for the generation backend."""
    if generation is None or generation.backend == "transformers":
        return {}
    fields: dict = {"use_vllm": True, "vllm_mode": "colocate" if generation.backend == "vllm_colocate" else "server"}
    if server is not None:
        fields.update(vllm_server_base_url=server.base_url, vllm_group_port=server.group_port)
    return fields


def describe_generation(generation: GenerationSection) -> str:
    """The plan's `generation` row."""
    if generation.backend != "vllm_server":
        return {"transformers": "transformers generate", "vllm_colocate": "vLLM colocated"}[generation.backend]
    server = generation.server
    gpus = ",".join(map(str, server.gpus)) if server.gpus else f"the last {server.tensor_parallel} visible"
    port = server.port or "free, chosen at start"
    where = server.base_url or f"started by smolalign on GPU(s) {gpus}, training on the others, port {port}"
    return f"vLLM server ({where}; weight-sync group port {server.group_port or 'free, chosen at start'})"


