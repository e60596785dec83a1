"""The previous sandbox (one namespace set-up and two interpreter starts per execution), kept unchanged as the
baseline that benchmarks/rewards.py measures the worker pool against. Not used by smolalign.

Original description:
Run untrusted, model-generated Python code in an isolated, resource-limited child process.

This module owns everything about *executing* code: choosing an isolation level that works on this machine,
building the command line for it, the in-sandbox bootstrap that applies limits and drops privileges, feeding stdin,
capturing bounded output, enforcing the wall-clock limit and cleaning up every process and file afterwards.
It knows nothing about tests or rewards (see ``rewards.code``).

Isolation levels (see SANDBOX.md for what each protects against and what it does not):

* ``bwrap``   -- bubblewrap: a new mount namespace that contains only read-only system directories, the base Python
  installation and a fresh writable work directory; no network, separate pid/ipc/uts namespaces.
* ``unshare`` -- util-linux ``unshare``: new network/pid/ipc/uts/mount namespaces; inside, every mount except the work
  directory is remounted read-only before the code runs.
* ``rlimits`` -- resource limits only, no isolation at all. Never chosen automatically.

In every level the code runs as ``python main.py`` in its own temporary directory, below a small trusted bootstrap
that applies the rlimits, drops privileges (as root: to a dedicated unprivileged uid per concurrent execution), and
reports over a private pipe that the sandbox came up and how the code exited. No report means the sandbox itself
failed (status ``sandbox_error``), which callers must not confuse with wrong code.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

LEVELS = ("bwrap", "unshare", "rlimits")
_ISOLATING = ("bwrap", "unshare")
_SANDBOX_DIR = "/sandbox"  # where the work directory appears inside bwrap
_NOBODY = 65534
_TOP_LEVEL_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_READ_CHUNK = 65536
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # a write this small never blocks once select() says writable


@dataclass(frozen=True)
class Limits:
    cpu_seconds: float = 5.0  # RLIMIT_CPU (rounded up to whole seconds)
    wall_seconds: float = 10.0  # the whole process tree / namespace is killed after this
    memory_mb: int = 512  # RLIMIT_AS
    processes: int = 32  # RLIMIT_NPROC (tasks, threads included) in the isolating levels
    output_bytes: int = 1_000_000  # stdout+stderr captured at most this much; more -> status "output_limit"
    file_bytes: int = 10_000_000  # RLIMIT_FSIZE


@dataclass
class Execution:
    status: str  # "ok", "error", "timeout", "output_limit" or "sandbox_error"
    returncode: int | None  # exit code of the code, negative signal number if it was killed; None if we killed it
    stdout: str
    stderr: str
    seconds: float


class SandboxUnavailable(Exception):
    """No working sandbox of the requested kind on this machine."""


# The trusted part that runs inside the sandbox, before the untrusted code. It is passed with `python -I -S -c`, so
# it is never a file the code could read or modify; its JSON config (argv[1]) holds nothing secret.
_BOOTSTRAP = r"""
import errno, json, os, re, resource, sys

MS_RDONLY, MS_NOSUID, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 32, 4096, 16384
LOCKED_FLAGS = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21,
                "strictatime": 1 << 24}
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
_libc = None


def libc():
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    return _libc


def check(result, what):
    if result != 0:
        import ctypes
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), what)


def mount(src, dst, fstype=None, flags=0, data=None):
    enc = lambda s: None if s is None else os.fsencode(s)
    check(libc().mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), dst)


def mount_points():
    with open("/proc/self/mountinfo") as f:
        rows = [line.split() for line in f]
    return [(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), r[4]), r[5].split(",")) for r in rows]


def expose(base):
    # The uid we drop to may not traverse e.g. /root, where the interpreter lives: cover the first such ancestor with
    # an empty tmpfs (this also hides the rest of it) and bind the installation back at its own path.
    parts = base.strip("/").split("/")
    ancestors = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
    blocked = next((a for a in ancestors if not os.stat(a).st_mode & 0o001), None)
    if blocked is None:
        return
    fd = os.open(base, os.O_PATH | os.O_DIRECTORY)
    mount("tmpfs", blocked, "tmpfs", MS_NOSUID, "mode=755,size=64k")
    os.makedirs(base, exist_ok=True)
    mount("/proc/self/fd/%d" % fd, base, flags=MS_BIND | MS_REC)
    os.close(fd)


def read_only_world(workdir):
    mount(workdir, workdir, flags=MS_BIND)
    for target, options in mount_points():
        if target != workdir:
            # Flags such as nodev are locked in a user namespace and must be repeated, or the remount fails.
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | sum(LOCKED_FLAGS.get(o, 0) for o in options)
            try:
                mount(None, target, flags=flags)
            except OSError:
                pass  # judged by the check below: shadowed mount points cannot be remounted and need not be
    for target, _ in mount_points():
        if target == workdir or target.startswith(("/proc", "/sys")) or not os.path.lexists(target):
            continue
        if not os.statvfs(target).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, "could not make this mount read-only", target)


def drop_capability_bounding_set():
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        check(libc().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "PR_CAPBSET_DROP")


def set_limits(limits):
    for name, soft, hard in limits:
        resource_id = getattr(resource, name)
        current_hard = resource.getrlimit(resource_id)[1]
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(resource_id, (soft, hard))


def enter_sandbox(config):
    # In the forked child: become the unprivileged user that runs the code, with its limits.
    if config["uid"] is not None:
        os.setgroups([])
        os.setresgid(config["gid"], config["gid"], config["gid"])
        os.setresuid(config["uid"], config["uid"], config["uid"])
    elif config["private_mounts"]:
        drop_capability_bounding_set()  # root of a user namespace: after exec the code then holds no capabilities
    if config["private_mounts"]:
        check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    os.chdir(config["workdir"])
    set_limits(config["limits"])


config = json.loads(sys.argv[1])
marker = config["marker_fd"]
os.set_inheritable(marker, False)  # so the code never holds it: it cannot forge the reports below
os.umask(0o022)
if config["private_mounts"]:
    if config["uid"] is not None:
        expose(config["base"])
    read_only_world(config["workdir"])
# This process stays behind as a reaper that reports how the code exited. It forks before dropping privileges so
# that, as root, the code (another uid) can neither signal nor trace it; otherwise non-dumpable keeps ptrace off.
pid = os.fork()
if pid == 0:
    try:
        enter_sandbox(config)
        os.write(marker, b"S")
        os.execv(sys.executable, [sys.executable, "-E", "-s", "-S", "-B", "main.py"])
    except BaseException:
        import traceback
        traceback.print_exc()
    os._exit(127)
try:
    libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
except Exception:
    pass
status = os.waitpid(pid, 0)[1]
os.write(marker, b"E%d\n" % status)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


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
    """Run `source` as a Python program in a fresh sandbox, feeding it `stdin`."""
    return _execute(source, stdin, limits, choose_level(level))


class Pool:
    """Runs many executions in parallel (one thread per running sandbox, each waiting on its subprocess)."""

    def __init__(self, workers: int | None = None, limits: Limits = Limits(), level: str = "auto"):
        self.level = choose_level(level)
        self.limits = limits
        self.workers = workers or len(os.sched_getaffinity(0))
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="sandbox")

    def run_many(self, jobs: list[tuple[str, str]]) -> list[Execution]:
        """Run (source, stdin) jobs; the results are in the order of the jobs."""
        return list(self._executor.map(lambda job: _execute(job[0], job[1], self.limits, self.level), jobs))

    def close(self) -> None:
        self._executor.shutdown(wait=True)

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
    try:
        execution = _execute("print(6 * 7)", "", _PROBE_LIMITS, level)
    except Exception as e:  # noqa: BLE001 -- any failure just means the level is unavailable
        return f"{type(e).__name__}: {e}"
    if execution.status == "ok" and execution.stdout.strip() == "42":
        return None
    return f"probe ended with status {execution.status}: {execution.stderr.strip()[-300:]}"


# ----------------------------------------------------------------------------------------------------------------
# One execution


class _UidSlots:
    """As root, each concurrent execution runs as its own uid (65534, 65533, ...): RLIMIT_NPROC counts the tasks of a
    uid host-wide, so a shared uid would let one fork bomb starve every other execution of the batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: set[int] = set()

    @contextlib.contextmanager
    def hold(self, needed: bool):
        if not needed:
            yield None
            return
        with self._lock:
            slot = next(i for i in range(len(self._used) + 1) if i not in self._used)
            self._used.add(slot)
        try:
            yield _NOBODY - slot
        finally:
            with self._lock:
                self._used.discard(slot)


_uid_slots = _UidSlots()


def _execute(source: str, stdin: str, limits: Limits, level: str) -> Execution:
    start = time.monotonic()
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="smolalign-sandbox-"))
    try:
        with _uid_slots.hold(os.geteuid() == 0 and level in _ISOLATING) as uid:
            _prepare_workdir(workdir, source, uid)
            return _spawn(workdir, uid, stdin.encode("utf-8", "replace"), limits, level, start)
    finally:
        _remove_tree(workdir)


def _prepare_workdir(workdir: str, source: str, uid: int | None) -> None:
    path = os.path.join(workdir, "main.py")
    with open(path, "w", encoding="utf-8", errors="replace") as f:
        f.write(source)
    if uid is not None:
        os.chown(path, uid, _NOBODY)
        os.chown(workdir, uid, _NOBODY)


def _spawn(workdir: str, uid: int | None, data: bytes, limits: Limits, level: str, start: float) -> Execution:
    marker_read, marker_write = os.pipe()
    try:
        try:
            argv, env = _command(level, workdir, uid, marker_write, limits)
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=workdir,
                pass_fds=(marker_write,), start_new_session=True,
            )
        except OSError as e:
            return Execution("sandbox_error", None, "", f"could not start the sandbox: {e}", time.monotonic() - start)
        finally:
            os.close(marker_write)
        stdout, stderr, reason = _communicate(proc, data, start + limits.wall_seconds, limits.output_bytes)
        report = _read_all(marker_read)
    finally:
        os.close(marker_read)
    status, returncode = _classify(report, reason, proc.returncode)
    return Execution(status, returncode, _decode(stdout), _decode(stderr), time.monotonic() - start)


def _classify(report: bytes, reason: str | None, wrapper_returncode: int) -> tuple[str, int | None]:
    """Status and return code from the bootstrap's report: b"S" once the sandbox is set up and the code is about to
    start, b"E<wait status>\\n" when it exited."""
    if not report.startswith(b"S"):
        return "sandbox_error", wrapper_returncode
    if reason is not None:
        return reason, None
    match = re.search(rb"E(\d+)\n", report)
    if match is None:  # the code killed its own bootstrap
        return "error", wrapper_returncode
    returncode = os.waitstatus_to_exitcode(int(match[1]))
    if returncode == -signal.SIGXCPU:
        return "timeout", returncode
    return ("ok" if returncode == 0 else "error"), returncode


def _command(level: str, workdir: str, uid: int | None, marker_fd: int, limits: Limits) -> tuple[list[str], dict]:
    inside = _SANDBOX_DIR if level == "bwrap" else workdir
    config = {
        "marker_fd": marker_fd,
        "workdir": inside,
        "uid": uid,
        "gid": _NOBODY if uid is not None else None,
        "private_mounts": level == "unshare",
        "base": _base_prefix(),
        # Without namespaces RLIMIT_NPROC would count all of this user's processes, not just the sandbox's.
        "limits": _rlimits(limits, with_nproc=level in _ISOLATING),
    }
    python = [_interpreter(), "-I", "-S", "-c", _BOOTSTRAP, json.dumps(config)]
    env = _sandbox_env(inside)
    if level == "bwrap":
        return _bwrap_prefix(workdir, env) + python, env
    if level == "unshare":
        return _unshare_prefix() + python, env
    if level == "rlimits":
        return python, env
    raise ValueError(f"unknown sandbox level {level!r}")


def _bwrap_prefix(workdir: str, env: dict) -> list[str]:
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    if os.geteuid() == 0:
        # As root, --unshare-all makes a user namespace that maps 0 to 0 and bwrap keeps *all* capabilities. Leave the
        # user namespace out so the bootstrap can switch to an unprivileged uid, and keep only the caps for that.
        argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for path in _TOP_LEVEL_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    base = _base_prefix()
    if not _is_within(base, "/usr"):
        for ancestor in _ancestors(base):
            argv += ["--perms", "0755", "--dir", ancestor]  # bwrap would copy e.g. /root's 0700
        argv += ["--ro-bind", base, base]
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]  # else /dev/shm is writable RAM
    argv += ["--bind", workdir, _SANDBOX_DIR, "--remount-ro", "/"]
    return argv


def _unshare_prefix() -> list[str]:
    argv = [shutil.which("unshare") or "unshare"]
    if os.geteuid() != 0:
        argv += ["--user", "--map-root-user"]
    return argv + ["--net", "--pid", "--ipc", "--uts", "--fork", "--mount-proc", "--kill-child",
                   "--propagation", "private"]


def _rlimits(limits: Limits, with_nproc: bool) -> list[tuple[str, int, int]]:
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
        rows.append(("RLIMIT_NPROC", limits.processes, limits.processes))
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


# ----------------------------------------------------------------------------------------------------------------
# Talking to the process


def _communicate(proc: subprocess.Popen, data: bytes, deadline: float, output_bytes: int):
    """Feed stdin and collect stdout/stderr until both close, the deadline passes or the output grows too large.
    On return the process has been reaped and its process group killed. Returns (stdout, stderr, reason) where
    reason is None, "timeout" or "output_limit"."""
    sinks = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    reason = None
    with selectors.DefaultSelector() as selector:
        for stream in sinks:
            selector.register(stream, selectors.EVENT_READ)
        if data:
            selector.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        written = 0
        while reason is None and selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reason = "timeout"
                break
            for key, _ in selector.select(remaining):
                if key.fileobj is proc.stdin:
                    written = _feed(proc.stdin, data, written, selector)
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                sinks[key.fileobj] += chunk
                if sum(map(len, sinks.values())) > output_bytes:
                    reason = "output_limit"
                    break
    if reason is None and not _exited_by(proc.pid, deadline):
        reason = "timeout"
    _kill_group(proc.pid)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    return bytes(sinks[proc.stdout][:output_bytes]), bytes(sinks[proc.stderr][:output_bytes]), reason


def _feed(stdin, data: bytes, written: int, selector: selectors.BaseSelector) -> int:
    try:
        written += os.write(stdin.fileno(), data[written : written + _PIPE_BUF])
    except BrokenPipeError:
        written = len(data)
    if written >= len(data):
        selector.unregister(stdin)
        stdin.close()
    return written


def _exited_by(pid: int, deadline: float) -> bool:
    """Wait until `pid` exits or the deadline passes, without reaping it (so its pid, which is also the process
    group id, cannot be reused before the group is killed)."""
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _kill_group(pgid: int) -> None:
    # With bwrap/unshare this kills the wrapper; the namespace's init dies with it (PR_SET_PDEATHSIG), and the
    # kernel then kills every process left in the pid namespace, whatever session or group it moved to.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    return b"".join(chunks)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _remove_tree(path: str) -> None:
    if os.geteuid() != 0:
        # Code running as our own uid may have left directories without permissions; root does not care.
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
        for root, dirs, _ in os.walk(path):
            for name in dirs:
                child = os.path.join(root, name)
                if not os.path.islink(child):
                    with contextlib.suppress(OSError):
                        os.chmod(child, 0o700)
    shutil.rmtree(path, ignore_errors=True)
