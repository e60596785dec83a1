"""`generation.backend: vllm_server` with the real vLLM server (its CPU build) that smolalign's lifecycle starts:
TRL 1.16's own VLLMClient generates through it (log-probs included) and gets the same answers to the same calls
from the stand-in the lifecycle tests use (so that stand-in stays faithful); a GRPO run in server mode syncs its
weights into the server (on a CPU through the filesystem, NCCL being CUDA-only: smolalign/generation/trl_on_cpu.py),
after which the server's log-probs of a fixed completion are the trainer's; and the failure modes with real
processes: a port already in use is exit 2 naming it, a model the engine cannot load is exit 2 in the dry run, and
a trainer killed with SIGKILL leaves no server behind, nor, with the engine core in a process of its own (as vLLM runs
it on GPUs), any engine process.

The recipes pin `model.dtype: float32`: these comparisons are exact to float32 rounding, and on a CPU with bf16 the default
would compute in bf16 (differences of ~2e-3 per token)."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from processes import assert_gone, group_members
from tiny_models import write_jsonl

from smolalign.ports import free_port
from smolalign.runs.metrics import read_metrics

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "vllm_server"
MAIN = SimpleNamespace(is_main_process=True)
TOLERANCE = 1e-4


def server_recipe(write_recipe, model_dir, tmp_path, port: int | None, **train) -> Path:
    """A GRPO recipe generating on a vLLM server smolalign starts on `port` (None: a free one, chosen at start)."""
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(16)])
    (tmp_path / "reward.py").write_text(
        "def spread(completions, completion_ids, **kw):\n    return [(sum(ids) % 97) / 97 for ids in completion_ids]\n")
    return write_recipe({
        "model": {"source": str(model_dir), "dtype": "float32"}, "template": {"name": "chatml"}, "method": "grpo",
        "data": {"sources": [{"path": str(prompts)}]}, "rewards": [{"name": f"{tmp_path / 'reward.py'}:spread"}],
        "generation": {"backend": "vllm_server",
                       "server": {"startup_timeout": 300, **({"port": port} if port is not None else {})}},
        "train": {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 8,
                  "max_steps": 3, "learning_rate": 5e-2, "logging_steps": 1, "save_strategy": "no",
                  "gradient_checkpointing": False, **train}})


@pytest.fixture(params=["real", "stand-in"])
def served(request, write_recipe, vllm_tiny_dir, tmp_path, monkeypatch):
    """A server started by smolalign's lifecycle: vLLM's own, or the stand-in (first on the server's PYTHONPATH)."""
    from recipe_runs import loaded_run

    from smolalign.generation.server import served_generation

    if request.param == "stand-in":
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(STANDIN), os.environ.get("PYTHONPATH")])))
    recipe = loaded_run(str(server_recipe(write_recipe, vllm_tiny_dir, tmp_path, free_port())), [], "rl")
    with served_generation(recipe, MAIN, "float32") as server:
        yield server


def test_trls_client_gets_the_same_answers_from_the_real_server_and_the_stand_in(served):
    from trl.generation.vllm_client import VLLMClient

    client = VLLMClient(base_url=served.base_url, connection_timeout=10)
    assert client.model.startswith("smolalign-")  # the name smolalign served it under
    assert client.get_world_size() == 1
    info = client.get_server_info()
    assert info["weight_transfer_config"] == {"backend": "nccl"}  # what TRL's sync expects on a GPU
    assert info["model_config"]["logprobs_mode"] == "processed_logprobs"
    out = client.generate([[5, 6, 7], [8, 9]], n=2, max_tokens=3, temperature=1.0)
    assert out["prompt_ids"] == [[5, 6, 7], [8, 9]]
    assert len(out["completion_ids"]) == 4 and all(len(ids) == 3 for ids in out["completion_ids"])
    assert [[t for [t] in row] for row in out["logprob_token_ids"]] == out["completion_ids"]
    assert all(len(row) == 3 and all(len(v) == 1 and v[0] < 0 for v in row) for row in out["logprobs"])
    sequence = client.get_sequence_logprobs([[5, 6, 7, 8, 9]], prompt_lengths=[2], top_logprobs=1)
    assert len(sequence["logprobs"][0]) == 3  # one per completion token
    client.reset_prefix_cache()


@pytest.fixture
def server_syncs(monkeypatch):
    """After every weight sync TRL makes in server mode: the server's and the trainer's log-probs of a sequence."""
    from trl.generation.vllm_generation import VLLMGeneration

    original = VLLMGeneration.sync_weights

    def sync_weights(self):
        original(self)
        client = self.vllm_client
        ids = list(range(5, 25))
        response = client._post(f"{client.base_url}/v1/completions",
                                json={"model": client.model, "prompt": [ids], "max_tokens": 1, "prompt_logprobs": 0,
                                      "temperature": 1.0})
        served = torch.tensor([entry[str(t)]["logprob"] for entry, t in
                               zip(response["choices"][0]["prompt_logprobs"][1:], ids[1:], strict=True)])
        model = self.model
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, :-1].float()
        trained = logits.log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
        seen.append((served, trained, client.syncs))
        seen.folders.append((client.sync_dir, sorted(p.name for p in client.sync_dir.iterdir())))

    monkeypatch.setattr(VLLMGeneration, "sync_weights", sync_weights)
    seen = SyncLog()
    return seen


class SyncLog(list):
    """(served, trained, syncs) per sync, and (the sync folder, its contents) after each."""

    def __init__(self):
        super().__init__()
        self.folders = []


def test_grpo_in_server_mode_syncs_its_weights_into_the_server(cli_fd, write_recipe, vllm_tiny_dir, tmp_path,
                                                                server_syncs, monkeypatch):
    import atexit

    at_exit = []
    monkeypatch.setattr(atexit, "register", lambda function, *args, **kwargs: at_exit.append(function))
    recipe = server_recipe(write_recipe, vllm_tiny_dir, tmp_path, free_port())
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err[-3000:]
    assert "starting the vLLM server on this CPU" in out
    trained = [m for m in read_metrics(tmp_path / "run") if "loss" in m]
    assert len(trained) == 3
    # smolalign's own check of each sync (stages/weight_sync.py), logged every step: the server scores its probe as
    # the policy does, and after an update no longer as the previous policy did.
    assert all(m["sync/engine_gap"] < TOLERANCE and m["sync/verified"] == 1 for m in trained), trained
    assert all(m["sync/reference_gap"] > 1e-2 for m in trained[1:]), trained
    # The server's own output is kept with the run once it stops, and its temporary file is gone.
    log = (tmp_path / "run" / "vllm-server.log").read_text()
    assert log.startswith("=== ") and str(vllm_tiny_dir) in log and "Application startup complete" in log, log[-2000:]
    assert not Path(re.search(r"\(log (\S+)\)", out).group(1)).exists()
    assert len(server_syncs) >= 2 and [count for _, _, count in server_syncs] == list(range(1, len(server_syncs) + 1))
    for served, trained, _ in server_syncs:
        assert (served - trained).abs().max().item() <= TOLERANCE
    moved = (server_syncs[-1][0] - server_syncs[0][0]).abs().max().item()
    assert moved > 1e-3, f"the server's log-probs moved only {moved} between the first and the last sync"
    # Each sync's weights file is gone once the server has read it, and the folder goes when the process exits.
    folder = server_syncs.folders[0][0]
    assert all(kept == [] and where == folder for where, kept in server_syncs.folders) and folder.is_dir()
    closes = [f for f in at_exit if getattr(f, "__name__", "") == "close_communicator"]
    assert len(closes) == 1
    closes[0]()
    assert not folder.exists()


@pytest.mark.slow  # about 90 s on 2 CPU cores: two runs with a server each, at once
def test_two_server_runs_on_one_machine_both_train(write_recipe, vllm_tiny_dir, tmp_path):
    """Neither recipe sets a port: each run starts its server on a free port of its own and states it (a fixed
    default port made the second run exit 2, the port in use)."""
    recipe = server_recipe(write_recipe, vllm_tiny_dir, tmp_path, None)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = [subprocess.Popen([sys.executable, "-m", "smolalign", "rl", str(recipe), "-o", str(tmp_path / f"run{i}")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    ports = []
    for i, run in enumerate(runs):
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
        ports += re.findall(r"starting the vLLM server on this CPU, port (\d+) \(free, chosen for this run\)", out)
        trained = [m for m in read_metrics(tmp_path / f"run{i}") if "loss" in m]
        assert len(trained) == 3 and all(m["sync/verified"] == 1 for m in trained), trained
    assert len(ports) == 2 and ports[0] != ports[1], ports


def test_the_ports_a_run_leaves_unset_are_chosen_free_and_those_it_sets_are_checked(write_recipe, vllm_tiny_dir,
                                                                                   tmp_path):
    from recipe_runs import loaded_run

    from smolalign.errors import SmolalignError
    from smolalign.generation.server import agreed_ports, check_port

    run = loaded_run(str(server_recipe(write_recipe, vllm_tiny_dir, tmp_path, None)), [], "rl")
    first, second = agreed_ports(run.recipe.generation.server), agreed_ports(run.recipe.generation.server)
    assert first != second and first[1] != second[1]  # a weight-sync port of its own per run
    for port in (*first, *second):
        with socket.socket() as probe:  # free where training listens: every interface
            probe.bind(("", port))
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        pinned = loaded_run(str(server_recipe(write_recipe, vllm_tiny_dir, tmp_path, None)),
                            [f"generation.server.group_port={port}"], "rl")
        assert agreed_ports(pinned.recipe.generation.server)[1] == port
        with pytest.raises(SmolalignError, match=f"generation.server.group_port {port}: the port is in use"):
            check_port(pinned.recipe)


def test_a_port_in_use_is_exit_2_naming_it(cli, write_recipe, vllm_tiny_dir, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        recipe = server_recipe(write_recipe, vllm_tiny_dir, tmp_path, port)
        for extra in (("--dry-run",), ("-o", tmp_path / "run")):
            code, _, err = cli("rl", recipe, *extra)
            assert code == 2 and f"generation.server.port {port}: the port is in use" in err
    assert not (tmp_path / "run").exists()


def test_a_model_the_engine_cannot_load_is_refused_in_the_dry_run(cli, write_recipe, tiny_dir, tmp_path):
    recipe = server_recipe(write_recipe, tiny_dir, tmp_path, free_port())  # heads of 16 dimensions
    code, _, err = cli("rl", recipe, "--dry-run")
    assert code == 2 and "vLLM's CPU build cannot run" in err and "16 dimensions" in err


def test_a_trainer_killed_outright_leaves_no_server(write_recipe, vllm_tiny_dir, tmp_path):
    from smolalign.generation.server import healthy
    from smolalign.ports import port_in_use

    port = free_port()
    recipe = server_recipe(write_recipe, vllm_tiny_dir, tmp_path, port, max_steps=10_000)
    trainer = subprocess.Popen([sys.executable, "-m", "smolalign", "rl", str(recipe), "-o", str(tmp_path / "run")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not healthy(f"http://127.0.0.1:{port}", timeout=1):
            assert trainer.poll() is None and time.monotonic() < deadline, "the server never came up"
            time.sleep(0.5)
        os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait()
        deadline = time.monotonic() + 30
        while port_in_use(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not port_in_use(port), "the server outlived the trainer that started it"
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)


ENGINE_IN_ITS_OWN_PROCESS = """
import sys, time
from types import SimpleNamespace
from smolalign.generation import server as lifecycle
from smolalign.resolve import load_run

on_cpu = lifecycle.server_env
lifecycle.server_env = lambda hardware: {name: value for name, value in on_cpu(hardware).items()
                                         if name != "VLLM_ENABLE_V1_MULTIPROCESSING"}
run = load_run(sys.argv[1], [], "rl")
with lifecycle.served_generation(run, SimpleNamespace(is_main_process=True), "float32") as server:
    print("SERVER", server.process.pid, flush=True)
    time.sleep(600)
"""


def test_a_trainer_killed_outright_leaves_no_engine_process(write_recipe, vllm_tiny_dir, tmp_path):
    """The real server with vLLM's engine core and worker in processes of their own (vLLM's default, and how it runs
    on GPUs): after SIGKILL to the process that started it, nothing of the server's process group is left and the
    port is free. Fails with the reaper switched off: the parent-death signal kills the server's own process, and
    VLLM::EngineCore, its VLLM::Worker and multiprocessing's resource tracker keep running."""
    from recipe_runs import loaded_run

    port = free_port()
    recipe = server_recipe(write_recipe, vllm_tiny_dir, tmp_path, port)
    loaded_run(str(recipe), [], "rl")  # checked here as the CLI checks it; the child resolves it for itself
    run = subprocess.Popen([sys.executable, "-c", ENGINE_IN_ITS_OWN_PROCESS, str(recipe)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    group = None
    try:
        for line in run.stdout:
            if line.startswith("SERVER "):
                group = int(line.split()[1])
                break
        assert group is not None, f"the server never came up (exit code {run.wait()})"
        names = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in group_members(group)}
        assert "VLLM::EngineCor" in names, names  # the engine core runs in a process of its own
        run.kill()
        assert run.wait(timeout=30) == -signal.SIGKILL
        assert_gone(group, port, wait=30)
    finally:
        for leader in filter(None, (run.pid, group)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leader, signal.SIGKILL)
        run.wait()
