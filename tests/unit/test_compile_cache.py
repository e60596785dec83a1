"""A run keeps what torch and Triton compile under SMOLALIGN_CACHE/compile, unless the variables are set already, and
on a CPU the precompiled C++ header that torch would leave in the temporary directory."""

import pytest
from tiny_models import chat_rows, write_jsonl

from smolalign.hardware import Hardware
from smolalign.resolve import load_run
from smolalign.stages.compile_cache import keep_compiled_kernels
from smolalign.stages.library_patches import library_patches


def test_the_compilers_caches_go_under_smolalign_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path))
    environ = {}
    assert keep_compiled_kernels(environ) == environ
    assert environ == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "compile" / "inductor"),
                       "TRITON_CACHE_DIR": str(tmp_path / "compile" / "triton")}


def test_a_cache_the_user_chose_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path))
    environ = {"TORCHINDUCTOR_CACHE_DIR": "/scratch/inductor"}
    keep_compiled_kernels(environ)
    assert environ["TORCHINDUCTOR_CACHE_DIR"] == "/scratch/inductor"
    assert environ["TRITON_CACHE_DIR"] == str(tmp_path / "compile" / "triton")


CPU = Hardware("cpu", 0, "a test CPU", False, 1, 2)
H100 = Hardware("cuda", 1, "H100", True, 1, 16)


@pytest.fixture
def header_dir():
    """TorchInductor's precompiled-header folder as its compile step reads it (a module global, read at each call)."""
    from torch._inductor import codecache

    return lambda: codecache._HEADER_DIR


@pytest.mark.parametrize(("hardware", "compiles", "kept"), [(CPU, True, True), (CPU, False, False),
                                                             (H100, True, False)],
                         ids=["cpu-compiling", "cpu-not-compiling", "gpu-compiling"])
def test_a_run_that_compiles_on_a_cpu_keeps_the_precompiled_header_with_its_kernels(
        monkeypatch, tmp_path, write_recipe, tiny_dir, header_dir, hardware, compiles, kept):
    """torch keeps the header under the temporary directory whatever TORCHINDUCTOR_CACHE_DIR says: ~10 s again in
    every job with a private /tmp (benchmarks/compile_cache.py). A GPU's kernels are Triton's and include none."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    chats = write_jsonl(tmp_path / "chat.jsonl", chat_rows(4))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(chats)}]},
                           "train": {"torch_compile": compiles}})
    run = load_run(str(recipe), [], "sft", hardware=hardware)
    as_torch_has_it = header_dir()
    assert not as_torch_has_it.startswith(str(tmp_path))
    with library_patches(run, generates=False):
        during = header_dir()
    assert during == (str(tmp_path / "inductor" / "precompiled_headers") if kept else as_torch_has_it)
    assert header_dir() == as_torch_has_it  # put back when training ends
