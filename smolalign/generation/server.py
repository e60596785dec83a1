"""The vLLM server of an `rl` run with `generation.backend: vllm_server`: an existing one (checked before training), or
one smolalign starts, waits for until healthy, and stops at the end, whatever happens.

A started server is vLLM's OpenAI server with the options TRL 1.16 builds for `vllm serve` (its command line is
smolalign.generation.server_command's, shared with a Slurm job's server node), from the Python smolalign runs in, with
the development endpoints the trainer's client uses for weight sync. On GPUs it runs on its own:
`generation.server.gpus`, else the last `tensor_parallel` visible ones; training keeps the others (the GPU partition,
smolalign.gpu_partition, handed to the server and to the training processes in their environments). On a CPU it shares
the machine, with a KV cache sized for the work. Health is vLLM's `/health` answering 200, as TRL's client probes it
(a redirect is not an answer), and the server must then name the model smolalign gave it (`--served-model-name`,
unique per start): a server smolalign did not start, on the same port, is never used. Its port is
`generation.server.port`, which must be free before it starts, else a free one chosen at the start of the run;
training's main process hosts the weight-transfer group the server joins (TRL's `vllm_group_port`) on
`generation.server.group_port`, else a free one; both are chosen on the main process, told to every rank and stated,
so two runs on one machine never meet on a port. Its output goes to a temporary file (named in every message about the
server) that is kept in the run directory as `vllm-server.log` once the server stops, appended to on a resumed run; a
run that ends before its directory is made (a server that never starts, a model that fails to load) leaves it where
the message named it. The server dies with the process that started it, its whole process group with it (vLLM's engine
core and workers are child processes that watch no parent of their own): stopped at the end whatever happens (SIGTERM
to the run included), and, when that process ends without running its `finally` blocks (SIGKILL, the watchdog's
`os._exit`), killed by a reaper process that waits on a pipe only the starting process holds open (the kernel closes
it however that process dies).
"""

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.generation.server_command import server_command
from smolalign.generation.server_process import Reaper, die_with_parent, stop_server
from smolalign.gpu_partition import SERVER_GPUS, GpuPartition, server_devices
from smolalign.hardware import Hardware
from smolalign.ports import free_port, port_in_use
from smolalign.recipe.generation_schema import VllmServerSection
from smolalign.recipe.schema import Recipe
from smolalign.resolve import Run

HEALTH = "/health"
SERVER_LOG = "vllm-server.log"


class ServerHandle:
    def __init__(self, base_url: str, process: subprocess.Popen | None = None, log: Path | None = None,
                 reaper: "Reaper | None" = None, group_port: int | None = None):
        self.base_url, self.process, self.log, self.reaper = base_url, process, log, reaper
        self.group_port = group_port
        """The port training's main process hosts the weight-transfer group on (TRL's vllm_group_port)."""

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


def server_env(hardware: Hardware) -> dict[str, str]:
    """The started server's environment (this process's is left as it is): vLLM's development endpoints (TRL's
    client syncs weights through them), and on a CPU the engine core inside the server's process, threads not
    pinned to one core."""
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    if not hardware.on_gpu:
        env.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_OMP_THREADS_BIND="nobind")
    return env


def check_port(recipe: Recipe) -> None:
    """The ports a recipe sets for a server run must be free: the port of a server smolalign is to start, and the
    weight-transfer group's; refused (exit 2, naming the port) before anything loads. Ports left unset are chosen
    free when the run starts (`agreed_ports`)."""
    generation = recipe.generation
    if generation is None or generation.backend != "vllm_server":
        return
    port = generation.server.port
    if port is not None and not generation.server.base_url and port_in_use(port):
        raise SmolalignError(f"generation.server.port {port}: the port is in use (another server, or a vLLM server "
                             "left running); free it, set generation.server.port to a free one, or leave it unset "
                             "for a free one")
    group_port = generation.server.group_port
    if group_port is not None and port_in_use(group_port, ""):
        raise SmolalignError(f"generation.server.group_port {group_port}: the port is in use (another run's weight "
                             "sync); leave it unset for a free one per run")


def agreed_ports(server: VllmServerSection) -> tuple[int | None, int]:
    """(the port of a server smolalign starts, None for a running one; the weight-transfer group's port): the
    recipe's, else free ones chosen on the main process, the same on every rank."""
    import torch.distributed as dist

    chosen = [None if server.base_url else server.port or free_port(),
              server.group_port or free_port("")]
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list(chosen, from_process=0)
    return chosen[0], chosen[1]


def serves(base_url: str, served_name: str, timeout: float = 5.0) -> bool:
    """Whether the server at `base_url` serves the model under `served_name` (the one smolalign started)."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/v1/models", timeout=timeout) as response:
            listed = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return any(entry.get("id") == served_name for entry in listed.get("data", []) if isinstance(entry, dict))


@contextlib.contextmanager
def served_generation(run: Run, state, dtype: str = "auto", gpus: GpuPartition | None = None,
                      run_dir: Path | None = None) -> Iterator[ServerHandle | None]:
    """Yields the server handle (None unless the backend is vllm_server); a started server runs on `gpus`' server
    devices (gpu_partition.partition_of_this_process), is always stopped, and its log is then kept in `run_dir`
    (when that exists by then)."""
    generation = run.recipe.generation
    if generation is None or generation.backend != "vllm_server":
        yield None
        return
    server = generation.server
    port, group_port = agreed_ports(server)
    if state.is_main_process and run.hardware.on_gpu:
        print(f"weight sync: training hosts the transfer group the vLLM server joins on port {group_port} "
              f"({'generation.server.group_port' if server.group_port else 'free, chosen for this run'})")
    if server.base_url:
        if not healthy(server.base_url, timeout=10):
            raise SmolalignError(f"generation.server.base_url {server.base_url}: no vLLM server answers {HEALTH} "
                                 "there (start one with `vllm serve MODEL`, or leave base_url unset to let smolalign "
                                 "start it)")
        yield ServerHandle(server.base_url, group_port=group_port)
        return
    if not state.is_main_process:  # one server per run: rank 0 starts it, the others connect to it
        yield ServerHandle(f"http://127.0.0.1:{port}", group_port=group_port)
        return
    handle = start_server(run, dtype, gpus, port)
    handle.group_port = group_port
    try:
        with _stopped_on_sigterm():
            yield handle
    finally:
        stop_server(handle)
        if run_dir is not None:
            keep_log(handle.log, run_dir)


def keep_log(log: Path, run_dir: Path) -> None:
    """Append the stopped server's temporary log to `run_dir`/vllm-server.log and remove it; where the run directory
    was never made, the log stays where the run's messages named it."""
    if not run_dir.is_dir() or not log.is_file():
        return
    kept = run_dir / SERVER_LOG
    with log.open("rb") as source, kept.open("ab") as target:
        shutil.copyfileobj(source, target)
    log.unlink()
    print(f"the vLLM server's log: {kept}")


@contextlib.contextmanager
def _stopped_on_sigterm() -> Iterator[None]:
    """While the server runs: SIGTERM (a job's cancellation, `kill`) ends the run through its `finally` blocks, so the
    server is stopped with its engine processes, rather than the run vanishing and leaving them to the parent-death
    signal. Only where Python can handle signals (the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def start_server(run: Run, dtype: str, gpus: GpuPartition | None, port: int) -> ServerHandle:
    """The server on `port` (the recipe's, checked free, or one chosen free), once it answers as the one started."""
    server, hardware = run.recipe.generation.server, run.hardware
    check_port(run.recipe)
    served_name = f"smolalign-{secrets.token_hex(6)}"
    command = server_command(run, dtype, hardware, served_name, port)
    env = {**server_env(hardware), **server_devices(server, gpus)}
    env.pop(SERVER_GPUS, None)  # the partition this process was started on, if any, is not the server's to read
    log = Path(tempfile.mkstemp(prefix="smolalign-vllm-", suffix=".log")[1])
    where = f"GPU(s) {env.get('CUDA_VISIBLE_DEVICES', 'all')}" if hardware.on_gpu else "this CPU"
    chosen = "generation.server.port" if server.port else "free, chosen for this run"
    print(f"starting the vLLM server on {where}, port {port} ({chosen}): {' '.join(command)} (log {log})")
    with log.open("w") as out:
        out.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} started by smolalign: {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=die_with_parent)
    try:
        reaper = Reaper(process.pid)
    except BaseException:
        stop_server(ServerHandle("", process))
        raise
    handle = ServerHandle(f"http://127.0.0.1:{port}", process, log, reaper)
    deadline = time.monotonic() + server.startup_timeout
    try:
        while time.monotonic() < deadline:
            if not handle.alive():
                raise SmolalignError(f"the vLLM server did not start ({handle.describe_exit()})")
            if healthy(handle.base_url, timeout=2):
                if not serves(handle.base_url, served_name):
                    raise SmolalignError(f"port {port}: the server answering there is not the one smolalign started "
                                         "(another took the port first); free it, or set generation.server.port")
                return handle
            time.sleep(min(2.0, max(deadline - time.monotonic(), 0.0)))
        raise SmolalignError(f"the vLLM server did not answer {HEALTH} within {server.startup_timeout:g} s "
                             f"(generation.server.startup_timeout); see {log}")
    except BaseException:
        stop_server(handle)
        raise


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
