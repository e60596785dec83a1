"""DeepSpeed ZeRO checkpoints -> transformers: a real ZeRO-3 checkpoint written by DeepSpeed on CPU (one gloo
process) consolidates to exactly the weights it was initialised from, with the tied lm_head dropped."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import deepspeed_skip_reason

from smolalign.checkpoints.convert import convert
from smolalign.checkpoints.detect import detect
from smolalign.checkpoints.files import read_safetensors_header as read_header
from smolalign.errors import SmolalignError
from smolalign.ports import free_port

HERE = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(deepspeed_skip_reason() is not None, reason=str(deepspeed_skip_reason()))


@pytest.fixture(scope="module")
def zero_run(tiny_dir, tmp_path_factory) -> Path:
    """An HF-Trainer-style checkpoint-1 folder: config, tokenizer, `latest`, global_step1/ and no full weights (what
    ZeRO-3 leaves without stage3_gather_16bit_weights_on_model_save)."""
    pytest.importorskip("deepspeed")
    folder = tmp_path_factory.mktemp("zero") / "checkpoint-1"
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, str(HERE / "deepspeed_zero_writer.py"), str(tiny_dir), str(folder)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert "ZERO_CHECKPOINT_OK" in result.stdout, result.stdout[-2000:] + result.stderr[-3000:]
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_dir / name, folder / name)
    return folder


def test_zero3_checkpoint_consolidates_to_the_original_weights(zero_run, tiny_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    detected = detect(zero_run)
    assert (detected.format, detected.tag) == ("deepspeed", "global_step1")
    report = convert(zero_run, tmp_path / "hf")
    assert "ZeRO, 1 model-state file(s), tag global_step1" in report.layout
    assert any("float32 master weights" in note for note in report.notes)
    original = AutoModelForCausalLM.from_pretrained(tiny_dir)
    converted = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    for name, tensor in original.state_dict().items():
        assert torch.equal(tensor, converted.state_dict()[name]), name
    assert "lm_head.weight" not in read_header(tmp_path / "hf" / "model.safetensors")
    assert (tmp_path / "hf" / "tokenizer.json").is_file()
    ids = torch.arange(10).reshape(1, 10)
    with torch.no_grad():
        assert torch.equal(original(input_ids=ids).logits, converted(input_ids=ids).logits)


def test_bare_zero_folder_needs_a_config(zero_run, tiny_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copytree(zero_run / "global_step1", bare / "global_step1")
    shutil.copy(zero_run / "latest", bare / "latest")
    with pytest.raises(SmolalignError, match="carries no model config: pass --config PATH"):
        convert(bare, tmp_path / "out")
    convert(bare, tmp_path / "out", config=tiny_dir, dtype="bfloat16", tokenizer=tiny_dir)
    assert '"dtype": "bfloat16"' in (tmp_path / "out" / "config.json").read_text()


def test_missing_deepspeed_gives_the_install_hint(tmp_path, tiny_dir, monkeypatch):
    folder = tmp_path / "ds"
    (folder / "global_step3").mkdir(parents=True)
    (folder / "global_step3" / "zero_pp_rank_0_mp_rank_00_model_states.pt").write_bytes(b"")
    (folder / "latest").write_text("global_step3")
    monkeypatch.setitem(sys.modules, "deepspeed.utils.zero_to_fp32", None)
    with pytest.raises(SmolalignError, match=r"needs deepspeed, which is not installed: pip install 'smolalign\[deepspeed\]'"):
        convert(folder, tmp_path / "out", config=tiny_dir)
