"""Shared fixtures: a private smolalign cache, tiny offline models, and a way to run the CLI in-process."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Before anything imports torch or datasets: one thread unless the caller set OMP_NUM_THREADS (shared 2-core
# runners swing wildly otherwise; `make test-slow` uses 2), no hub,
# and caches private to this test session.
_SESSION_CACHE = Path(tempfile.mkdtemp(prefix="smolalign-tests-"))
# Half a gigabyte per session (the bundled model's conversion among it), and the mutation runs start hundreds of
# sessions: left behind, they filled a runner's disk.
atexit.register(shutil.rmtree, _SESSION_CACHE, ignore_errors=True)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["SMOLALIGN_CACHE"] = str(_SESSION_CACHE / "smolalign")
os.environ["HF_DATASETS_CACHE"] = str(_SESSION_CACHE / "datasets")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("SMOLALIGN_PROGRESS", "0")  # no progress bars in test output, even under `pytest -s` in a terminal

sys.path.insert(0, str(Path(__file__).parent))

from node_gpus import pin_one_gpu  # noqa: E402
from paths import REPO  # noqa: E402,F401 - test modules import it from conftest

pin_one_gpu()  # before any test module starts CUDA: in-process runs see one GPU (node_gpus.py)

# `make test` spreads the files over two processes (pytest-xdist, one file per process at a time, in this order):
# the longest files go first, so that no process is left alone at the end with one of them. Seconds measured on a
# 2-core runner with two processes.
LONGEST_FILES_FIRST = (
    "integration/test_zero3_cpu.py",  # ~300 s: two-process ZeRO-3 SFT and DPO runs
    "integration/test_vllm_server.py",  # ~160 s: real vLLM servers
    "integration/test_estimate_accuracy.py",  # ~100 s
    "integration/test_launch.py",  # ~80 s: two-process DDP
    "integration/test_shipped_quickstart.py",  # ~80 s: the bundled model
    "integration/test_sweep.py",  # ~65 s
    "unit/test_sandbox.py",  # ~65 s
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.path.as_posix()
        return next((i for i, name in enumerate(LONGEST_FILES_FIRST) if path.endswith(name)), len(LONGEST_FILES_FIRST))

    items.sort(key=rank)  # stable: the other files, and the tests within each file, keep their order


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """A random 2-layer Llama and its BPE tokenizer, saved as a normal transformers directory."""
    from tiny_models import build_tiny_dir

    return build_tiny_dir(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def long_tiny_dir(tmp_path_factory) -> Path:
    """The tiny Llama with 4,096 positions: room for SmolLM3's system turn with tools' schemas (about 1,300 of its
    tokens) and a multi-turn answer."""
    from tiny_models import build_model, build_tokenizer

    directory = tmp_path_factory.mktemp("tiny-llama-long")
    build_model(directory, build_tokenizer(directory), positions=4096)
    return directory


@pytest.fixture(scope="session")
def vllm_tiny_dir(tmp_path_factory) -> Path:
    """A random 2-layer Llama that vLLM's CPU build can run (head size 32), and its BPE tokenizer."""
    from tiny_models import build_vllm_tiny_dir

    return build_vllm_tiny_dir(tmp_path_factory.mktemp("tiny-llama-vllm"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir)


@pytest.fixture
def cli(capsys):
    """Run `smolalign ARGS...` in-process: returns (exit code, stdout, stderr)."""
    return _in_process_cli(capsys)


@pytest.fixture
def cli_fd(capfd):
    """`cli`, capturing at the file-descriptor level: for code that needs sys.stdout to be a real file (vLLM
    redirects its file descriptor while it builds an engine)."""
    return _in_process_cli(capfd)


def _in_process_cli(capture):
    from smolalign.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        capture.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capture.readouterr()
        return code, out, err

    return run


@pytest.fixture
def write_recipe(tmp_path):
    """Write a recipe mapping as YAML into the test's folder and return its path."""
    import yaml

    def write(mapping: dict, name: str = "recipe.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(mapping, sort_keys=False))
        return path

    return write


@pytest.fixture
def empty_inspection_cache(tmp_path, monkeypatch):
    """vLLM's model-info cache in a new folder, and nothing remembered in this process: the next engine inspects its
    model's class again. Yields (the folder, the registry's own process starts recorded)."""
    from vllm.model_executor.models import registry

    folder = tmp_path / "modelinfos"
    monkeypatch.setattr(registry._LazyRegisteredModel, "_get_cache_dir", staticmethod(lambda: folder))
    registry._try_inspect_model_cls.cache_clear()
    started, run = [], registry.subprocess.run

    def recording(command, *args, **kwargs):
        if command == registry._SUBPROCESS_COMMAND:
            started.append(command)
        return run(command, *args, **kwargs)

    monkeypatch.setattr(registry.subprocess, "run", recording)
    yield folder, started
    registry._try_inspect_model_cls.cache_clear()  # forget what the new folder's inspection found


@pytest.fixture(params=[0o022, 0o002, 0o077], ids=["umask-022", "umask-002", "umask-077"])
def umask(request):
    """The process's umask set to each of a shared, a group-writable and a private one; restored after."""
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)
