"""An engine built on a CPU has its model's class inspected in this process: vLLM's registry starts no Python of its
own for it (11 s on 2 cores the first time a machine, or an emptied VLLM_CACHE_ROOT, meets an architecture), and
what it caches is what vLLM's own separate process finds."""

import json

import pytest
from tiny_models import cached_model_info, write_jsonl


def test_a_cpu_engine_inspects_its_model_class_here(cli_fd, vllm_tiny_dir, tmp_path, empty_inspection_cache):
    folder, started = empty_inspection_cache
    data = write_jsonl(tmp_path / "q.jsonl", [{"prompt": "what is 1 plus 2", "solution": "3"}])
    code, _, err = cli_fd("eval", f"m={vllm_tiny_dir}", "--data", data, "--reward", "math_accuracy", "--template",
                          "chatml", "--modes", "no_think", "--max-new-tokens", "4", "--backend", "vllm",
                          "--json", tmp_path / "eval.json")
    assert code == 0, err
    assert json.loads((tmp_path / "eval.json").read_text())  # the engine generated
    assert started == []  # no Python started for the inspection
    info = cached_model_info(folder)  # ... which ran, and was cached as vLLM caches it
    assert info["modelinfo"]["architecture"] == "LlamaForCausalLM" and info["modelinfo"]["is_text_generation_model"]


@pytest.mark.slow
def test_the_inspection_here_finds_what_vllms_own_process_finds(tmp_path, monkeypatch, empty_inspection_cache):
    """The reference: vLLM's registry as it comes, in a process of its own, into another new folder."""
    from vllm.model_executor.models import ModelRegistry, registry

    from smolalign.generation.vllm_inspection import inspected_here
    from smolalign.hardware import Hardware

    here, started = empty_inspection_cache
    with inspected_here(Hardware("cpu", 0, "cpu", True, 1, 2)):
        ModelRegistry._try_inspect_model_cls("LlamaForCausalLM")
    assert started == []
    own = tmp_path / "own"
    monkeypatch.setattr(registry._LazyRegisteredModel, "_get_cache_dir", staticmethod(lambda: own))
    registry._try_inspect_model_cls.cache_clear()
    ModelRegistry._try_inspect_model_cls("LlamaForCausalLM")
    assert len(started) == 1
    assert cached_model_info(here) == cached_model_info(own)
