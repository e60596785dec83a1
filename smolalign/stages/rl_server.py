"""The vLLM server of an `rl` run with `generation.backend: vllm_server`: an existing one (checked before
training), or one smolalign starts with `trl vllm-serve` on the GPUs the recipe names, waits for until healthy,
and stops at the end, whatever happens."""

import contextlib
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.schema import Recipe


class ServerHandle:
    def __init__(self, base_url: str, process: subprocess.Popen | None = None, log: Path | None = None):
        self.base_url, self.process, self.log = base_url, process, log

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def describe_exit(self) -> str:
        code = self.process.poll() if self.process else None
        tail = _tail(self.log) if self.log else ""
        return f"exit code {code}" + (f"; last lines of {self.log}:\n{tail}" if tail else "")


def healthy(base_url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/health/", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def served_generation(recipe: Recipe, state) -> Iterator[ServerHandle | None]:
    """Yields the server handle (None unless the backend is vllm_server); a started server is always stopped."""
    generation = recipe.generation
    if generation.backend != "vllm_server":
        yield None
        return
    server = generation.server
    if server.base_url:
        if not healthy(server.base_url, timeout=10):
            raise SmolalignError(f"generation.server.base_url {server.base_url}: no vLLM server answers /health/ "
                                 "there (start one with `trl vllm-serve --model ...`, or leave base_url unset to "
                                 "let smolalign start it)")
        yield ServerHandle(server.base_url)
        return
    if not state.is_main_process:  # one server per run: rank 0 starts it, the others connect to it
        yield ServerHandle(f"http://127.0.0.1:{server.port}")
        return
    handle = _start(recipe)
    try:
        yield handle
    finally:
        _stop(handle.process)


def _start(recipe: Recipe) -> ServerHandle:
    from smolalign.models.load import local_dir
    from smolalign.models.sources import source_of

    server = recipe.generation.server
    model = local_dir(source_of(recipe))
    command = ["trl", "vllm-serve", "--model", model, "--port", str(server.port),
               "--tensor_parallel_size", str(server.tensor_parallel)]
    env = dict(os.environ)
    if server.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in server.gpus)
    log = Path(tempfile.mkstemp(prefix="smolalign-vllm-", suffix=".log")[1])
    print(f"starting the vLLM server: {' '.join(command)} (log {log})")
    try:
        process = subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                   start_new_session=True)
    except FileNotFoundError:
        raise SmolalignError("generation.backend vllm_server: `trl` is not on PATH (install smolalign[vllm])") from None
    handle = ServerHandle(f"http://127.0.0.1:{server.port}", process, log)
    deadline = time.monotonic() + server.startup_timeout
    while time.monotonic() < deadline:
        if not handle.alive():
            raise SmolalignError(f"the vLLM server did not start ({handle.describe_exit()})")
        if healthy(handle.base_url, timeout=2):
            return handle
        time.sleep(2)
    _stop(process)
    raise SmolalignError(f"the vLLM server did not answer /health/ within {server.startup_timeout:g} s "
                         f"(generation.server.startup_timeout); see {log}")


def _stop(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
