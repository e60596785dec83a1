"""The trusted sandbox worker. Never imported: `rewards.sandbox` passes this file's text to `python -I -S -c`, inside
the worker's namespaces (bwrap or unshare), so it is never a file the code could read or modify.

The worker is pid 1 of its own pid namespace, which holds nothing but the worker and the execution in progress. Per
job (see docs/sandbox.md for what each step protects):

    worker      waits for a job on its control socket, mounts a fresh tmpfs work dir, forks, then supervises the
    │           fork: enforces the wall clock and the host's cancel, kills everything else in its pid namespace,
    │           reaps it, unmounts the work dir and reports how it ended
    └─ fork     enters an IPC namespace of its own, drops privileges, applies the rlimits and runs the program in
                this forked interpreter

The worker never reads a job's source or stdin (they arrive as file descriptors that only the execution reads), so
the memory image every execution is forked from holds no other execution's data.
"""

import errno
import gc
import json
import os
import resource
import select
import signal
import socket
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEVICE_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"))
LOCKED_FLAGS = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21,
                "strictatime": 1 << 24}
CLONE_NEWIPC = 0x08000000
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = 1, 7, -4, -5
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 4, 24, 36, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_libc = None
WARM_UP = """\
import sys
from collections import deque


class Graph:
    def __init__(self, n, edges):
        self.adjacent = [[] for _ in range(n)]
        for a, b in edges:
            self.adjacent[a].append(b)

    def distances(self, source):
        seen = {source: 0}
        queue = deque([source])
        while queue:
            node = queue.popleft()
            for other in self.adjacent[node]:
                if other not in seen:
                    seen[other] = seen[node] + 1
                    queue.append(other)
        return seen


def main():
    data = sys.stdin.read().split()
    n, m = int(data[0]), int(data[1])
    edges = [(int(data[2 + 2 * i]), int(data[3 + 2 * i])) for i in range(m)]
    print(f"{len(Graph(n, edges).distances(0))} reachable", end="\\n")
    assert sorted({x % 3 for x in range(10)}) == [0, 1, 2], "sets"


if __name__ == "__main__":
    main()
"""


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
    def enc(s):
        return None if s is None else os.fsencode(s)

    check(libc().mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), dst)


def mount_points():
    import re

    with open("/proc/self/mountinfo") as f:
        rows = [line.split() for line in f]
    return [(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), r[4]), r[5].split(",")) for r in rows]


def fresh_root(root, view):
    """The unshare level's filesystem, the one bwrap builds (`view`, from rewards.sandbox._view): a new tmpfs at
    `root` holding the read-only binds, directories and links of the view, the worker's own /proc and a minimal /dev;
    then pivot into it and detach the host's tree, so that nothing else of the host is reachable from here on."""
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m,nr_inodes=4096")
    for kind, *args in view:
        target = root + args[-1]
        if kind == "dir":
            os.makedirs(target, 0o755, exist_ok=True)
        elif kind == "symlink":
            os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
            os.symlink(args[0], target)
        elif kind == "bind" or os.path.exists(args[0]):  # "bind-try" of an absent path: left out
            bind(args[0], target)
    dev = root + "/dev"
    os.mkdir(dev, 0o755)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=64k")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            bind(f"/dev/{name}", f"{dev}/{name}")
    for name, target in DEVICE_LINKS:
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm", 0o755)  # read-only, as bwrap's: multiprocessing's locks fail there at both levels
    os.mkdir(root + "/proc", 0o555)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    check(libc().syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")  # the old root now lies under the new one
    check(libc().umount2(b".", MNT_DETACH), "the host's root")
    os.chdir("/")


def bind(source, target):
    if os.path.isdir(source):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "w").close()
    mount(source, target, flags=MS_BIND | MS_REC)


def read_only_world():
    for target, options in mount_points():
        # Flags such as nodev are locked in a user namespace and must be repeated, or the remount fails.
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | sum(LOCKED_FLAGS.get(o, 0) for o in options)
        try:
            mount(None, target, flags=flags)
        except OSError:
            pass  # judged by the check below: shadowed mount points cannot be remounted and need not be
    for target, _ in mount_points():
        if target.startswith(("/proc", "/sys")) or not os.path.lexists(target):
            continue
        if not os.statvfs(target).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, "could not make this mount read-only", target)


def drop_capabilities():
    """Empty the permitted, effective, inheritable and ambient sets (root of a user namespace keeps them across fork,
    and no exec follows that would drop them), and the bounding set where we may (bwrap leaves us without
    CAP_SETPCAP, but then no_new_privs, set next, keeps any exec from gaining capabilities)."""
    import ctypes

    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if libc().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EPERM:
            check(-1, "PR_CAPBSET_DROP")
    check(libc().prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "PR_CAP_AMBIENT")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    check(libc().capset(header, (ctypes.c_uint32 * 6)()), "capset")


def keyctl(*args):
    import ctypes

    if SYS_KEYCTL is None:
        return
    if libc().syscall(SYS_KEYCTL, *(ctypes.c_long(a) for a in args)) == -1 and ctypes.get_errno() != errno.ENOSYS:
        check(-1, f"keyctl{args}")


def fresh_keyrings():
    """Kernel keyrings outlive processes: the per-uid ones are emptied (as the code's uid, before the code runs), and
    a new empty session keyring replaces the one inherited from whoever started the pool."""
    keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)
    keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)
    keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)


def set_limits(limits):
    for name, soft, hard in limits:
        resource_id = getattr(resource, name)
        current_hard = resource.getrlimit(resource_id)[1]
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(resource_id, (soft, hard))


def serve(control, config):
    """The worker's loop: forks one process per job and supervises it; returns only in that process (which then runs
    the code) with (source, path of main.py)."""
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:  # rlimits level: orphans of earlier executions, reparented to us
                pass
        except ChildProcessError:
            pass
        try:
            message, fds, _, _ = socket.recv_fds(control, 16, 8)
        except OSError:
            message, fds = b"", []
        if message != b"job" or len(fds) != 6:
            for fd in fds:
                os.close(fd)
            os._exit(0)  # the pool closed (or died): as pid 1 of our namespace, everything in it dies with us
        scratch = None  # the rlimits level's work directory, on the host's temp filesystem
        if config["namespaces"]:
            fresh_workdir(config)
        else:
            scratch = os.path.join(config["scratch"], f"smolalign-sandbox-{os.urandom(8).hex()}")
        pid = os.fork()
        if pid == 0:
            control.close()
            return start_execution(config, fds, scratch)
        if not config["namespaces"]:
            try:
                os.setpgid(pid, pid)  # as the execution does itself: whichever comes first, the kill finds its group
            except OSError:
                pass  # it already exited
        supervise(config, pid, fds, scratch)


def fresh_workdir(config):
    """Mount a new, empty tmpfs as the next execution's work directory, in the worker's mount namespace (which the
    code cannot change: it has no capabilities). Mounting here instead of in a mount namespace per execution spares
    each execution the copy of the mount tree and, at its exit, the namespace's teardown, which waits for an RCU grace
    period (about 3 ms)."""
    owner = "" if config["uid"] is None else f",uid={config['uid']},gid={config['gid']}"
    mount("tmpfs", config["workdir"], "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={config['dir_bytes']},nr_inodes={config['dir_files']},mode=0700{owner}")


def read_all(fd):
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def start_execution(config, fds, scratch):
    job_fd, stdin_fd, stdout_fd, stderr_fd, report_fd, cancel_fd = fds
    try:
        os.close(cancel_fd)
        if config["namespaces"]:
            # SysV IPC objects and POSIX message queues outlive their processes: a new IPC namespace, which dies
            # with the execution.
            check(libc().unshare(CLONE_NEWIPC), "unshare")
            workdir = config["workdir"]
        else:
            workdir = scratch
            os.mkdir(workdir, 0o700)
        source = read_all(job_fd)
    except BaseException:
        import traceback

        os.dup2(stderr_fd, 2)
        traceback.print_exc()
        os._exit(127)
    run_as_code(config, workdir, source, (stdin_fd, stdout_fd, stderr_fd), report_fd)
    return source, os.path.join(workdir, "main.py")


def supervise(config, pid, fds, scratch):
    """Wait for the code to exit, the wall clock to run out or the host to cancel; then kill every process of the
    execution, reap them and report how it ended. The report pipe closes only once nothing of it is left."""
    for fd in fds[:4]:  # only the execution reads the job and stdin, and writes stdout and stderr
        os.close(fd)
    report_fd, cancel_fd = fds[4:]
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(cancel_fd, select.POLLIN)
    events = dict(poller.poll(config["wall_seconds"] * 1000))
    os.close(pidfd)
    if pidfd in events:
        report = b"E%d\n" % os.waitpid(pid, 0)[1]
    else:
        report = b"C" if cancel_fd in events else b"T"  # output limit (or the pool went away), or wall clock
    if config["namespaces"]:
        # As pid 1 of a namespace that holds only us and this execution: everything it started, whatever it did.
        assert os.getpid() == 1
        victims = -1
    else:
        victims = -pid  # the code's session and process group
    try:
        os.kill(victims, signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing left
    try:
        if config["namespaces"]:
            while True:
                os.waitpid(-1, 0)
        elif report[:1] != b"E":
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    if config["namespaces"]:
        # Nothing of the execution is left to hold its tmpfs: unmount it, contents and all. Should that ever fail,
        # exit without reporting: the host blames the sandbox and starts a fresh worker.
        if libc().umount2(os.fsencode(config["workdir"]), 0) != 0:
            os._exit(1)
    if scratch:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    os.write(report_fd, report)
    os.close(report_fd)
    os.close(cancel_fd)


def run_as_code(config, workdir, source, stdio, report_fd):
    try:
        # Its own process group, out of the one of whoever started the worker. Not a session: with scheduler
        # autogroups (the default), setsid creates a scheduling group, which costs up to milliseconds under load.
        os.setpgid(0, 0)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        if config["uid"] is not None:
            os.setgroups([])
            os.setresgid(config["gid"], config["gid"], config["gid"])
            os.setresuid(config["uid"], config["uid"], config["uid"])
        elif config["namespaces"]:
            drop_capabilities()
        if config["namespaces"]:
            fresh_keyrings()
        os.chdir(workdir)
        fd = os.open("main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        view = memoryview(source)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        os.write(report_fd, b"S")
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        set_limits(config["limits"])
    except BaseException:
        import traceback

        traceback.print_exc()
        os._exit(127)
    os.umask(0o022)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the worker, pid 1, must not have a handler
    sys.argv = ["main.py"]
    sys.path.insert(0, workdir)
    if "random" in sys.modules:
        sys.modules["random"].seed()  # else every execution would draw the worker's sequence


def finish(code):
    """End like the interpreter would, minus finalization (tearing down every module costs more than the execution):
    wait for the code's threads, run its atexit functions, flush, exit."""
    import atexit

    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- e.g. the code closed it
            pass
    os._exit(code)


def main():
    config = json.loads(sys.argv[1])
    control = socket.socket(fileno=config["control_fd"])
    control.set_inheritable(False)
    os.umask(0o022)  # whatever the pool was started with: directories made for mounts must be traversable
    sys.dont_write_bytecode = True
    for name in ("mount", "umount2", "unshare", "prctl", "syscall", "capset"):
        getattr(libc(), name)  # ctypes resolves a function on first use: once here, not in every execution
    libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if config["namespaces"]:
        keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)  # let go of the session keyring of whoever started the pool
        # Inherited by every execution. The worker itself never calls exec, so it loses nothing by it.
        check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
        mount(None, "/", flags=MS_REC | MS_PRIVATE)  # the work dir's mounts stay in this namespace
    if config["fresh_root"]:
        fresh_root(config["fresh_root"], config["view"])
        read_only_world()
    for name in config["preload"]:
        __import__(name)
    # The first compile in a process costs three times the next ones (the parser's memory is not set up yet); done
    # here, every execution inherits a warm parser: ~1.4 ms less CPU each. Compiled only, never run.
    compile(WARM_UP, "warm-up", "exec")
    gc.freeze()  # executions never scan (and so never copy) the worker's objects
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # so that, as pid 1, we ignore it from the code like any other
    source, path = serve(control, config)
    run_main(source, path)  # config (no secrets in it) is not freed: freeing touches, and so copies, worker pages


def run_main(source, path):
    """Run the code as `python main.py` would, in a fresh __main__ module."""
    module = type(sys)("__main__")
    module.__file__, module.__builtins__ = path, __builtins__
    sys.modules["__main__"] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except SystemExit as exit_request:
        code = exit_request.code
        if code is None or isinstance(code, int):
            finish(code or 0)
        print(code, file=sys.stderr)
        finish(1)
    except BaseException:
        kind, value, traceback = sys.exc_info()
        value.__traceback__ = traceback.tb_next  # from main.py on, as `python main.py` would print it
        sys.excepthook(kind, value, value.__traceback__)
        finish(1)
    finish(0)


if __name__ == "__main__":  # as `python -c`; importing this file (as packaging tools may) runs nothing
    main()
