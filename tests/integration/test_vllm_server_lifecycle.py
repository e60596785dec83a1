"""The vLLM server smolalign starts for `generation.backend: vllm_server`, exercised on the CPU against a stand-in for
vLLM's OpenAI server (tests/standins/vllm_server, first on the server's PYTHONPATH: smolalign's own command line
starts it) that takes the same options and answers the same HTTP endpoints, for what the real server cannot be made
to do on demand (tests/integration/test_vllm_server.py runs the real one): the
GPU partition (what each process's CUDA_VISIBLE_DEVICES becomes), the command line TRL 1.16 builds plus the model's
revision / dtype / trust_remote_code / max model length, the wait for /health, a slow start, a server that never
becomes healthy, one that crashes or dies mid-run, a stalled run, and the stop at the end whatever happens."""

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from recipe_runs import run_of

from smolalign.errors import RunFailure, SmolalignError
from smolalign.generation import server as lifecycle
from smolalign.generation import server_process
from smolalign.generation.server import healthy, served_generation
from smolalign.generation.server_command import SERVER_MODULE
from smolalign.gpu_partition import SERVER_GPUS, GpuPartition, partition, partition_for_children
from smolalign.ports import free_port
from smolalign.runs.watchdog import stall_watchdog
from smolalign.target import Target
from tests.processes import assert_gone, group_members
from tests.tiny_models import write_jsonl

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "vllm_server"
MAIN = SimpleNamespace(is_main_process=True)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """The stand-in server first on the server's PYTHONPATH, its log (a temporary file until a run directory takes
    it) in the test's folder; returns the file it records its argv, environment and stop into."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # and in the runs a test starts as processes of their own
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(STANDIN), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv(SERVER_GPUS, raising=False)
    record = tmp_path / "vllm-record.jsonl"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    return record


def recorded(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


@pytest.fixture
def recipe_for(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("smolalign.target.installed", lambda module: True)
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "1+1?", "solution": "2"}])

    def make(behaviour="ok", model=None, train=None, **server):
        monkeypatch.setenv("STANDIN_BEHAVIOUR", behaviour)
        raw = {"model": {"source": str(tiny_dir), **(model or {})}, "data": {"sources": [{"path": str(prompts)}]},
               "rewards": [{"name": "math_accuracy"}], "train": train or {},
               "generation": {"backend": "vllm_server", "server": {"port": free_port(), "startup_timeout": 20,
                                                                   **server}}}
        return run_of(raw, "rl", "test", target=Target(8, "an 8-GPU node"))

    return make


def test_partition_gives_the_server_its_gpus_and_training_the_others():
    server = SimpleNamespace(gpus=[], tensor_parallel=1)
    assert partition(["0", "1", "2", "3"], server, 1) == GpuPartition(("3",), ("0", "1", "2"))
    assert partition(["0", "1", "2", "3"], SimpleNamespace(gpus=[], tensor_parallel=2), 2) == \
        GpuPartition(("2", "3"), ("0", "1"))
    # server.gpus index the visible devices; under CUDA_VISIBLE_DEVICES=4,5,6 GPU 0 is device 4
    assert partition(["4", "5", "6"], SimpleNamespace(gpus=[0], tensor_parallel=1), 2) == \
        GpuPartition(("4",), ("5", "6"))
    with pytest.raises(SmolalignError, match="cannot hold the server"):
        partition(["0"], server, 1)
    with pytest.raises(SmolalignError, match=r"generation.server.gpus \[5\]"):
        partition(["0", "1"], SimpleNamespace(gpus=[5], tensor_parallel=1), 1)


def test_the_started_server_gets_its_gpus_and_the_model_settings_and_training_keeps_the_others(
        standin, recipe_for, monkeypatch):
    from smolalign.models.sources import ModelSource

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    recipe = recipe_for("slow:1.5", model={"trust_remote_code": True}, train={"vllm_max_model_length": 1536})
    # a hub model at a revision (served by its id, which the stand-in does not download)
    hub = ModelSource("hub", "HuggingFaceTB/SmolLM3-3B", revision="v2")
    recipe = dataclasses.replace(recipe, sources={**recipe.sources, "model": hub})
    gpus = partition_for_children(recipe.recipe.generation, 1)
    # what the training process is started with (before CUDA starts in it); this process's own is left as it is
    assert gpus.training_env() == {"CUDA_VISIBLE_DEVICES": "0,1,2", SERVER_GPUS: "3"}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and SERVER_GPUS not in os.environ
    with served_generation(recipe, MAIN, "bfloat16", gpus) as server:
        assert healthy(server.base_url) and server.alive()
        [started] = recorded(standin)
        with urllib.request.urlopen(f"{server.base_url}/v1/models") as response:
            [listed] = json.load(response)["data"]
        assert listed["root"] == "HuggingFaceTB/SmolLM3-3B" and listed["id"].startswith("smolalign-")
        if shutil.which("curl"):  # the Slurm script's probe passes a healthy server
            assert subprocess.run(["bash", "-c", probe_script(server.base_url + "/health")]).returncode == 0
    argv, env = started["argv"], started["env"]
    assert env == {"CUDA_VISIBLE_DEVICES": "3", "VLLM_SERVER_DEV_MODE": "1"}

    def option(name):
        return argv[argv.index(name) + 1]

    assert argv[:2] == ["--model", "HuggingFaceTB/SmolLM3-3B"] and option("--served-model-name") == listed["id"]
    assert option("--revision") == "v2" and option("--dtype") == "bfloat16" and option("--max-model-len") == "1536"
    assert "--trust-remote-code" in argv and option("--port") == str(recipe.recipe.generation.server.port)
    assert json.loads(option("--weight-transfer-config")) == {"backend": "nccl"}  # TRL's weight sync
    assert option("--logprobs-mode") == "processed_logprobs"
    assert recorded(standin)[-1] == {"stopped": True}  # stopped at the end
    assert not healthy(server.base_url, timeout=1)


def test_server_gpus_named_in_the_recipe(standin, recipe_for, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    recipe = recipe_for(gpus=[1])
    gpus = partition_for_children(recipe.recipe.generation, 1)
    assert gpus.training_env()["CUDA_VISIBLE_DEVICES"] == "0,2,3"
    with served_generation(recipe, MAIN, "float32", gpus):
        assert recorded(standin)[0]["env"]["CUDA_VISIBLE_DEVICES"] == "1"


def test_a_server_that_never_becomes_healthy_is_stopped_and_named(standin, recipe_for):
    recipe = recipe_for("never", startup_timeout=3)
    started = time.monotonic()
    with pytest.raises(SmolalignError, match=r"did not answer /health within 3 s \(generation.server.startup_timeout"):
        with served_generation(recipe, MAIN, "float32"):
            pass
    assert time.monotonic() - started < 15
    assert recorded(standin)[-1] == {"stopped": True}


def test_a_server_that_crashes_at_start_is_reported_with_its_log(standin, recipe_for, tmp_path):
    """...and the log stays where the message names it: the run directory is not made for it."""
    with pytest.raises(SmolalignError, match="did not start") as info:
        with served_generation(recipe_for("crash"), MAIN, "float32", run_dir=tmp_path / "run"):
            pass
    assert "exit code 1" in str(info.value) and "no kernel image is available" in str(info.value)
    named = Path(re.search(r"last lines of (\S+):", str(info.value)).group(1))
    assert "no kernel image is available" in named.read_text() and not (tmp_path / "run").exists()
    named.unlink()


def test_the_servers_log_is_kept_in_the_run_directory_after_the_earlier_starts(standin, recipe_for, tmp_path):
    """A resumed run's directory holds the log of the start before: this start's is appended, its own file gone."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "vllm-server.log").write_text("the first start's lines\n")
    with served_generation(recipe_for(), MAIN, "float32", run_dir=run_dir) as server:
        temporary = server.log
        assert temporary.parent != run_dir
    kept = (run_dir / "vllm-server.log").read_text()
    assert kept.startswith("the first start's lines\n=== ") and "INFO: serving" in kept, kept
    assert not temporary.exists()


def test_a_server_that_dies_mid_run_fails_the_run(standin, recipe_for):
    """...and the engine core its process left behind is killed with the server's group (fails when a server whose
    own process has exited is taken as stopped)."""
    recipe = recipe_for("die:2")
    with pytest.raises(RunFailure, match="the vLLM server exited") as info:
        with served_generation(recipe, MAIN, "float32") as server, stall_watchdog(None, server):
            group = server.process.pid
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # training steps
                time.sleep(0.05)
    assert "EngineDeadError" in str(info.value)
    assert_gone(group, recipe.recipe.generation.server.port, wait=1.0)


def test_a_stalled_generation_fails_the_run_and_stops_the_server(standin, recipe_for):
    recipe = recipe_for("stall")
    with pytest.raises(RunFailure, match="no training step finished for 2 s"):
        with served_generation(recipe, MAIN, "float32") as server, stall_watchdog(2, server) as watchdog:
            watchdog.progress()
            request = urllib.request.Request(f"{server.base_url}/v1/completions", method="POST",
                                             data=json.dumps({"prompt": [[1, 2]], "max_tokens": 4}).encode())

            def generate():
                with contextlib.suppress(OSError):  # the server is stopped under it
                    urllib.request.urlopen(request, timeout=30)

            threading.Thread(target=generate, daemon=True).start()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # the step waits for its completions
                time.sleep(0.05)
    assert recorded(standin)[-1] == {"stopped": True}


def test_the_server_is_stopped_when_training_fails_and_killed_when_it_ignores_the_stop(standin, recipe_for,
                                                                                        monkeypatch):
    with pytest.raises(ValueError):
        with served_generation(recipe_for(), MAIN, "float32"):
            raise ValueError("a training error")
    assert recorded(standin)[-1] == {"stopped": True}
    monkeypatch.setattr(server_process, "STOP_GRACE", 1.0)
    recipe = recipe_for("ignore-term")
    with served_generation(recipe, MAIN, "float32") as server:
        process = server.process
    assert process.poll() == -signal.SIGKILL
    pid = recorded(standin)[-1]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def probe_script(url: str) -> str:
    """The Slurm script's wait-loop condition as a one-shot check of `url`."""
    from smolalign.slurm.server_node import VLLM_PROBE

    probe = VLLM_PROBE.replace("until ", "if ").replace("; do", "; then exit 0; else exit 1; fi")
    return probe.replace('"$VLLM_URL/health"', f'"{url}"')


def test_health_is_200_from_slash_health_only(standin, recipe_for):
    """A dead engine answers 503 and /health/ only redirects: neither counts, here or in the Slurm script's probe."""
    recipe = recipe_for("never")
    port = recipe.recipe.generation.server.port
    process = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--model", "m", "--host", "127.0.0.1",
                                "--port", str(port)], start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        assert not healthy(url)
        if shutil.which("curl"):
            for path in ("/health", "/health/"):  # the old probe's URL too: a redirect must not pass
                assert subprocess.run(["bash", "-c", probe_script(url + path)]).returncode == 1
    finally:
        process.terminate()
        process.wait()


def test_an_unreachable_server_named_in_the_recipe_is_refused(recipe_for):
    recipe = recipe_for(base_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(SmolalignError, match="no vLLM server answers /health there"):
        with served_generation(recipe, MAIN, "float32"):
            pass


def servers_named_smolalign_on(port: int) -> list[int]:
    """Live processes serving under a name smolalign gives (`smolalign-...`) on `port`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--served-model-name" in argv and str(port).encode() in argv:
            name = argv[argv.index(b"--served-model-name") + 1]
            if name.startswith(b"smolalign-"):
                found.append(int(entry.name))
    return found


def test_a_server_smolalign_did_not_start_is_not_taken_for_its_own(standin, recipe_for, monkeypatch):
    """Healthy is not enough: the server on the port must serve the name smolalign gave the one it started."""
    from smolalign.generation.server import serves

    port = free_port()
    foreign = subprocess.Popen([sys.executable, "-m", SERVER_MODULE, "--model", "m", "--host", "127.0.0.1",
                                "--port", str(port), "--served-model-name", "someone-else"], start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while not healthy(url, timeout=1) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert healthy(url) and serves(url, "someone-else")
        assert not serves(url, "smolalign-0123456789ab")
        # started by smolalign while the foreign one answers on its port (as if it had taken the port after the
        # check): refused by name, and smolalign's own server is stopped
        monkeypatch.setattr(lifecycle, "check_port", lambda recipe: None)
        recipe = recipe_for(port=port)
        with pytest.raises(SmolalignError, match=f"port {port}: the server answering there is not the one smolalign started"):
            with served_generation(recipe, MAIN, "float32"):
                pass
        assert not servers_named_smolalign_on(port)  # ours is stopped: nothing of it left running
    finally:
        os.killpg(foreign.pid, signal.SIGKILL)
        foreign.wait()


@pytest.mark.parametrize("ending", ["normal", "exception"])
def test_a_run_that_ends_leaves_no_process_of_the_server(standin, recipe_for, ending):
    """Normal end and a training error: the server and its engine core are gone and the port is free. Fails with the
    stop in served_generation's `finally` switched off (the server and its engine keep running)."""
    recipe = recipe_for()
    with contextlib.suppress(ValueError):
        with served_generation(recipe, MAIN, "float32") as server:
            group = server.process.pid
            [started] = recorded(standin)
            assert sorted(group_members(group)) == sorted([group, started["engine"]])
            if ending == "exception":
                raise ValueError("a training error")
    assert recorded(standin)[-1] == {"stopped": True}
    assert_gone(group, recipe.recipe.generation.server.port)


RUN = """
import os, pickle, sys, time
from types import SimpleNamespace
from smolalign.generation.server import served_generation
from smolalign.runs import watchdog

with open(sys.argv[1], "rb") as stream:
    recipe = pickle.load(stream)
with served_generation(recipe, SimpleNamespace(is_main_process=True), "float32") as server:
    print("SERVER", server.process.pid, flush=True)
    if sys.argv[2] == "stuck":
        watchdog.GRACE_AFTER_INTERRUPT = 1.0
        with watchdog.stall_watchdog(1, server):
            os.read(os.pipe()[0], 1)  # blocked in a C call: the watchdog's interrupt never lands, it exits hard
    time.sleep(600)
"""


def run_with_server(recipe, tmp_path, how: str) -> tuple[subprocess.Popen, int]:
    """A run (its own process, as `smolalign rl` is) holding a started server; returns it and the server's group."""
    import pickle

    (tmp_path / "recipe.pickle").write_bytes(pickle.dumps(recipe))
    run = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path / "recipe.pickle"), how], stdout=subprocess.PIPE,
                           text=True, start_new_session=True)
    for line in run.stdout:
        if line.startswith("SERVER "):
            return run, int(line.split()[1])
    raise AssertionError(f"the run ended before its server was healthy (exit code {run.wait()})")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL", "watchdog hard exit"])
def test_a_run_that_is_stopped_or_killed_leaves_no_process_of_the_server(standin, recipe_for, tmp_path, how):
    """SIGTERM to the run: the server is stopped through the run's `finally` blocks (it sees SIGTERM, so vLLM shuts
    down its engine) and the run exits 143; fails with the SIGTERM handler switched off (the run dies at once and the
    server is killed, never stopped). SIGKILL to the run, and the watchdog's `os._exit` when the main thread is stuck
    in a C call (no `finally` runs): the reaper kills the server's whole group; fails with the reaper switched off
    (the parent-death signal kills the server's own process only; its engine core is left running)."""
    recipe = recipe_for()
    run, group = run_with_server(recipe, tmp_path, "stuck" if how == "watchdog hard exit" else "wait")
    try:
        [started] = recorded(standin)
        assert sorted(group_members(group)) == sorted([group, started["engine"]])
        if how == "SIGTERM":
            run.send_signal(signal.SIGTERM)
            assert run.wait(timeout=30) == 128 + signal.SIGTERM
            assert recorded(standin)[-1] == {"stopped": True}
        elif how == "SIGKILL":
            run.kill()
            assert run.wait(timeout=30) == -signal.SIGKILL
        else:
            assert run.wait(timeout=30) == 1  # the watchdog's exit code for a failed run
        assert_gone(group, recipe.recipe.generation.server.port)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        run.wait()
