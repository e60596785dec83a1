"""The sandbox: basic execution on every level, and attacks that must be contained on every isolating level."""

import ctypes
import glob
import os
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from paths import REPO

from rewards import sandbox
from rewards.code import score_assert_tests, score_io_tests
from rewards.sandbox import Limits, Pool, SandboxUnavailable, available_levels, choose_level, run_python

LEVELS = available_levels()
ISOLATING = [level for level in LEVELS if level != "rlimits"]
LIMITS = Limits(cpu_seconds=1, wall_seconds=2, memory_mb=256, output_bytes=100_000)
MARGIN = 1.5  # seconds allowed past the wall limit for starting and tearing down a sandbox


def _level(level: str):
    """Every level is a test case: one that does not work here is a visible skip naming why, which CI's skip policy
    accepts for bwrap only (see .ci/skips), never a case that silently disappears."""
    why = sandbox._probe(level)
    return pytest.param(level, marks=pytest.mark.skipif(
        why is not None, reason=f"sandbox level {level} does not work on this machine: {why}"))


every_level = pytest.mark.parametrize("level", [_level(level) for level in sandbox.LEVELS])
isolating_levels = pytest.mark.parametrize("level", [_level(level) for level in sandbox.LEVELS if level != "rlimits"])

def run(source: str, level: str, stdin: str = "", limits: Limits = LIMITS):
    return run_python(source, stdin=stdin, limits=limits, level=level)


# ----------------------------------------------------------------------------------------------------------------
# Basics


@every_level
def test_runs_code_with_stdin(level):
    execution = run("name = input()\nprint(f'hello {name[::-1]}')\n", level, stdin="dlrow\n")
    assert (execution.status, execution.returncode, execution.stdout) == ("ok", 0, "hello world\n")


@every_level
def test_the_whole_standard_library_is_importable(level):
    modules = ["fractions", "decimal", "statistics", "textwrap", "datetime", "unittest", "dataclasses", "sqlite3"]
    execution = run(f"import importlib\nfor name in {modules!r}:\n    importlib.import_module(name)\nprint('ok')\n", level)
    assert (execution.status, execution.stdout) == ("ok", "ok\n"), execution.stderr


@every_level
def test_failures_are_errors_with_their_exit_code(level):
    raised = run("raise ValueError('boom')\n", level)
    assert (raised.status, raised.returncode) == ("error", 1)
    assert "ValueError: boom" in raised.stderr
    exited = run("raise SystemExit(3)\n", level)
    assert (exited.status, exited.returncode) == ("error", 3)
    crashed = run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", level)
    assert (crashed.status, crashed.returncode) == ("error", -11)


@every_level
def test_large_stdin_read_or_ignored(level):
    data = "ab\n" * 500_000
    assert run("import sys\nprint(len(sys.stdin.read()))\n", level, stdin=data).stdout == "1500000\n"
    ignored = run("print('done')\n", level, stdin=data)
    assert (ignored.status, ignored.stdout) == ("ok", "done\n")


@every_level
def test_undecodable_output_is_replaced(level):
    execution = run("import sys\nsys.stdout.buffer.write(b'a\\xffb')\n", level)
    assert execution.stdout == "a\ufffdb"


@isolating_levels
def test_environment_is_minimal_and_work_dir_is_removed(level):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "smolalign-sandbox-*")))
    execution = run("import os\nopen('scratch.txt', 'w').write('x')\nprint(sorted(os.environ))\n", level)
    assert execution.status == "ok"
    assert set(eval(execution.stdout)) <= {"PATH", "HOME", "TMPDIR", "LANG", "PWD"}
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "smolalign-sandbox-*"))) <= before


def test_auto_never_chooses_rlimits():
    if ISOLATING:
        assert choose_level() == ISOLATING[0]
    else:
        with pytest.raises(SandboxUnavailable):
            choose_level()
    with pytest.raises(ValueError):
        choose_level("docker")


def test_unavailable_sandbox_names_what_was_tried(monkeypatch):
    monkeypatch.setattr(sandbox, "_probe_results", {"bwrap": "bwrap not found", "unshare": "EPERM"})
    with pytest.raises(SandboxUnavailable, match="bwrap: bwrap not found; unshare: EPERM"):
        choose_level("auto")


@isolating_levels
def test_a_sandbox_that_fails_to_start_is_a_sandbox_error(level, monkeypatch):
    monkeypatch.setattr(sandbox, "_interpreter", lambda: "/nonexistent/python3")
    execution = run("print(1)\n", level)
    assert execution.status == "sandbox_error"


def test_bwrap_failing_before_the_code_is_a_sandbox_error(monkeypatch):
    if "bwrap" not in LEVELS:
        pytest.skip(f"sandbox level bwrap does not work on this machine: {sandbox._probe('bwrap')}")
    prefix = sandbox._bwrap_prefix
    monkeypatch.setattr(sandbox, "_bwrap_prefix", lambda *args: prefix(*args) + ["--no-such-option"])
    execution = run("print(1)\n", "bwrap")
    assert execution.status == "sandbox_error"
    assert "bwrap:" in execution.stderr


@every_level
def test_code_cannot_pass_itself_off_as_a_sandbox_failure_or_a_success(level):
    # Mimic bwrap's failure message, and try to write forged reports to every fd the bootstrap could have used.
    source = (
        "import os, sys\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.write(fd, b'SE0\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "sys.stderr.write('bwrap: execvp python3: No such file or directory\\n')\n"
        "os._exit(1)\n"
    )
    execution = run(source, level)
    assert (execution.status, execution.returncode) == ("error", 1)


@isolating_levels
def test_pool_runs_jobs_in_parallel_and_in_order(level):
    jobs = [(f"import time\ntime.sleep(0.4)\nprint({i} * int(input()))\n", "10\n") for i in range(6)]
    with Pool(workers=6, limits=LIMITS, level=level) as pool:
        start = time.monotonic()
        executions = pool.run_many(jobs)
        elapsed = time.monotonic() - start
    assert [e.stdout for e in executions] == [f"{i * 10}\n" for i in range(6)]
    assert elapsed < 6 * 0.4


# Every 50 ms a hanging program prints the time, so its last line says when it was still running.
HANGS = {
    "busy": "import time\nlast = 0\nwhile True:\n    if time.time() - last > 0.05:\n"
            "        last = time.time()\n        print(last, flush=True)\n",
    "sleeps": "import time\nwhile True:\n    print(time.time(), flush=True)\n    time.sleep(0.05)\n",
}
CLOCK = "import time\nprint(time.time())\n"


@isolating_levels
@pytest.mark.parametrize("hang", HANGS)
def test_hanging_executions_do_not_stall_the_pool(level, hang):
    # As many hanging programs as cores, then short ones: with the default pool, the short ones all run, and end,
    # while every hanging one is still running (their own clocks say so), and no worker outlives the pool.
    cores = len(os.sched_getaffinity(0))
    limits = Limits(cpu_seconds=3, wall_seconds=3, memory_mb=256, output_bytes=100_000)
    with Pool(limits=limits, level=level) as pool:
        pool.run_many([(CLOCK, "")] * pool.workers)  # every worker started
        workers = [worker.proc.pid for worker in pool._all]
        executions = pool.run_many([(HANGS[hang], "")] * cores + [(CLOCK, "")] * 40)
    hangs, shorts = executions[:cores], executions[cores:]
    assert [h.status for h in hangs] == ["timeout"] * cores
    assert [s.status for s in shorts] == ["ok"] * 40
    alive = [[float(line) for line in h.stdout.split()] for h in hangs]
    assert max(times[0] for times in alive) < min(times[-1] for times in alive)  # the hangs ran at the same time
    assert max(float(s.stdout) for s in shorts) < min(times[-1] for times in alive)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in workers)


@isolating_levels
def test_a_slow_program_sharing_its_core_ends_within_the_default_limits(level):
    # The default pool puts up to two executions on a core, so the default wall limit leaves more than twice the CPU
    # limit. Here a single-threaded program that needs half its CPU limit shares the default pool with a busy loop on
    # every other worker, under the default wall/CPU ratio: it finishes (it would need under a quarter of a core).
    defaults = Limits()
    assert defaults.wall_seconds > sandbox.WORKERS_PER_CORE * defaults.cpu_seconds
    limits = Limits(cpu_seconds=1, wall_seconds=defaults.wall_seconds / defaults.cpu_seconds, memory_mb=256)
    slow = "import time\nwhile time.process_time() < 0.5:\n    pass\nprint(round(time.process_time(), 1))\n"
    with Pool(limits=limits, level=level) as pool:
        executions = pool.run_many([("while True:\n    pass\n", "")] * (pool.workers - 1) + [(slow, "")])
    assert [e.status for e in executions[:-1]] == ["timeout"] * (pool.workers - 1)
    assert (executions[-1].status, executions[-1].stdout) == ("ok", "0.5\n")


@isolating_levels
def test_parent_keeps_its_fds_cwd_and_environment(level):
    fds, cwd, env = sorted(os.listdir("/proc/self/fd")), os.getcwd(), dict(os.environ)
    for source in ("import os\nos.chdir('/')\nos.environ['X'] = '1'\n", "import os\nos.close(0)\nos.close(1)\n"):
        run(source, level)
    assert (sorted(os.listdir("/proc/self/fd")), os.getcwd(), dict(os.environ)) == (fds, cwd, env)


# ----------------------------------------------------------------------------------------------------------------
# Attacks: each must be contained, score nothing and leave this process unharmed


@isolating_levels
def test_no_network_to_the_host(level):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    abstract = f"\0smolalign-test-{uuid.uuid4().hex}"
    unix_server = socket.socket(socket.AF_UNIX)
    unix_server.bind(abstract)
    unix_server.listen()
    accepted = []

    def serve(listener):
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except (TimeoutError, OSError):
                pass

    stop = threading.Event()
    threads = [threading.Thread(target=serve, args=(s,)) for s in (server, unix_server)]
    for thread in threads:
        thread.start()
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()  # control: the server works
        time.sleep(0.2)
        assert len(accepted) == 1
        accepted.clear()
        source = (
            "import socket\n"
            f"for family, address in [(socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {abstract!r})]:\n"
            "    try:\n"
            "        s = socket.socket(family)\n"
            "        s.settimeout(1)\n"
            "        s.connect(address)\n"
            "        print('CONNECTED', family)\n"
            "    except OSError as e:\n"
            "        print('FAILED', family, e)\n"
        )
        execution = run(source, level)
        time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        server.close()
        unix_server.close()
    assert execution.status == "ok"
    assert "CONNECTED" not in execution.stdout and execution.stdout.count("FAILED") == 2
    assert accepted == []


@isolating_levels
def test_cannot_write_outside_its_directory(level, tmp_path):
    existing = tmp_path / "existing.txt"
    existing.write_text("original")
    targets = [str(tmp_path / "new.txt"), str(existing), f"/tmp/smolalign-escape-{uuid.uuid4().hex}"]
    source = (
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('pwned')\n"
        "        print('WROTE', path)\n"
        "    except OSError as e:\n"
        "        print('BLOCKED', path, type(e).__name__)\n"
        "open('inside.txt', 'w').write('fine')\n"
        "print('INSIDE OK')\n"
    )
    execution = run(source, level)
    assert execution.status == "ok" and "INSIDE OK" in execution.stdout
    assert "WROTE" not in execution.stdout
    assert not os.path.exists(targets[0]) and not os.path.exists(targets[2])
    assert existing.read_text() == "original"


@isolating_levels
def test_cannot_read_the_parents_environment(level, monkeypatch):
    secret = f"smolalign-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("SMOLALIGN_SECRET", secret)
    # /proc/<pid>/environ only shows a process's initial environment: a helper started with the secret has it there.
    helper = subprocess.Popen(["sleep", "30"], env={"SMOLALIGN_SECRET": secret})
    try:
        assert _wait_for(lambda: secret in _read(f"/proc/{helper.pid}/environ"))  # control: it is there to steal
        source = (
            "import os\n"
            "print(dict(os.environ))\n"
            f"for pid in {[os.getpid(), helper.pid]!r} + [p for p in os.listdir('/proc') if p.isdigit()]:\n"
            "    try:\n"
            "        print(pid, open(f'/proc/{pid}/environ').read())\n"
            "    except OSError as e:\n"
            "        print(pid, 'unreadable', e)\n"
        )
        execution = run(source, level)
    finally:
        helper.kill()
        helper.wait()
    assert execution.status == "ok"
    assert secret not in execution.stdout and secret not in execution.stderr


@isolating_levels
def test_fork_bomb_is_contained_and_leaves_nothing_behind(level):
    name = f"bomb{uuid.uuid4().hex[:10]}"  # the process name (comm, 15 bytes) every fork inherits
    source = (
        "import ctypes, os\n"
        f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    start = time.monotonic()
    execution = run(source, level)
    assert time.monotonic() - start < LIMITS.wall_seconds + MARGIN
    assert execution.status in ("timeout", "error")
    time.sleep(0.5)
    assert _processes_named(name) == []
    assert subprocess.run(["true"]).returncode == 0


@isolating_levels
@pytest.mark.parametrize("ending", ["print('parent done')\n", "import time\ntime.sleep(60)\n"], ids=["exits", "killed"])
def test_daemonized_children_do_not_survive(level, ending):
    name = f"daemon{uuid.uuid4().hex[:9]}"
    source = (
        "import ctypes, os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
    ) + ending
    execution = run(source, level)
    assert execution.status == ("ok" if ending.startswith("print") else "timeout")
    assert _wait_for(lambda: not _processes_named(name), seconds=1.0)


@isolating_levels
def test_process_limit_counts_only_this_sandbox(level):
    source = (
        "import os, time\n"
        "started = 0\n"
        "for _ in range(20):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(5)\n"
        "            os._exit(0)\n"
        "        started += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print(started)\n"
    )
    limits = Limits(cpu_seconds=1, wall_seconds=2, processes=8)
    with Pool(workers=3, limits=limits, level=level) as pool:
        counts = [int(e.stdout) for e in pool.run_many([(source, "")] * 3)]
    # 8 tasks per sandbox: the program and its children. Every one of three concurrent sandboxes gets its own budget.
    assert all(5 <= count <= 7 for count in counts), counts


@isolating_levels
def test_memory_bomb_fails_fast(level):
    execution = run("x = bytearray(10 * 1024**3)\nprint('ALLOCATED')\n", level)
    assert execution.status == "error"
    assert "MemoryError" in execution.stderr and "ALLOCATED" not in execution.stdout
    assert execution.seconds < 2


@isolating_levels
@pytest.mark.parametrize("source", ["while True:\n    pass\n", "import time\nwhile True:\n    time.sleep(1)\n"],
                         ids=["busy", "sleeping"])
def test_infinite_loop_times_out(level, source):
    start = time.monotonic()
    execution = run(source, level)
    assert execution.status == "timeout"
    assert time.monotonic() - start < LIMITS.wall_seconds + MARGIN


@isolating_levels
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_is_cut_off(level, stream):
    execution = run(f"import sys\nwhile True:\n    sys.{stream}.write('x' * 10000 + '\\n')\n", level)
    assert execution.status == "output_limit"
    assert len(execution.stdout) + len(execution.stderr) <= LIMITS.output_bytes + 1


@isolating_levels
@pytest.mark.parametrize("early_exit", [
    "import sys\nsys.exit(0)\n",
    "import os\nos._exit(0)\n",
    "raise SystemExit\n",
    "import atexit, os\natexit.register(lambda: os._exit(0))\n",
    "print('OK')\nprint('PASSED')\nimport os\nos._exit(0)\n",
])
def test_exiting_before_the_asserts_scores_zero(level, early_exit):
    wrong = early_exit + "def add(a, b):\n    return a - b\n"
    right = "def add(a, b):\n    return a + b\n"
    asserts = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]
    with Pool(workers=2, limits=LIMITS, level=level) as pool:
        assert score_assert_tests(right, asserts, pool) == 1.0  # control
        assert score_assert_tests(wrong, asserts, pool) == 0.0


@isolating_levels
def test_tampering_with_test_files_does_not_help(level, tmp_path):
    decoy = tmp_path / "expected_output.txt"
    decoy.write_text("3\n")
    tamper = (
        "import glob, os\n"
        f"roots = [os.getcwd(), '/tmp', {str(tmp_path)!r}]\n"
        "for root in roots:\n"
        "    for directory, _, files in os.walk(root):\n"
        "        for name in files:\n"
        "            try:\n"
        "                open(os.path.join(directory, name), 'w').write('WRONG\\n')\n"
        "            except OSError:\n"
        "                pass\n"
        "for name in ['expected_output.txt', 'output.txt', 'answer.txt', 'tests.json']:\n"
        "    open(name, 'w').write('WRONG\\n')\n"
        "    for root in roots[1:]:\n"
        "        try:\n"
        "            open(os.path.join(root, name), 'w').write('WRONG\\n')\n"
        "        except OSError:\n"
        "            pass\n"
    )
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]
    with Pool(workers=2, limits=LIMITS, level=level) as pool:
        assert score_io_tests("print(sum(map(int, input().split())))\n", tests, pool) == 1.0  # control
        assert score_io_tests(tamper + "print('WRONG')\n", tests, pool) == 0.0
        # A right answer written to files instead of stdout is not an answer.
        assert score_io_tests(tamper.replace("WRONG", "3") + "\n", tests, pool) == 0.0
    assert decoy.read_text() == "3\n"


def _processes_named(name: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == name:
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# ----------------------------------------------------------------------------------------------------------------
# Worker reuse: an execution is a fork of a long-lived worker. Nothing of one execution may reach the next one, and no
# attack may slow down, break or replace the worker.


NORMAL = ("import sys\nnumbers = [int(x) for x in sys.stdin.read().split()]\nprint(sum(numbers))\n", "1 2 3 4\n", "10\n")
FAST = 0.5  # seconds: a normal execution on a warm worker takes a few milliseconds
ATTACKS = {
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory": "x = bytearray(10 * 1024**3)\n",
    "memory_slowly": "chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))\n",
    "output_flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 10000)\n",
    "closes_stdio": "import os, time\nfor fd in (0, 1, 2):\n    os.close(fd)\ntime.sleep(0.2)\n",
    "closes_stdio_and_hangs": "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n",
    "kills_the_worker": (
        "import os, signal\n"
        "for target in [os.getppid(), 1, -1] + list(range(2, 300)):\n"
        "    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):\n"
        "        try:\n"
        "            os.kill(target, sig)\n"
        "        except OSError:\n"
        "            pass\n"
        "print('still here')\n"
    ),
    "busy_loop": "while True:\n    pass\n",
    "sleeps": "import time\ntime.sleep(60)\n",
    "daemon": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
               "        time.sleep(60)\n    os._exit(0)\n"),
    "crash": "import ctypes\nctypes.string_at(0)\n",
    "environment": "import os, sys\nos.environ['PATH'] = '/nowhere'\nsys.modules['json'] = None\nimport builtins\n"
                   "builtins.print = None\nbuiltins.int = None\n",
    "files": "import os\nos.mkdir('sub')\nopen('sub/data', 'w').write('x' * 1000)\nos.chmod('sub', 0)\n",
}


@isolating_levels
def test_every_attack_leaves_the_worker_correct_and_fast(level):
    limits = Limits(cpu_seconds=1, wall_seconds=1.5, memory_mb=256, output_bytes=100_000, processes=16)
    with Pool(workers=1, limits=limits, level=level) as pool:
        worker = pool._all[0]
        pool.run_many([NORMAL[:2]])
        pid = worker.proc.pid
        time.sleep(0.2)  # the last supervisor closes its report just before it exits
        processes = _live_descendants(pid)  # the worker (and under bwrap, bwrap's own pid 1)
        for name, source in ATTACKS.items():
            attack = pool.run_many([(source, "secret stdin\n")])[0]
            assert attack.status != "sandbox_error", (name, attack)
            assert attack.seconds < limits.wall_seconds + MARGIN, name
            normal = pool.run_many([NORMAL[:2]])[0]
            assert (normal.status, normal.stdout) == ("ok", NORMAL[2]), (name, normal)
            assert normal.seconds < FAST, (name, normal.seconds)
            assert worker.proc.pid == pid, f"{name} replaced the worker"
            assert _wait_for(lambda: _live_descendants(pid) == processes, seconds=1.0), name


@isolating_levels
def test_no_view_of_earlier_executions(level):
    # The first execution leaves a secret in its files, its memory, its stdin and its output; the second one, forked
    # from the same worker, looks for it in its own whole address space, every visible process and every place the
    # first could write to (its work dir, which is at the same path, and the usual scratch places).
    secret = uuid.uuid4().hex
    head, tail = secret[:16], secret[16:]
    first = (
        f"import os\nkept = {secret!r} * 3\nopen('left.txt', 'w').write(kept)\nos.mkdir('d')\n"
        f"open('d/x', 'w').write(kept)\nprint(input(), kept)\n"
    )
    # Search for head immediately followed by tail without ever building the secret in this process.
    second = (
        "import ctypes, os\n"
        f"head, tail = {head!r}.encode(), {tail[::-1]!r}[::-1].encode()\n"
        "found = []\n"
        "def scan(data, where):\n"
        "    start = data.find(head)\n"
        "    while start != -1:\n"
        "        if data[start + len(head):start + len(head) + len(tail)] == tail:\n"
        "            found.append(where)\n"
        "        start = data.find(head, start + 1)\n"
        "for line in open('/proc/self/maps'):\n"
        "    fields = line.split()\n"
        "    low, high = (int(x, 16) for x in fields[0].split('-'))\n"
        "    if fields[1].startswith('r') and not line.rstrip().endswith(('[vvar]', '[vsyscall]', '[vvar_vclock]')):\n"
        "        scan(ctypes.string_at(low, high - low), line)\n"
        f"places = {{os.getcwd(), '/tmp', '/var/tmp', '/dev/shm', {tempfile.gettempdir()!r}}}\n"
        "for root, dirs, files in (entry for place in places for entry in os.walk(place)):\n"
        "    for name in files:\n"
        "        try:\n"
        "            with open(os.path.join(root, name), 'rb') as f:\n"
        "                scan(f.read(1_000_000), os.path.join(root, name))\n"
        "        except OSError:\n"
        "            pass\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    for part in ('cmdline', 'environ'):\n"
        "        try:\n"
        "            scan(open(f'/proc/{pid}/{part}', 'rb').read(), pid)\n"
        "        except OSError:\n"
        "            pass\n"
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "print((sorted(os.listdir('.')), pids == sorted({1, os.getpid()}), found))\n"
    )
    limits = Limits(cpu_seconds=5, wall_seconds=8, memory_mb=1024)
    with Pool(workers=1, limits=limits, level=level) as pool:
        leaked = pool.run_many([(first, secret + "\n")])[0]
        assert leaked.stdout.count(secret) == 4  # control: it was there
        looked = pool.run_many([(second, "")])[0]
    assert looked.status == "ok", looked
    files, only_worker_and_itself, found = eval(looked.stdout)
    assert files == ["main.py"]
    assert only_worker_and_itself  # the worker is pid 1

    assert found == []


@isolating_levels
def test_the_hosts_files_are_invisible(level):
    # Canaries where a user keeps things: the host's temp directory, the project checkout and the home directory.
    # The code looks for each by its path and by its name anywhere it can walk (all but /proc); bwrap and unshare
    # must both show it only the read-only system view, so it finds none of them.
    tag = f"smolalign-canary-{uuid.uuid4().hex}"
    places = [Path(tempfile.gettempdir()), REPO, Path.home()]
    canaries = [place / f"{tag}-{i}.txt" for i, place in enumerate(places)]
    for canary in canaries:
        canary.write_text("expected output: 42\n")
        canary.chmod(0o644)
    source = (
        "import os\n"
        f"paths, tag = {[str(c) for c in canaries]!r}, {tag!r}\n"
        "opened = [p for p in paths if os.path.exists(p)]\n"
        "named = [os.path.join(root, name) for root, dirs, files in os.walk('/')\n"
        "         if not root.startswith(('/proc', '/sys')) for name in dirs + files if tag in name]\n"
        "print((opened, named, sorted(os.listdir('/tmp')), os.path.exists(os.getcwd() + '/main.py')))\n"
    )
    try:
        execution = run(source, level, limits=Limits(cpu_seconds=10, wall_seconds=20, memory_mb=512))
    finally:
        for canary in canaries:
            canary.unlink()
    assert execution.status == "ok", execution
    opened, named, in_tmp, own_dir = eval(execution.stdout)
    assert own_dir  # control: it ran in its own work directory and could see its own file
    assert (opened, named, in_tmp) == ([], [], [])


FILL_AND_TAMPER = """\
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
before = open('/proc/self/mountinfo').read()
os.mkdir('d')
with open('d/big', 'wb') as f:
    f.write(b'x' * 40_000_000)
held = os.open('d/big', os.O_RDONLY)
os.chmod('d', 0)
here = os.getcwd().encode()
tries = []
for call in (lambda: libc.umount2(here, 2),  # MNT_DETACH
             lambda: libc.mount(None, here, None, 32 | 1, None),  # MS_REMOUNT | MS_RDONLY
             lambda: libc.mount(b'tmpfs', b'/usr', b'tmpfs', 0, None),
             lambda: libc.mount(b'tmpfs', here, b'tmpfs', 0, None)):
    tries.append((call(), ctypes.get_errno()))
if os.fork() == 0:  # a daemon with its cwd and an open file in the work dir, keeping it busy
    os.setsid()
    time.sleep(60)
print(repr((before, tries)))
"""
LOOK_AT_WORK_DIR = """\
import os
st, files = os.statvfs('.'), sorted(os.listdir('.'))
with open('big', 'wb') as f:
    f.write(b'y' * 45_000_000)
print(repr((open('/proc/self/mountinfo').read(), files, st.f_bavail * st.f_frsize, st.f_favail)))
"""


def _mounts(mountinfo: str) -> list[tuple[str, ...]]:
    """Mount point, options and file system of every mount (not the ids, which a new tmpfs changes)."""
    rows = [line.split(" - ") for line in mountinfo.splitlines()]
    return [(head.split()[4], head.split()[5], tail.split()[0]) for head, tail in rows]


@isolating_levels
def test_each_execution_gets_a_fresh_work_directory(level):
    # Executions share the worker's mount namespace; their work dir is a new tmpfs each time. The first one fills its
    # dir, hides a directory, tries to unmount, remount or cover it, and leaves a daemon holding it busy: the next one
    # on the same worker gets an empty dir of full size in an unchanged namespace.
    limits = Limits(cpu_seconds=2, wall_seconds=3, memory_mb=512, file_bytes=50_000_000, dir_bytes=50_000_000)
    with Pool(workers=1, limits=limits, level=level) as pool:
        pool.run_many([NORMAL[:2]])
        pid = pool._all[0].proc.pid
        first = pool.run_many([(FILL_AND_TAMPER, "")])[0]
        second = pool.run_many([(LOOK_AT_WORK_DIR, "")])[0]
        assert pool._all[0].proc.pid == pid  # the same worker
    assert first.status == "ok", first
    assert second.status == "ok", second
    before, tries = eval(first.stdout)
    mountinfo, files, free_bytes, free_inodes = eval(second.stdout)
    assert tries == [(-1, 1)] * 4  # EPERM: the code has no capability to change any mount
    assert _mounts(mountinfo) == _mounts(before)
    assert files == ["main.py"]
    assert free_bytes > 49_000_000
    assert free_inodes > 4_000


@isolating_levels
def test_concurrent_executions_do_not_see_each_other(level):
    name = f"marker-{uuid.uuid4().hex}"
    sleeper = f"import time\nopen({name!r}, 'w').write('x')\ntime.sleep(1.0)\nprint('slept')\n"
    looker = (
        "import os, time\n"
        "time.sleep(0.4)\n"
        f"places = {{os.getcwd(), '/tmp', '/var/tmp', '/dev/shm', {tempfile.gettempdir()!r}}}\n"
        "hits = [os.path.join(r, f) for place in places for r, d, fs in os.walk(place) for f in fs\n"
        f"        if f == {name!r}]\n"
        "print((hits, sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == sorted({1, os.getpid()})))\n"
    )
    with Pool(workers=2, limits=LIMITS, level=level) as pool:
        slept, looked = pool.run_many([(sleeper, ""), (looker, "")])
    assert slept.stdout == "slept\n"
    assert eval(looked.stdout) == ([], True)


@isolating_levels
def test_a_dead_worker_is_replaced(level):
    with Pool(workers=1, limits=LIMITS, level=level) as pool:
        assert pool.run_many([NORMAL[:2]])[0].stdout == NORMAL[2]
        os.killpg(pool._all[0].proc.pid, 9)
        pool._all[0].proc.wait()
        again = pool.run_many([NORMAL[:2]] * 3)
    assert [e.stdout for e in again] == [NORMAL[2]] * 3


@isolating_levels
def test_nothing_outlives_the_pool(level):
    name = f"linger{uuid.uuid4().hex[:9]}"
    source = (
        "import ctypes, os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
        "    time.sleep(60)\n"
        "time.sleep(60)\n"
    )
    pool = Pool(workers=2, limits=Limits(wall_seconds=30), level=level)
    pids = []
    thread = threading.Thread(target=lambda: pool.run_many([(source, "")] * 2))
    thread.start()
    assert _wait_for(lambda: len(_processes_named(name)) == 2)
    pids = [worker.proc.pid for worker in pool._all]
    pool._executor.shutdown(wait=False)  # as when the trainer ends while a batch is still running
    for worker in pool._all:
        worker.close()
    thread.join()
    # The kernel empties a pid namespace once its init is gone: allow it the moment that takes.
    assert _wait_for(lambda: _processes_named(name) == [], seconds=2.0)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def _live_descendants(pid: int) -> list[int]:
    """Every process below `pid` that has not exited (zombies waiting to be reaped do not count)."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for task in _listdir(f"/proc/{parent}/task"):
            for child in map(int, _read(f"/proc/{parent}/task/{task}/children").split()):
                if _read(f"/proc/{child}/stat").rpartition(")")[2].split()[:1] not in (["Z"], []):
                    found.append(child)
                frontier.append(child)
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


KEYS = '''\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.shmat.restype = ctypes.c_void_p
KEYRINGS = {"thread": -1, "process": -2, "session": -3, "user": -4, "user_session": -5}


def find_key(description):
    found = []
    for name, keyring in KEYRINGS.items():
        key = libc.syscall(250, 10, ctypes.c_long(keyring), b"user", description, 0)  # KEYCTL_SEARCH
        if key > 0:
            buffer = ctypes.create_string_buffer(64)
            size = libc.syscall(250, 11, ctypes.c_long(key), buffer, 64)  # KEYCTL_READ
            found.append((name, buffer.raw[:max(size, 0)].decode(errors="replace")))
    return found
'''


@isolating_levels
def test_no_kernel_objects_carry_over(level):
    # Keyrings, SysV shared memory and message queues outlive the processes that made them.
    if os.uname().machine != "x86_64":
        pytest.skip("the test calls keyctl by its x86_64 syscall number")
    secret = uuid.uuid4().hex
    leave = KEYS + (
        "for name, keyring in KEYRINGS.items():\n"
        f"    libc.syscall(248, b'user', b'smolalign-test', {secret.encode()!r}, 32, ctypes.c_long(keyring))\n"
        "memory = libc.shmget(4242, 4096, 0o1666)\n"
        f"ctypes.memmove(libc.shmat(memory, None, 0), {secret.encode()!r}, 32)\n"
        "queue = libc.msgget(4243, 0o1666)\n"
        f"message = ctypes.create_string_buffer(ctypes.c_long(1).value.to_bytes(8, 'little') + {secret.encode()!r})\n"
        "libc.msgsnd(queue, message, 32, 0)\n"
        "print(sorted(dict(find_key(b'smolalign-test'))), memory >= 0, queue >= 0)\n"
    )
    look = KEYS + (
        "print((find_key(b'smolalign-test'), find_key(b'smolalign-host'), libc.shmget(4242, 0, 0), "
        "libc.msgget(4243, 0)))\n"
    )
    # And a key in this process's session keyring, which whatever it starts would possess.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    host_key = libc.syscall(248, b"user", b"smolalign-host", b"host secret", 11, ctypes.c_long(-3))
    assert host_key > 0
    try:
        with Pool(workers=1, limits=LIMITS, level=level) as pool:
            left = pool.run_many([(leave, "")])[0]
            looked = pool.run_many([(look, "")])[0]
    finally:
        libc.syscall(250, 3, ctypes.c_long(host_key))  # KEYCTL_REVOKE
    # Control: the first execution could make every one of them.
    assert left.stdout == "['process', 'session', 'thread', 'user', 'user_session'] True True\n", left
    assert eval(looked.stdout) == ([], [], -1, -1)
