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


def script_sampling(monkeypatch, scripts: dict[str, list[str]]) -> list[str]:
    """The transformers backend's sampling replaced by `scripts` (scenario -> the model's turns, one per tool result
    it has read); returns the list every rendered prompt is appended to."""
    from smolalign.pairs.backends import Answer, TransformersGenerator

    seen = []

    def generate(self, prompts, seed, k, kwargs):
        answers = []
        for prompt in prompts:
            text = self.render(prompt, kwargs)
            seen.append(text)
            scenario = next(name for name in scripts if f"scenario {name}" in text)
            turn = scripts[scenario][text.count("<tool_response>")]
            ids = self.tokenizer.encode(turn, add_special_tokens=False) + [self.tokenizer.eos_token_id]
            answers += [Answer(turn, True, len(ids), ids)] * k
        return answers

    monkeypatch.setattr(TransformersGenerator, "_generate", generate)
    return seen


@pytest.fixture
def scripted_model(monkeypatch):
    return script_sampling(monkeypatch, SCRIPTS)


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


VAULT = '''
class Vault:
    """Opens for the row's solution; its reward is whether this answer opened it, on one try."""

    def __init__(self):
        self.code, self.tries, self.opened = None, 0, False

    def reset(self, prompt, solution, **columns):
        self.code, self.tries, self.opened = solution, 0, False
        return " (The vault is locked.)"

    def unlock(self, code: str) -> str:
        """Try a code on the vault.

        Args:
            code: The code to try.
        """
        self.tries += 1
        self.opened = self.opened or code == self.code
        return "open" if self.opened else "still locked"

    def get_reward(self) -> float:
        return 1.0 if self.opened and self.tries == 1 else 0.0
'''

VAULT_SCRIPTS = {
    "right": [call("unlock", {"code": "56088"}), "The answer is 56088."],
    "wrong": [call("unlock", {"code": "1"}), "The answer is 1."],
}


def test_eval_with_an_environment_resets_one_per_answer_offers_its_methods_and_scores_its_reward(
        cli, long_tiny_dir, tmp_path, monkeypatch):
    seen = script_sampling(monkeypatch, VAULT_SCRIPTS)
    (tmp_path / "vaults.py").write_text(VAULT)
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"scenario {name}", "solution": "56088"}
                                                    for name in VAULT_SCRIPTS])
    out = tmp_path / "eval.json"
    code, stdout, err = cli("eval", f"m={long_tiny_dir}", "--data", data, "--reward", "math_accuracy",
                            "--environment", f"{tmp_path}/vaults.py:Vault", "--max-turns", "2", "--samples", "2",
                            "--modes", "no_think", "--temperature", "1", "--json", out)  # the answers are scripted
    assert code == 0, err
    report = json.loads(out.read_text())
    with_tools, without = (report["results"][label]["no_think"] for label in ("m+tools", "m"))
    # Two answers per prompt, each with its own vault: had they shared one, the second try would not be the first.
    assert with_tools["Vault mean"]["value"] == pytest.approx(1 / 2)  # right opens it, wrong does not
    assert with_tools["math_accuracy mean"]["value"] == pytest.approx(1 / 2)
    assert with_tools["tool-call rate"]["value"] == 1.0 and with_tools["tool errors"]["value"] == 0.0
    # Without tools the same reset task, no tools shown: its calls never run, so no vault opens.
    assert without["Vault mean"]["value"] == 0.0 and without["math_accuracy mean"]["value"] == 0.0
    assert report["differences"]["m+tools"]["no_think"]["Vault mean"]["value"] == pytest.approx(1 / 2)
    assert all(text.count("(The vault is locked.)") == 1 for text in seen)  # reset's words, in both variants
    shown = [text for text in seen if "<tools>" in text]
    assert shown and all('"name": "unlock"' in text and "get_reward" not in text for text in shown)
    assert sum("<tools>" not in text for text in seen) == 4  # without tools: one turn per answer (2 prompts × K=2)
    results = [text.split("<tool_response>\n")[1].split("\n")[0] for text in seen if "<tool_response>" in text]
    assert sorted(results) == ["open", "open", "still locked", "still locked"]


def test_eval_environment_is_checked_before_loading(cli, tmp_path, tiny_dir):
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "hi", "solution": "1"}])
    (tmp_path / "envs.py").write_text("class Bare:\n    def look(self) -> str:\n        return ''\n")
    code, _, err = cli("eval", str(tiny_dir), "--data", data, "--reward", "math_accuracy", "--environment",
                       f"{tmp_path}/envs.py:Bare")
    assert code == 2 and "no reset() method" in err
    code, _, err = cli("eval", str(tiny_dir), "--data", data, "--reward", "math_accuracy", "--environment",
                       f"{tmp_path}/envs.py:Missing")
    assert code == 2 and "Missing" in err
    (tmp_path / "odd.py").write_text(ODD_ENVIRONMENTS)
    code, _, err = cli("eval", str(tiny_dir), "--data", data, "--reward", "math_accuracy", "--environment",
                       f"{tmp_path}/odd.py:Mapping")
    assert code == 2 and "eval.environment: reset() returned a dict" in err
    code, _, err = cli("eval", str(tiny_dir), "--data", data, "--reward", "math_accuracy", "--environment",
                       f"{tmp_path}/odd.py:Picky")
    assert code == 2 and "eval.environment: reset() failed (TypeError:" in err and "'solution'" in err


ODD_ENVIRONMENTS = '''
class Mapping:
    def reset(self, **row):
        return {"observation": "locked"}

    def look(self) -> str:
        """Look around."""
        return ""


class Picky(Mapping):
    def reset(self, prompt):
        return None
'''


def test_with_tools_the_rewards_read_the_think_opener_the_template_prefills(cli, long_tiny_dir, tmp_path,
                                                                            monkeypatch):
    """A template that prefills `<think>\\n` in think mode (reasoning models' do): an answer cut off in its reasoning
    has no answer, with tools as without, though the words after the opener state one."""
    from paths import REPO

    script_sampling(monkeypatch, {"cut": ["Let me see: 5 plus 6 makes 11, so the answer is 11"],
                                  "right": ["5 plus 6 makes 11.\n</think>\nThe answer is 11."]})
    template = (REPO / "chat_templates" / "smollm3.jinja").read_text()
    prefill = '{%- if reasoning_mode == "/no_think" -%}{{- "<think>\\n\\n</think>\\n" -}}{%- endif -%}\n{%- endif -%}'
    assert template.endswith(prefill + "\n")
    opened = tmp_path / "opened.jinja"
    opened.write_text(template.replace(prefill, prefill.replace(
        '{%- endif -%}\n{%- endif -%}', '{%- else -%}{{- "<think>\\n" -}}{%- endif -%}\n{%- endif -%}')))
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"scenario {name}", "solution": "11"}
                                                    for name in ("cut", "right")])
    out = tmp_path / "eval.json"
    code, _, err = cli("eval", f"m={long_tiny_dir}", "--data", data, "--reward", "math_accuracy", "--tools", "python",
                       "--modes", "think", "--temperature", "0", "--template", str(opened), "--json", out)
    assert code == 0, err
    results = json.loads(out.read_text())["results"]
    for label in ("m", "m+tools"):   # the cut-off answer has none and does not comply; the whole one does both
        assert results[label]["think"]["math_accuracy mean"]["value"] == pytest.approx(0.5), label
        assert results[label]["think"]["compliance"]["value"] == pytest.approx(0.5), label
