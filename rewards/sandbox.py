"""Run untrusted, model-generated Python code in isolated, resource-limited processes, fast.

This module owns everything about *executing* code: choosing an isolation level that works on this machine, starting
the sandbox workers, handing them jobs, capturing bounded output, enforcing the wall-clock limit and cleaning up
every process and file afterwards. It knows nothing about tests or rewards (see ``rewards.code``).

Isolation levels (see docs/sandbox.md for what each protects against and what it does not):

* ``bwrap``   -- bubblewrap: a mount namespace with only read-only system directories and the base Python
  installation; no network, separate pid/ipc/uts namespaces.
* ``unshare`` -- util-linux ``unshare``: new network/pid/ipc/uts/mount namespaces; inside, the worker builds the same
  view of the filesystem as bwrap's on a fresh tmpfs root and pivots into it, and every mount is read-only before any
  code runs.

Both isolating levels show the code one view (``_view``): nothing of the host's files beyond it.
* ``rlimits`` -- resource limits only, no isolation at all. Never chosen automatically.

A pool slot is one *worker*: a trusted interpreter (``rewards/_sandbox_worker.py``) started once inside the level's
namespaces, as pid 1 of its own pid namespace. Each execution is a fork of it that gets a fresh tmpfs work
directory (mounted before the fork, unmounted after it), enters an IPC namespace of its own, drops privileges (as root: to a dedicated unprivileged uid per
worker), applies the rlimits and runs the code in the forked interpreter: no interpreter start per execution. Source
and stdin reach the execution as sealed memfds and its stdout/stderr are pipes read here, so the worker never holds
job data. The worker reports over a private pipe that the code started and how it ended, once it has killed and
reaped every process of the execution; no report means the sandbox itself failed (status ``sandbox_error``), which
callers must not confuse with wrong code.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

LEVELS = ("bwrap", "unshare", "rlimits")
_ISOLATING = ("bwrap", "unshare")
_SANDBOX_DIR = "/sandbox"  # where the work directory appears at both isolating levels
_NOBODY = 65534
_TOP_LEVEL_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_READ_CHUNK = 65536
_WORKER_SOURCE = (Path(__file__).parent / "_sandbox_worker.py").read_text()
# Imported once by every worker, so that executions do not each pay for them (the assert harness needs json). They
# are loaded before any code runs, from the read-only base installation.
_PRELOAD = ("json", "collections", "itertools", "functools", "math", "re", "heapq", "bisect", "string", "typing")
_GRACE_SECONDS = 2.0  # past the wall limit before an execution that never reported is blamed on the sandbox
# Two workers per core: an execution that runs long (a hang) holds one worker, and the others still keep every core
# busy; the host's and the worker's share of each short execution (a round trip between them) is overlapped with
# another execution instead of leaving the core idle. At most two executions then share a core, which is what the
# default wall/CPU limits allow for (Limits, docs/sandbox.md). Each worker costs ~8 MB of memory (PSS).
WORKERS_PER_CORE = 2


@dataclass(frozen=True)
class Limits:
    cpu_seconds: float = 5.0  # RLIMIT_CPU (rounded up to whole seconds)
    # Every process of the execution is killed after this. More than twice cpu_seconds: a CPU-bound program that
    # shares its core with another execution (Pool: up to two per core) reaches its CPU limit first.
    wall_seconds: float = 12.0
    memory_mb: int = 512  # RLIMIT_AS
    processes: int = 32  # RLIMIT_NPROC (tasks, threads included) in the isolating levels
    output_bytes: int = 1_000_000  # stdout+stderr captured at most this much; more -> status "output_limit"
    file_bytes: int = 10_000_000  # RLIMIT_FSIZE
    dir_bytes: int = 64_000_000  # size of the work directory's tmpfs in the isolating levels (it is memory)


@dataclass
class Execution:
    status: str  # "ok", "error", "timeout", "output_limit" or "sandbox_error"
    returncode: int | None  # exit code of the code, negative signal number if it was killed; None if we killed it
    stdout: str
    stderr: str
    seconds: float


class SandboxUnavailable(Exception):
    """No working sandbox of the requested kind on this machine."""


# ----------------------------------------------------------------------------------------------------------------
# Public API


def available_levels() -> list[str]:
    """The levels that work on this machine, each probed once (by running a trivial program in it)."""
    return [level for level in LEVELS if _probe(level) is None]


def choose_level(requested: str = "auto") -> str:
    """Resolve "auto" to bwrap, else unshare; check that an explicitly requested level works."""
    if requested != "auto" and requested not in LEVELS:
        raise ValueError(f"unknown sandbox level {requested!r}; expected 'auto' or one of {LEVELS}")
    candidates = _ISOLATING if requested == "auto" else (requested,)
    for level in candidates:
        if _probe(level) is None:
            return level
    tried = "; ".join(f"{level}: {_probe(level)}" for level in candidates)
    raise SandboxUnavailable(f"no working sandbox (tried {tried})")


def run_python(source: str, stdin: str = "", limits: Limits = Limits(), level: str = "auto") -> Execution:
    """Run `source` as a Python program in a fresh sandbox worker, feeding it `stdin`."""
    with Pool(1, limits, level) as pool:
        return pool.run_many([(source, stdin)])[0]


class Pool:
    """`workers` sandbox workers (`WORKERS_PER_CORE` per core by default), each running one execution at a time.
    Workers start on first use and are restarted if one ever dies; `close()` kills them and everything they started."""

    def __init__(self, workers: int | None = None, limits: Limits = Limits(), level: str = "auto"):
        self.level = choose_level(level)
        self.limits = limits
        self.workers = workers or WORKERS_PER_CORE * len(os.sched_getaffinity(0))
        self.executions = 0  # run so far, for throughput figures
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all = [_Worker(self.level, limits) for _ in range(self.workers)]
        for worker in self._all:
            self._idle.put(worker)
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="sandbox")

    def run_many(self, jobs: list[tuple[str, str]]) -> list[Execution]:
        """Run (source, stdin) jobs; the results are in the order of the jobs."""
        results = list(self._executor.map(self._run_one, jobs))
        self.executions += len(jobs)
        return results

    def _run_one(self, job: tuple[str, str]) -> Execution:
        worker = self._idle.get()
        try:
            return worker.run(job[0], job[1])
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for worker in self._all:
            worker.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------------------------
# Probing

_probe_lock = threading.Lock()
_probe_results: dict[str, str | None] = {}  # level -> None if it works, else why not
_PROBE_LIMITS = Limits(wall_seconds=30.0)
_WRAPPERS = {"bwrap": "bwrap", "unshare": "unshare"}


def _probe(level: str) -> str | None:
    with _probe_lock:
        if level not in _probe_results:
            _probe_results[level] = _try_level(level)
        return _probe_results[level]


def _try_level(level: str) -> str | None:
    if level in _WRAPPERS and shutil.which(_WRAPPERS[level]) is None:
        return f"{_WRAPPERS[level]} not found"
    worker = _Worker(level, _PROBE_LIMITS)
    try:
        execution = worker.run("print(6 * 7)", "")
    except Exception as e:  # noqa: BLE001 -- any failure just means the level is unavailable
        return f"{type(e).__name__}: {e}"
    finally:
        worker.close()
    if execution.status == "ok" and execution.stdout.strip() == "42":
        return None
    return f"probe ended with status {execution.status}: {execution.stderr.strip()[-300:]}"


# ----------------------------------------------------------------------------------------------------------------
# Workers


class _UidSlots:
    """As root, each worker runs its code as its own uid (65534, 65533, ...): RLIMIT_NPROC counts the tasks of a uid
    host-wide, so a shared uid would let one fork bomb starve every other execution of the batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: set[int] = set()

    def take(self) -> int:
        with self._lock:
            slot = next(i for i in range(len(self._used) + 1) if i not in self._used)
            self._used.add(slot)
        return _NOBODY - slot

    def give_back(self, uid: int) -> None:
        with self._lock:
            self._used.discard(_NOBODY - uid)


_uid_slots = _UidSlots()


class _Worker:
    """One pre-started worker process and the control socket it takes jobs from."""

    def __init__(self, level: str, limits: Limits):
        self.level, self.limits = level, limits
        self.proc: subprocess.Popen | None = None
        self.uid: int | None = None
        self.mount_point: str | None = None
        self.control: socket.socket | None = None
        self._lock = threading.Lock()  # close() may come from another thread (the pool closing mid-batch)

    def run(self, source: str, stdin: str) -> Execution:
        start = time.monotonic()
        with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                self._close()
                try:
                    self._start()
                except OSError as e:
                    return Execution("sandbox_error", None, "", f"could not start the sandbox: {e}", 0.0)
            control = self.control
        execution = self._execute(control, source.encode("utf-8", "replace"), stdin.encode("utf-8", "replace"), start)
        if execution.status == "sandbox_error":
            with self._lock:
                if self.control is control:
                    execution.stderr = (execution.stderr + self._worker_stderr()).strip()
                    self._close()  # whatever went wrong, the next execution gets a fresh worker
        return execution

    def _start(self) -> None:
        isolating = self.level in _ISOLATING
        self.uid = _uid_slots.take() if isolating and os.geteuid() == 0 else None
        if self.level == "unshare":  # where the worker mounts the fresh root it then pivots into
            self.mount_point = tempfile.mkdtemp(prefix="smolalign-sandbox-")
            os.chmod(self.mount_point, 0o755)
        workdir = _SANDBOX_DIR if isolating else tempfile.gettempdir()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {
            "control_fd": theirs.fileno(),
            "namespaces": isolating,
            "fresh_root": self.mount_point if self.level == "unshare" else None,
            "view": _view() if self.level == "unshare" else [],
            "workdir": workdir,
            "scratch": tempfile.gettempdir(),
            "uid": self.uid,
            "gid": _NOBODY if self.uid is not None else None,
            "wall_seconds": self.limits.wall_seconds,
            "dir_bytes": self.limits.dir_bytes,
            "dir_files": 4096,
            "preload": _PRELOAD,
            # Without namespaces RLIMIT_NPROC would count all of this user's processes, not just the sandbox's.
            "limits": _rlimits(self.limits, with_nproc=isolating, shared=_tasks_sharing_the_uid(self.level, self.uid)),
        }
        argv = [_interpreter(), "-I", "-S", "-c", _WORKER_SOURCE, json.dumps(config)]
        env = _sandbox_env(workdir)
        if self.level == "bwrap":
            argv = _bwrap_prefix(env) + argv
        elif self.level == "unshare":
            argv = _unshare_prefix() + argv
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
                                         env=env, cwd="/", pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self.control = ours

    def _execute(self, control: socket.socket, source: bytes, stdin: bytes, start: float) -> Execution:
        limits = self.limits
        job, stdin_file = _sealed_memfd(source), _sealed_memfd(stdin)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        report_r, report_w = os.pipe()
        cancel_r, cancel_w = os.pipe()
        try:
            try:
                socket.send_fds(control, [b"job"], [job, stdin_file, out_w, err_w, report_w, cancel_r])
            except OSError as e:
                return Execution("sandbox_error", None, "", f"the sandbox worker is gone: {e}", time.monotonic() - start)
            finally:
                for fd in (job, stdin_file, out_w, err_w, report_w, cancel_r):
                    os.close(fd)
            deadline = start + limits.wall_seconds + _GRACE_SECONDS
            stdout, stderr, report, over = _collect(out_r, err_r, report_r, cancel_w, deadline, limits.output_bytes)
        finally:
            for fd in (out_r, err_r, report_r, cancel_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        status, returncode = _classify(report, over)
        return Execution(status, returncode, _decode(stdout), _decode(stderr), time.monotonic() - start)

    def _worker_stderr(self) -> str:
        if self.proc is None:
            return ""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(0.2)  # a worker that failed to start is exiting: let it finish its message
        self.stderr.seek(0)
        return "\n" + _decode(self.stderr.read(_READ_CHUNK))

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self.proc is not None:
            self.control.close()  # the worker exits on EOF; as pid 1 of its namespace it takes everything with it
            self.control = None
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # the wrapper and whatever is left of its session
            self.proc.wait()
            self.stderr.close()
            self.proc = None
        if self.uid is not None:
            _uid_slots.give_back(self.uid)
            self.uid = None
        if self.mount_point:
            shutil.rmtree(self.mount_point, ignore_errors=True)
            self.mount_point = None


def _sealed_memfd(data: bytes) -> int:
    """An anonymous file holding `data` that nobody can change any more (the code gets it as main.py or stdin)."""
    fd = os.memfd_create("smolalign-sandbox", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return fd


def _collect(out_r: int, err_r: int, report_r: int, cancel_w: int, deadline: float, output_bytes: int):
    """Read stdout, stderr and the worker's report until all three close (the worker closes the report once
    every process of the execution is gone). Past `output_bytes`, ask the worker to kill the execution. Returns
    (stdout, stderr, report, over the output limit)."""
    sinks = {out_r: bytearray(), err_r: bytearray(), report_r: bytearray()}
    over = False
    poller = select.poll()  # not an epoll selector: that would cost a file descriptor and four syscalls per job
    for fd in sinks:
        poller.register(fd, select.POLLIN)
    pending = set(sinks)
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break  # no report: a sandbox error, and the worker is replaced
        for fd, _ in poller.poll(math.ceil(remaining * 1000)):
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                poller.unregister(fd)
                pending.discard(fd)
                continue
            if fd != report_r and over:
                continue
            sinks[fd] += chunk
            if not over and len(sinks[out_r]) + len(sinks[err_r]) > output_bytes:
                over = True
                with contextlib.suppress(OSError):
                    os.write(cancel_w, b"x")
    return bytes(sinks[out_r][:output_bytes]), bytes(sinks[err_r][:output_bytes]), bytes(sinks[report_r]), over


def _classify(report: bytes, over: bool) -> tuple[str, int | None]:
    """Status and return code from the report: b"S" once the code is about to start, then b"E<wait status>\\n" when
    it exited, b"T" when the wall clock ran out or b"C" when it was killed for its output."""
    if not report.startswith(b"S"):
        return "sandbox_error", None
    if over or report[1:2] == b"C":
        return "output_limit", None
    if report[1:2] == b"T":
        return "timeout", None
    match = re.fullmatch(rb"SE(\d+)\n", report)
    if match is None:
        return "sandbox_error", None
    returncode = os.waitstatus_to_exitcode(int(match[1]))
    if returncode == -signal.SIGXCPU:
        return "timeout", returncode
    return ("ok" if returncode == 0 else "error"), returncode


# ----------------------------------------------------------------------------------------------------------------
# Command lines


def _view() -> list[tuple[str, ...]]:
    """What the code sees of the filesystem at both isolating levels, besides its work directory (`/sandbox`), the
    worker's `/proc` and a minimal read-only `/dev`: the system directories, the loader and timezone files and the base
    Python installation, bound read-only at their own paths, and an empty read-only `/tmp`. Nothing else of the host:
    not its `/tmp`, `/root`, `/home`, the project or the venv. Entries: ("bind", path), ("bind-try", path) for a path
    that may be absent, ("symlink", target, path), ("dir", path)."""
    entries: list[tuple[str, ...]] = [("bind", "/usr")]
    for path in _TOP_LEVEL_DIRS:
        if os.path.islink(path):
            entries.append(("symlink", os.readlink(path), path))
        elif os.path.isdir(path):
            entries.append(("bind", path))
    entries += [("bind-try", path) for path in _ETC_FILES]
    base = _base_prefix()
    if not _is_within(base, "/usr"):
        entries += [("dir", ancestor) for ancestor in _ancestors(base)]  # 0755: e.g. /root is 0700 on the host
        entries.append(("bind", base))
    entries += [("dir", "/tmp"), ("dir", _SANDBOX_DIR)]
    return entries


def _bwrap_prefix(env: dict) -> list[str]:
    # --as-pid-1: the worker itself is pid 1, so that killing everything else in the namespace ends an execution.
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--clearenv", "--as-pid-1"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    # The worker needs CAP_SYS_ADMIN for each execution's IPC namespace and tmpfs, and (as root)
    # CAP_KILL to kill what the code started under its own uid; the code itself runs with no capabilities.
    if os.geteuid() == 0:
        # As root, --unshare-all makes a user namespace that maps 0 to 0 and bwrap keeps *all* capabilities. Leave the
        # user namespace out so the execution can switch to an unprivileged uid, and keep only the caps for that.
        argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        argv += ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SYS_ADMIN", "CAP_KILL"):
            argv += ["--cap-add", cap]
    else:
        argv += ["--unshare-all", "--cap-add", "CAP_SYS_ADMIN"]
    for kind, *args in _view():
        if kind == "symlink":
            argv += ["--symlink", *args]
        elif kind == "dir":
            argv += ["--perms", "0755", "--dir", args[0]]  # bwrap would copy e.g. /root's 0700
        else:
            argv += ["--ro-bind" if kind == "bind" else "--ro-bind-try", args[0], args[0]]
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]  # else /dev/shm is writable RAM
    argv += ["--remount-ro", "/"]
    return argv


def _unshare_prefix() -> list[str]:
    argv = [shutil.which("unshare") or "unshare"]
    if os.geteuid() != 0:
        argv += ["--user", "--map-root-user"]
    return argv + ["--net", "--pid", "--ipc", "--uts", "--fork", "--mount-proc", "--kill-child",
                   "--propagation", "private"]


def _tasks_sharing_the_uid(level: str, uid: int | None) -> int:
    """Without root the code keeps our uid, whose tasks are counted per user namespace (one per worker): there the
    worker, and under unshare the unshare process too, already hold some of the code's process budget."""
    if uid is not None:
        return 0
    return {"bwrap": 1, "unshare": 2}.get(level, 0)


def _rlimits(limits: Limits, with_nproc: bool, shared: int = 0) -> list[tuple[str, int, int]]:
    cpu = max(1, math.ceil(limits.cpu_seconds))
    memory = limits.memory_mb * 2**20
    rows = [
        ("RLIMIT_CPU", cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL one second later
        ("RLIMIT_AS", memory, memory),
        ("RLIMIT_FSIZE", limits.file_bytes, limits.file_bytes),
        ("RLIMIT_CORE", 0, 0),
        ("RLIMIT_NOFILE", 256, 256),
    ]
    if with_nproc:
        processes = limits.processes + shared
        rows.append(("RLIMIT_NPROC", processes, processes))
    return rows


def _sandbox_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


def _base_prefix() -> str:
    return os.path.realpath(sys.base_prefix)


def _interpreter() -> str:
    """The base installation's interpreter (never a venv's), so that only the base installation is needed inside."""
    executable = os.path.realpath(sys.executable) if sys.executable else ""
    if executable and _is_within(executable, _base_prefix()):
        return executable
    major, minor = sys.version_info[:2]
    return os.path.realpath(os.path.join(_base_prefix(), "bin", f"python{major}.{minor}"))


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]



def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
