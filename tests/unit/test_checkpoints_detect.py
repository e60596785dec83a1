"""Checkpoint formats recognised from file layouts alone (the files here are empty: nothing is unpickled), and the
model-source rules for them: kind `checkpoint`, tokenizer required, Megatron refused with a pointer."""

from pathlib import Path

import pytest

from smolalign.checkpoints.detect import detect
from smolalign.errors import SmolalignError


def touch(root: Path, *names: str, text: str = "") -> Path:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def nanotron_step(root: Path) -> Path:
    touch(root, "checkpoint_metadata.json", text='{"version": "1.4", "tp": 2, "dp": 1}')
    touch(root, "model/model/final_layer_norm/pp_block/model_weight.safetensors")
    return root


def test_nanotron_step_and_run_folders(tmp_path):
    step = nanotron_step(tmp_path / "run" / "4720000")
    assert detect(step).format == "nanotron" and detect(step).path == step.resolve()
    (tmp_path / "run" / "latest.txt").write_text("4720000\n")
    found = detect(tmp_path / "run")
    assert (found.format, found.path.name, found.notes) == ("nanotron", "4720000", ("latest.txt -> step 4720000",))
    (tmp_path / "run" / "latest.txt").write_text("5000000")
    with pytest.raises(SmolalignError, match="latest.txt names step '5000000', which is not a checkpoint"):
        detect(tmp_path / "run")


def test_deepspeed_layouts(tmp_path):
    plain = touch(tmp_path / "ds", "global_step3/zero_pp_rank_0_mp_rank_00_model_states.pt",
                  "global_step3/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_to_fp32.py")
    (plain / "latest").write_text("global_step3")
    assert (detect(plain).format, detect(plain).tag) == ("deepspeed", "global_step3")
    assert (detect(plain / "global_step3").path, detect(plain / "global_step3").tag) == (plain.resolve(), "global_step3")
    (plain / "latest").unlink()
    touch(plain, "global_step12/zero_pp_rank_0_mp_rank_00_model_states.pt")
    assert detect(plain).tag == "global_step12"

    trainer = touch(tmp_path / "checkpoint-8", "config.json", "global_step8/zero_pp_rank_0_mp_rank_00_model_states.pt",
                    "trainer_state.json")
    (trainer / "latest").write_text("global_step8")
    assert detect(trainer).format == "deepspeed"
    touch(trainer, "model.safetensors")  # full weights next to the ZeRO state: the model source uses those
    assert detect(trainer).format == "hf"


def test_dcp_megatron_and_hf(tmp_path):
    assert detect(touch(tmp_path / "dcp", ".metadata", "__0_0.distcp", "__1_0.distcp")).format == "dcp"
    titan = touch(tmp_path / "titan", "step-100/.metadata", "step-100/__0_0.distcp", "step-20/.metadata",
                  "step-20/__0_0.distcp")
    assert detect(titan).path.name == "step-100"
    assert detect(touch(tmp_path / "mcore", "metadata.json", "common.pt", "__0_0.distcp", ".metadata")).format == \
        "megatron_dist"
    assert detect(touch(tmp_path / "legacy", "latest_checkpointed_iteration.txt", "iter_0001000/mp_rank_00/model_optim_rng.pt")).format == "megatron"
    assert detect(touch(tmp_path / "hf", "config.json", "model-00001-of-00002.safetensors")).format == "hf"
    assert detect(touch(tmp_path / "adapter", "adapter_config.json", "adapter_model.safetensors")).format == "hf"


def test_unknown_directory_lists_what_it_holds(tmp_path):
    touch(tmp_path / "x", "weights.npz", "notes.txt", "sub/a.bin")
    with pytest.raises(SmolalignError, match=r"not a format smolalign reads .*it holds notes.txt, sub/, weights.npz"):
        detect(tmp_path / "x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SmolalignError, match="nothing \\(empty directory\\)"):
        detect(tmp_path / "empty")


def test_model_sources(tmp_path, tiny_dir):
    from smolalign.models.sources import resolve_source

    step = nanotron_step(tmp_path / "run" / "10")
    with pytest.raises(SmolalignError, match="is a nanotron checkpoint with no tokenizer of its own: set model.tokenizer"):
        resolve_source(str(step), tokenizer_key="model.tokenizer")
    with pytest.raises(SmolalignError, match="convert it once with `smolalign convert"):
        resolve_source(str(step))
    source = resolve_source(str(step), tokenizer=str(tiny_dir))
    assert (source.kind, source.tokenizer) == ("checkpoint", str(tiny_dir.resolve()))
    with pytest.raises(SmolalignError, match="model.tokenizer is for pretraining checkpoints .* remove model.tokenizer"):
        resolve_source(str(tiny_dir), tokenizer=str(tiny_dir), tokenizer_key="model.tokenizer")
    with pytest.raises(SmolalignError, match="model.tokenizer: tokenizer .* not a directory holding tokenizer.json"):
        resolve_source(str(step), tokenizer=str(tmp_path), tokenizer_key="model.tokenizer")
    legacy = touch(tmp_path / "legacy", "latest_checkpointed_iteration.txt")
    with pytest.raises(SmolalignError, match="Megatron-Bridge \\(pip install megatron-bridge"):
        resolve_source(str(legacy))
