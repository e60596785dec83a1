"""A run keeps what torch and Triton compile under SMOLALIGN_CACHE/compile, unless the variables are set already."""

from smolalign.stages.compile_cache import keep_compiled_kernels


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
