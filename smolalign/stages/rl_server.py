"""The vLLM server of an `rl` run with `generation.backend: vllm_server`: an existing one (checked before training),
or one smolalign starts, waits for until healthy, and stops at the end, whatever happens.

A started server is `vllm serve` with the command line TRL 1.16 builds for it (`trl vllm-serve` now only hands over
to `vllm serve`: NCCL weight transfer, processed logprobs, the development endpoints the trainer's client uses for
weight sync), plus the model's revision, dtype, trust_remote_code and `train.vllm_max_model_length`. It runs on its
own GPUs: `generation.server.gpus`, else the last `tensor_parallel` visible ones; training keeps the others (each
process's CUDA_VISIBLE_DEVICES, set before CUDA starts). Health is vLLM's `/health` answering 200, as TRL's client
probes it; a redirect is not an answer.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.schema import GenerationSection, Recipe, VllmServerSection

HEALTH = "/health"
SERVER_GPUS = "SMOLALIGN_VLLM_SERVER_GPUS"
"""Set by the GPU partition for this process: the devices (in the launcher's numbering) the server gets."""
STOP_GRACE = 30.0
"""Seconds a stopped server gets to exit after SIGTERM before SIGKILL."""


class ServerHandle:
    def __init__(self, base_url: str, process: subprocess.Popen | None = None, log: Path | None = None):
        self.base_url, self.process, self.log = base_url, process, log

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def describe_exit(self) -> str:
        code = self.process.poll() if self.process else None
        tail = _tail(self.log) if self.log else ""
        return f"exit code {code}" + (f"; last lines of {self.log}:\n{tail}" if tail else "")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect surfaces as an HTTPError: not healthy


def healthy(base_url: str, timeout: float = 5.0) -> bool:
    """Whether vLLM's `/health` answers 200 (a dead engine answers 503; a redirect does not count)."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(f"{base_url.rstrip('/')}{HEALTH}", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def visible_devices() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (counted without starting CUDA)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    from smolalign.preflight import visible_gpu_count

    return [str(i) for i in range(visible_gpu_count())]


def partition(visible: list[str], server: VllmServerSection, processes: int) -> tuple[list[str], list[str]]:
    """(the server's devices, training's devices) out of the visible ones."""
    if server.gpus:
        beyond = [g for g in server.gpus if g >= len(visible)]
        if beyond:
            raise SmolalignError(f"generation.server.gpus {server.gpus}: only {len(visible)} GPU(s) are visible "
                                 f"({','.join(visible) or 'none'}); name GPUs that exist")
        chosen = [visible[g] for g in dict.fromkeys(server.gpus)]
    else:
        chosen = visible[max(len(visible) - server.tensor_parallel, 0):]
    training = [d for d in visible if d not in chosen]
    if len(training) < max(processes, 1):
        raise SmolalignError(f"generation.server: {len(visible)} GPU(s) cannot hold the server ({len(chosen)}) and "
                             f"{processes} training process(es); use generation.backend: vllm_colocate, or set "
                             "generation.server.base_url to a server elsewhere")
    return chosen, training


def claim_training_gpus(recipe: Recipe) -> None:
    """Before CUDA starts in this process: hide the GPUs a started server will use from training."""
    generation = recipe.generation
    if generation is None or generation.backend != "vllm_server" or generation.server.base_url:
        return
    if SERVER_GPUS in os.environ:
        return
    visible = visible_devices()
    if not visible:
        return  # no GPU here: the preflight refused this recipe already
    processes = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    server_devices, training = partition(visible, generation.server, processes)
    os.environ[SERVER_GPUS] = ",".join(server_devices)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(training)


def check_claim(device_count: int) -> None:
    """After CUDA started: training must see only its own GPUs, or it would share one with the server."""
    if SERVER_GPUS not in os.environ or "CUDA_VISIBLE_DEVICES" not in os.environ:
        return
    training = [d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d]
    if device_count != len(training):
        raise SmolalignError(f"training sees {device_count} GPUs, not its {len(training)} (CUDA started before the "
                             "vLLM server's GPUs could be hidden); set generation.server.base_url and start the "
                             "server yourself, or set CUDA_VISIBLE_DEVICES for training")


DEFAULT_VLLM_STALL_TIMEOUT = 1800.0
"""Seconds without a finished step before a run that generates with vLLM is failed (a hung engine or server)."""


def stall_timeout(generation: GenerationSection | None) -> float | None:
    """generation.stall_timeout, else DEFAULT_VLLM_STALL_TIMEOUT when a vLLM backend generates (none with
    transformers)."""
    if generation is None:
        return None
    if generation.stall_timeout is None and generation.backend != "transformers":
        return DEFAULT_VLLM_STALL_TIMEOUT
    return generation.stall_timeout


def vllm_fields(generation: GenerationSection | None, base_url: str | None) -> dict:
    """The TRL config fields (GRPO, distillation, GOLD) for the generation backend."""
    if generation is None or generation.backend == "transformers":
        return {}
    fields: dict = {"use_vllm": True, "vllm_mode": "colocate" if generation.backend == "vllm_colocate" else "server"}
    if base_url:
        fields["vllm_server_base_url"] = base_url
    return fields


def describe_generation(generation: GenerationSection) -> str:
    """The plan's `generation` row."""
    if generation.backend != "vllm_server":
        return {"transformers": "transformers generate", "vllm_colocate": "vLLM colocated"}[generation.backend]
    server = generation.server
    gpus = ",".join(map(str, server.gpus)) if server.gpus else f"the last {server.tensor_parallel} visible"
    where = server.base_url or f"started by smolalign on GPU(s) {gpus}, training on the others, port {server.port}"
    return f"vLLM server ({where})"


def server_command(recipe: Recipe, dtype: str) -> list[str]:
    """`vllm serve MODEL ...` as TRL 1.16 builds it, for this recipe's model."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    from smolalign.models.load import local_dir
    from smolalign.models.sources import source_of

    model, server = recipe.model, recipe.generation.server
    source = source_of(recipe)
    arguments = ScriptArguments(
        model=local_dir(source), revision=source.revision if source.kind == "hub" else None, host="127.0.0.1",
        port=server.port,
        tensor_parallel_size=server.tensor_parallel, dtype=dtype, trust_remote_code=model.trust_remote_code,
        max_model_len=recipe.train.get("vllm_max_model_length"))
    command = build_command(arguments)
    return ["vllm", *command[command.index("serve"):]]


@contextlib.contextmanager
def served_generation(recipe: Recipe, state, dtype: str = "auto") -> Iterator[ServerHandle | None]:
    """Yields the server handle (None unless the backend is vllm_server); a started server is always stopped."""
    generation = recipe.generation
    if generation is None or generation.backend != "vllm_server":
        yield None
        return
    server = generation.server
    if server.base_url:
        if not healthy(server.base_url, timeout=10):
            raise SmolalignError(f"generation.server.base_url {server.base_url}: no vLLM server answers {HEALTH} "
                                 "there (start one with `vllm serve MODEL`, or leave base_url unset to let smolalign "
                                 "start it)")
        yield ServerHandle(server.base_url)
        return
    if not state.is_main_process:  # one server per run: rank 0 starts it, the others connect to it
        yield ServerHandle(f"http://127.0.0.1:{server.port}")
        return
    handle = start_server(recipe, dtype)
    try:
        yield handle
    finally:
        stop_server(handle.process)


def start_server(recipe: Recipe, dtype: str) -> ServerHandle:
    server = recipe.generation.server
    command = server_command(recipe, dtype)
    if shutil.which(command[0]) is None:
        raise SmolalignError("generation.backend vllm_server: `vllm` is not on PATH (pip install 'smolalign[vllm]')")
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}  # the weight-sync endpoints TRL's client uses
    if server.gpus or SERVER_GPUS in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ.get(SERVER_GPUS) or ",".join(str(g) for g in server.gpus)
    env.pop(SERVER_GPUS, None)
    log = Path(tempfile.mkstemp(prefix="smolalign-vllm-", suffix=".log")[1])
    print(f"starting the vLLM server on GPU(s) {env.get('CUDA_VISIBLE_DEVICES', 'all')}: {' '.join(command)} "
          f"(log {log})")
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    handle = ServerHandle(f"http://127.0.0.1:{server.port}", process, log)
    deadline = time.monotonic() + server.startup_timeout
    while time.monotonic() < deadline:
        if not handle.alive():
            raise SmolalignError(f"the vLLM server did not start ({handle.describe_exit()})")
        if healthy(handle.base_url, timeout=2):
            return handle
        time.sleep(min(2.0, max(deadline - time.monotonic(), 0.0)))
    stop_server(process)
    raise SmolalignError(f"the vLLM server did not answer {HEALTH} within {server.startup_timeout:g} s "
                         f"(generation.server.startup_timeout); see {log}")


def stop_server(process: subprocess.Popen | None) -> None:
    """SIGTERM to the server's process group (vLLM's engine and workers with it), SIGKILL after STOP_GRACE."""
    if process is None or process.poll() is not None:
        return
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
