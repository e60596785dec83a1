"""`smolalign chat --think/--no-think` sets a hybrid template's reasoning mode; on a model whose template has no
modes it changed nothing without a word, and now says so (the reply is the same either way)."""

import json
import shutil

import pytest
from paths import REPO


@pytest.mark.parametrize("template, warned", [("chatml", True), ("smollm3", False)])
def test_a_mode_flag_on_a_template_without_modes_is_warned_about(cli, tiny_dir, tmp_path, template, warned):
    model = tmp_path / template
    shutil.copytree(tiny_dir, model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["chat_template"] = (REPO / "chat_templates" / f"{template}.jinja").read_text()
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    replies = {}
    for flag in ("--think", "--no-think"):
        code, out, err = cli("chat", model, "--message", "hi", "--max-new-tokens", "3", flag)
        assert code == 0, err
        assert (f"{flag} changes nothing" in err) == warned, err
        replies[flag] = out
    code, _, err = cli("chat", model, "--message", "hi", "--max-new-tokens", "3")
    assert code == 0 and "changes nothing" not in err, err
    if warned:  # the flag reached nothing: the same prompt, the same greedy reply
        assert replies["--think"] == replies["--no-think"]
