"""`smolalign eval --tools`: each model evaluated without tools and with them, side by side, through smolalign's own
tool loop (the python tool on the real sandbox, a team's tool). Only the model's sampling is scripted (a random tiny
model never writes a tool call), so every figure of the report can be computed by hand."""

import json

import pytest
from tiny_models import write_jsonl

TEAM_TOOLS = '''
def lookup(key: str) -> str:
    """Look a value up by its key.

    Args:
        key: The key to look up.
    """
    return {"pi": "3.14159"}[key]
'''


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


SCRIPTS = {  # scenario -> the model's turns with tools; without tools it writes its first turn only
    "multiply": [call("python", {"code": "print(123 * 456)"}), "The answer is 56088."],
    "crashes": [call("python", {"code": "print(1 / 0)"}), "The answer is 0."],
    "raises": [call("lookup", {"key": "tau"}), "I do not know."],
    "head": ["The answer is 56088."],
    "malformed": ['<tool_call>\n{"name": "python", "arguments": {code: 1}\n</tool_call>'],
    "loops": [call("python", {"code": "print(1)"})] * 3,
}


@pytest.fixture
def scripted_model(monkeypatch):
    """The transformers backend's sampling replaced by the scripts; every rendered prompt is kept."""
    from smolalign.pairs.backends import Answer, TransformersGenerator

    seen = []

    def generate(self, prompts, seed, k, kwargs):
        answers = []
        for prompt in prompts:
            text = self.render(prompt, kwargs)
            seen.append(text)
            scenario = next(name for name in SCRIPTS if f"scenario {name}" in text)
            turn = SCRIPTS[scenario][text.count("<tool_response>")]
            ids = self.tokenizer.encode(turn, add_special_tokens=False) + [self.tokenizer.eos_token_id]
            answers += [Answer(turn, True, len(ids), ids)] * k
        return answers

    monkeypatch.setattr(TransformersGenerator, "_generate", generate)
    return seen


def test_eval_with_tools_reports_calls_errors_and_accuracy_beside_the_model_without_tools(
        cli, long_tiny_dir, tmp_path, scripted_model):
    (tmp_path / "team_tools.py").write_text(TEAM_TOOLS)
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"scenario {name}", "solution": "56088"}
                                                    for name in SCRIPTS])
    out = tmp_path / "eval.json"
    code, stdout, err = cli("eval", f"m={long_tiny_dir}", "--data", data, "--reward", "math_accuracy",
                            "--tools", "python", "--tools", f"{tmp_path}/team_tools.py:lookup", "--max-turns", "2",
                            "--modes", "no_think", "--temperature", "0", "--json", out)
    assert code == 0, err
    report = json.loads(out.read_text())
    assert [m["label"] for m in report["models"]] == ["m", "m+tools"]
    assert report["compared_to"] == {"m+tools": "m"}
    with_tools, without = (report["results"][label]["no_think"] for label in ("m+tools", "m"))
    # With tools: multiply is right (the sandbox printed 56088, the model answered it), head is right without a
    # call; crashes, raises (tool errors), malformed (a call that does not read) and loops (no answer at the
    # turn limit) are not.
    assert with_tools["math_accuracy mean"]["value"] == pytest.approx(2 / 6)
    assert with_tools["tool-call rate"]["value"] == pytest.approx(4 / 6)  # multiply, crashes, raises, loops
    assert with_tools["tool errors"]["value"] == pytest.approx(3 / 6)  # crashes, raises, malformed
    # Without tools the same first turns: only head answers; the three well-formed calls count as calls made.
    assert without["math_accuracy mean"]["value"] == pytest.approx(1 / 6)
    assert without["tool-call rate"]["value"] == pytest.approx(4 / 6)
    assert without["tool errors"]["value"] == pytest.approx(1 / 6)
    difference = report["differences"]["m+tools"]["no_think"]["math_accuracy mean"]["value"]
    assert difference == pytest.approx(1 / 6)

    samples = [json.loads(line) for line in (tmp_path / "eval.samples.jsonl").read_text().splitlines()]
    multiply = next(s for s in samples if s["model"] == "m+tools" and "scenario multiply" in s["prompt"] or (
        s["model"] == "m+tools" and s["sample"] == 0 and s["rewards"]["math_accuracy"] == 1.0 and "tool_call" in s["turn"]))
    assert "<tool_response>\n56088\n\n</tool_response>" in multiply["turn"]
    raised = [text for text in scripted_model if "scenario raises" in text and "<tool_response>" in text]
    assert raised and "KeyError: 'tau'" in raised[0]
    prompts_with_tools = [text for text in scripted_model if "<tools>" in text]
    assert prompts_with_tools and all('"name": "lookup"' in text for text in prompts_with_tools)
    assert sum("<tools>" not in text for text in scripted_model) == 6  # the model without tools: no schema shown


def test_eval_tools_are_checked_before_loading(cli, tmp_path, tiny_dir):
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "hi", "solution": "1"}])
    code, _, err = cli("eval", str(tiny_dir), "--data", data, "--reward", "math_accuracy", "--tools", "pyton")
    assert code == 2 and "unknown tool 'pyton' (did you mean python?)" in err
    code, _, err = cli("eval", str(tiny_dir), "--data", data, "--reward", "math_accuracy", "--tools", "python",
                       "--template", "chatml")
    assert code == 2 and "template chatml does not render a tool conversation" in err
