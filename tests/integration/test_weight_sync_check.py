"""Every weight sync into vLLM is checked, with the real engine (vLLM's CPU build) colocated in the trainer: runs whose
weights reach the engine (GRPO with full weights and with LoRA) log the check at every step and finish; a run whose
sync does nothing (TRL's sync switched off; for LoRA, the adapter never merged into what is sent) stops with exit 1
at the first check after an update, naming the backend and the step, before training on a stale rollout (GRPO,
online DPO, distillation); a sync that hangs fails the run after generation.sync_timeout. The server path: in
tests/integration/test_vllm_server.py (the check logged) and, slow tier, here (a stale server stops the run).

The recipes pin float32 (test_vllm_rl.py says why) and a large learning rate, so that one step moves the policy far
past the check's tolerance: the first check after an update decides."""

import re
import time

import pytest
from test_vllm_rl import distill_recipe, rl_recipe
from test_vllm_server import server_recipe

from smolalign.ports import free_port
from smolalign.runs.metrics import read_metrics

GRPO = {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 8}
ONLINE_DPO = {"per_device_train_batch_size": 2, "max_new_tokens": 8, "max_length": 64, "beta": 0.1}
LORA = {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}


def edited(recipe: str, **sections) -> str:
    import yaml

    with open(recipe) as stream:
        data = yaml.safe_load(stream)
    with open(recipe, "w") as stream:
        yaml.safe_dump({**data, **sections}, stream)
    return recipe


def trained_entries(run_dir):
    return [entry for entry in read_metrics(run_dir) if "loss" in entry]


def switch_sync_off(monkeypatch):
    from trl.experimental.online_dpo.online_dpo_trainer import OnlineDPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration

    monkeypatch.setattr(VLLMGeneration, "sync_weights", lambda self: None)
    monkeypatch.setattr(OnlineDPOTrainer, "_move_model_to_vllm", lambda self: None)


def assert_checked_every_step(run_dir, steps: int) -> None:
    """Each logged step carries its sync's check: the engine within float32 rounding of the policy, and, after the
    first (made before any update, where the two hold the same weights), away from the previous policy."""
    entries = trained_entries(run_dir)
    assert len(entries) == steps
    for index, entry in enumerate(entries):
        assert entry["sync/engine_gap"] < 1e-4, entry
        assert entry["sync/verified"] == 1, entry
        assert entry["sync/seconds"] >= 0 and entry["sync/check_seconds"] > 0
        if index:
            assert entry["sync/policy_moved"] > 1e-2 and entry["sync/reference_gap"] > 1e-2, entry


@pytest.mark.parametrize("peft", [None, LORA], ids=["full", "lora"])
def test_grpo_whose_weights_reach_the_engine_passes_every_check(cli_fd, write_recipe, vllm_tiny_dir, tmp_path, peft):
    recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, "grpo", GRPO)
    if peft:
        edited(recipe, peft=peft)
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err[-3000:]
    assert_checked_every_step(tmp_path / "run", 3)


@pytest.mark.parametrize("method", ["grpo", "online_dpo", "distill"])
def test_a_sync_that_never_reaches_the_engine_stops_the_run_at_the_first_check(cli_fd, write_recipe, vllm_tiny_dir,
                                                                             tmp_path, monkeypatch, method):
    if method == "distill":
        recipe = distill_recipe(write_recipe, vllm_tiny_dir, tmp_path)
    else:
        recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, method, GRPO if method == "grpo" else ONLINE_DPO)
    switch_sync_off(monkeypatch)
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 1, err[-3000:]
    assert re.search(r"the colocated vLLM engine is stale at step 1: .* like the policy of step 0", err), err[-3000:]
    assert "Traceback" not in err
    # Step 1 trained on rollouts of the starting policy, which the engine held; the stale ones of step 2 never were.
    assert len(trained_entries(tmp_path / "run")) == 1


def test_a_lora_adapter_that_never_merges_into_the_engine_stops_the_run(cli_fd, write_recipe, vllm_tiny_dir, tmp_path,
                                                                       monkeypatch):
    from peft.tuners.tuners_utils import BaseTuner

    recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, "grpo", GRPO)
    edited(recipe, peft=LORA)
    monkeypatch.setattr(BaseTuner, "merge_adapter", lambda self, *a, **k: None)
    monkeypatch.setattr(BaseTuner, "unmerge_adapter", lambda self, *a, **k: None)
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 1, err[-3000:]
    assert "the colocated vLLM engine is stale at step 1" in err and "merge_adapter" in err, err[-3000:]
    assert len(trained_entries(tmp_path / "run")) == 1


def test_a_sync_that_hangs_fails_the_run_after_the_sync_timeout(cli_fd, write_recipe, vllm_tiny_dir, tmp_path,
                                                               monkeypatch):
    from trl.generation.vllm_generation import VLLMGeneration

    recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, "grpo", GRPO)
    edited(recipe, generation={"backend": "vllm_colocate", "sync_timeout": 2})
    sync, calls = VLLMGeneration.sync_weights, []

    def hangs_after_the_first(self):
        calls.append(1)
        if len(calls) > 1:
            time.sleep(60)  # what Python can interrupt; a hang it cannot is the watchdog's hard exit
        sync(self)

    monkeypatch.setattr(VLLMGeneration, "sync_weights", hangs_after_the_first)
    started = time.monotonic()
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 1, err[-3000:]
    assert ("the weight sync into the colocated vLLM engine at step 1 did not finish within 2 s "
            "(generation.sync_timeout)") in err, err[-3000:]
    assert time.monotonic() - started < 50


@pytest.mark.slow
def test_a_server_that_never_receives_the_weights_stops_the_run(cli_fd, write_recipe, vllm_tiny_dir, tmp_path,
                                                                monkeypatch):
    """The real server (vLLM's CPU build) that smolalign starts, with TRL's sync to it switched off."""
    recipe = server_recipe(write_recipe, vllm_tiny_dir, tmp_path, free_port())
    switch_sync_off(monkeypatch)
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 1, err[-3000:]
    assert re.search(r"the vLLM server is stale at step 1: .* like the policy of step 0", err), err[-3000:]
    assert len(trained_entries(tmp_path / "run")) == 1


@pytest.mark.slow
def test_the_colocated_engine_loads_the_recipes_revision(write_recipe, vllm_tiny_dir, tmp_path):
    """A hub model at `model.revision: v2` whose `main` vLLM cannot load (an architecture it does not know): the run
    succeeds only if TRL's colocated engine loads v2 too. A hub cache made here, read offline, by a fresh process (the
    hub's cache folder is read when huggingface_hub is imported)."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    repo = tmp_path / "hub" / "models--some-org--tiny"
    for ref, commit, architecture in (("main", "a" * 40, "NoSuchModelForCausalLM"), ("v2", "b" * 40, None)):
        snapshot = repo / "snapshots" / commit
        shutil.copytree(vllm_tiny_dir, snapshot)
        if architecture:
            config = json.loads((snapshot / "config.json").read_text())
            (snapshot / "config.json").write_text(json.dumps({**config, "architectures": [architecture]}))
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    recipe = rl_recipe(write_recipe, vllm_tiny_dir, tmp_path, "grpo", {**GRPO, "max_steps": 1})
    edited(recipe, model={"source": "some-org/tiny", "revision": "v2", "dtype": "float32"})
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "smolalign", "rl", recipe, "-o", str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert trained_entries(tmp_path / "run")[0]["sync/verified"] == 1
