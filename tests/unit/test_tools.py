"""Tools for GRPO (`tools:`): the recipe section refused where it cannot work, a team's tools checked before any
model loads (exit 2 naming the key), the python tool on the real sandbox (results cut to the budget, failures and
time-outs raised for TRL to report), the template able to carry a tool conversation, and trajectories read the
same way by the rewards, the logs and eval."""

import re

import pytest
from transformers import AutoTokenizer

from rewards.math import MathAccuracy
from rewards.text import completion_text
from rewards.tool_use import ToolFormat
from rewards.trajectory import is_tool_error, read_trajectory
from smolalign.errors import SmolalignError
from smolalign.recipe.schema import ToolsSection
from smolalign.recipe.validate import parse_recipe
from smolalign.templates.registry import resolve_template
from smolalign.tools.resolve import resolve_tools

CALL = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(2 + 3)"}}}


def recipe(tools, method="grpo", **extra):
    raw = {"stage": "rl", "method": method, "model": {"source": "m"}, "data": {"sources": [{"path": "p.jsonl"}]},
           "rewards": [{"name": "math_accuracy"}], "tools": tools, **extra}
    return parse_recipe(raw, "rl", "test")


def test_the_section_parses_with_its_defaults():
    section = recipe({"use": ["python"]}).tools
    assert section == ToolsSection(use=["python"], environment=None, max_turns=4, timeout=10.0, max_output_chars=2000)


@pytest.mark.parametrize(("tools", "method", "message"), [
    ({"use": ["pyhton"]}, "grpo", "tools: use.0: unknown tool 'pyhton' (did you mean python?)"),
    ({"use": []}, "grpo", "list tools in use"),
    ({"use": ["python"], "max_turns": 0}, "grpo", "max_turns must be at least 1"),
    ({"use": ["python"], "timeout": 0}, "grpo", "timeout must be positive"),
    ({"use": ["python", "python"]}, "grpo", "lists a tool twice"),
    ({"use": ["python"], "turns": 2}, "grpo", "tools.turns"),
    ({"use": ["python"]}, "online_dpo", "tools: method online_dpo generates without tools"),
])
def test_bad_sections_are_refused_naming_the_key(tools, method, message):
    with pytest.raises(SmolalignError, match=None) as caught:
        recipe(tools, method)
    assert message in str(caught.value)


TEAM = '''
import time


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def untyped(a):
    """No hint.

    Args:
        a: The value.
    """
    return a


def undocumented(a: int) -> int:
    return a


def fails(a: int) -> int:
    """Fails.

    Args:
        a: The value.
    """
    return {}["missing"]


def sleeps(seconds: float) -> str:
    """Sleeps.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "awake"


def long(n: int) -> str:
    """Long.

    Args:
        n: How many characters.
    """
    return "x" * n


class Counter:
    def __init__(self):
        self.count = 0

    def reset(self, **kwargs):
        self.count = 0

    def increment(self, by: int) -> int:
        """Add to the counter.

        Args:
            by: How much.
        """
        self.count += by
        return self.count


class NoReset:
    def step(self, x: int) -> int:
        """Step.

        Args:
            x: A value.
        """
        return x
'''


@pytest.fixture
def team(tmp_path):
    path = tmp_path / "team.py"
    path.write_text(TEAM)
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    return path


@pytest.mark.parametrize(("use", "environment", "message"), [
    (["{dir}/missing.py:add"], None, "tools.use.0 ({dir}/missing.py:add): no such file"),
    (["{dir}/broken.py:add"], None, "does not import (ModuleNotFoundError"),
    (["no_such_module_here:add"], None, "module no_such_module_here does not import"),
    (["{dir}/team.py:ad"], None, "has no 'ad' (did you mean add?)"),
    (["{dir}/team.py:untyped"], None, "the tool's schema cannot be made from it"),
    (["{dir}/team.py:undocumented"], None, "the tool's schema cannot be made from it"),
    (["{dir}/team.py:Counter"], None, "is not a function (an environment class goes in tools.environment)"),
    (["python"], "{dir}/team.py:NoReset", "tools.environment ({dir}/team.py:NoReset): the environment has no reset()"),
    (["{dir}/team.py:add", "{dir}/team.py:add"], None, "lists a tool twice"),
])
def test_a_teams_bad_tools_are_refused_before_loading(team, use, environment, message):
    directory = str(team.parent)
    mapping = {"use": [u.format(dir=directory) for u in use]}
    if environment:
        mapping["environment"] = environment.format(dir=directory)
    with pytest.raises(SmolalignError) as caught:
        resolve_tools(recipe(mapping).tools)
    assert message.format(dir=directory) in str(caught.value)


def test_a_teams_module_imports_from_the_working_directory_which_stays_off_the_path(tmp_path, monkeypatch):
    import sys

    from smolalign.tools.team import load_object

    (tmp_path / "team_module_here.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = list(sys.path)
    try:
        assert load_object("team_module_here:add", "tools.use.0")(2, 3) == 5
        assert sys.path == before  # the rest of the process imports as it did
    finally:
        sys.modules.pop("team_module_here", None)


def test_a_teams_tools_are_held_to_their_limits(team):
    directory = team.parent
    tools = resolve_tools(ToolsSection(use=[f"{directory}/team.py:{name}" for name in ("add", "fails", "sleeps",
                                                                                        "long")],
                                       environment=f"{directory}/team.py:Counter", timeout=0.5, max_output_chars=30))
    add, fails, sleeps, long = tools.functions
    assert tools.names == ("add", "fails", "sleeps", "long", "increment")
    assert add(a=2, b=3) == 5
    from transformers.utils import get_json_schema

    assert get_json_schema(add)["function"]["parameters"]["required"] == ["a", "b"]  # TRL shows the model this
    with pytest.raises(Exception, match="KeyError: 'missing'"):
        fails(a=1)
    with pytest.raises(Exception, match="ran past its 0.5-second limit"):
        sleeps(seconds=5)
    assert sleeps(seconds=0.01) == "awake"
    assert long(n=45) == "x" * 30 + "\n[… 15 more characters cut]"
    assert tools.timeouts == 1
    assert tools.environment_factory().increment(by=2) == 2


def test_the_python_tool_runs_code_in_the_sandbox_and_reports_failures():
    tools = resolve_tools(ToolsSection(use=["python"], timeout=1.0, max_output_chars=60))
    python = tools.functions[0]
    try:
        assert python(code="print(123 * 456)") == "56088\n"
        assert python(code="print('y' * 100)") == "y" * 60 + "\n[… 41 more characters cut]"
        with pytest.raises(Exception) as caught:
            python(code="x = 1\nprint(x / 0)")
        assert str(caught.value).endswith("ZeroDivisionError: division by zero")
        with pytest.raises(Exception, match="ran past the 1-second limit"):
            python(code="while True: pass")
        host_file = f"try:\n    open({str(__file__)!r})\nexcept OSError as e:\n    print(type(e).__name__)"
        assert python(code=host_file) == "FileNotFoundError\n"  # the sandbox shows no host files
        assert tools.timeouts == 1
    finally:
        tools.close()


@pytest.fixture(scope="module")
def tokenizer(tiny_dir):
    return AutoTokenizer.from_pretrained(tiny_dir)


def test_smollm3_carries_a_tool_conversation_and_its_calls_read_back(tokenizer):
    from trl.chat_template_utils import parse_response

    from smolalign.tools.rendering import install_response_parser

    tokenizer.chat_template = resolve_template("smollm3").text
    install_response_parser(tokenizer, "smollm3", {"enable_thinking": True})
    text = '<think>\nI should compute.\n</think>\n<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call><|im_end|>'
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "2 + 3?"}], add_generation_prompt=True,
                                           tokenize=True, return_dict=False, enable_thinking=True)
    parsed = parse_response(tokenizer, tokenizer.encode(text, add_special_tokens=False), prefix=prompt)
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "python",
                                                                      "arguments": {"code": "print(1)"}}}]
    assert parsed["reasoning_content"] == "I should compute."


def test_a_template_that_drops_tool_calls_is_refused(tokenizer):
    from smolalign.tools.rendering import install_response_parser

    tokenizer.chat_template = resolve_template("chatml").text
    with pytest.raises(SmolalignError, match="template chatml does not render a tool conversation"):
        install_response_parser(tokenizer, "chatml", {})


def trajectory(*messages):
    return list(messages)


def test_trajectories_are_read_turn_by_turn():
    ok = trajectory({"role": "assistant", "content": "", "tool_calls": [CALL]}, {"role": "tool", "content": "5\n"},
                    {"role": "assistant", "content": "The answer is 5."})
    read = read_trajectory(ok)
    assert (read.assistant_turns, read.calls, read.tool_errors, read.answered, read.answer) == (2, 1, 0, True,
                                                                                               "The answer is 5.")
    failed = trajectory({"role": "assistant", "content": "", "tool_calls": [CALL, CALL]},
                        {"role": "tool", "content": str({"error": "KeyError: 'x'"})}, {"role": "tool", "content": "5"},
                        {"role": "assistant", "content": "5"})
    assert read_trajectory(failed).tool_errors == 1
    assert is_tool_error("{'error': 'boom'}") and not is_tool_error("{'error': 'boom', 'x': 1}")
    assert not is_tool_error("{'error' is what I printed")
    malformed = [{"role": "assistant", "content": '<tool_call>\n{"name": python}\n</tool_call>'}]
    assert read_trajectory(malformed).malformed_calls == 1 and not read_trajectory(malformed).answered
    thought = [{"role": "assistant", "reasoning_content": "2 + 3 is 5", "content": "5"}]
    assert read_trajectory(thought).answer == "<think>\n2 + 3 is 5\n</think>\n5"


def test_a_trajectory_that_ends_on_a_tool_result_has_no_answer():
    # The completion budget cut the model off after the tool answered: the tool's output is not the model's answer.
    cut_off = trajectory({"role": "assistant", "content": "", "tool_calls": [CALL]}, {"role": "tool", "content": "5"})
    pending = trajectory({"role": "assistant", "content": "", "tool_calls": [CALL]})
    assert completion_text(cut_off) == completion_text(pending) == ""
    accuracy = MathAccuracy()
    assert accuracy([cut_off, pending], solution=["5", "5"]) == [0.0, 0.0]
    answered = cut_off + [{"role": "assistant", "content": "The answer is 5."}]
    assert accuracy([answered], solution=["5"]) == [1.0]


def test_tool_format_scores_the_use_of_tools():
    reward = ToolFormat()
    good = [{"role": "assistant", "content": "", "tool_calls": [CALL]}, {"role": "tool", "content": "5"},
            {"role": "assistant", "content": "5"}]
    errored = [{"role": "assistant", "content": "", "tool_calls": [CALL]},
               {"role": "tool", "content": "{'error': 'ZeroDivisionError: division by zero'}"},
               {"role": "assistant", "content": "5"}]
    malformed = [{"role": "assistant", "content": "<tool_call>\nnot json\n</tool_call>"}]
    unanswered = good[:2]
    plain = [{"role": "assistant", "content": "5"}]
    assert reward([good, errored, malformed, unanswered, plain]) == [1.0, 0.5, 0.0, 0.0, 1.0]
    assert ToolFormat(require_call=True)([plain, good]) == [0.0, 1.0]


def test_sft_on_a_tool_conversation_trains_the_calls_and_answers_not_the_results(tokenizer):
    """SFT's labels over a tool conversation (assistant call, tool result, answer): the model's two turns are
    trained, each through its end-of-turn token; the tool's result and every header are not."""
    import json

    from smolalign.data.encode import ORIGIN, PROBLEM, Encoder

    template = resolve_template("smollm3")
    tokenizer.chat_template = template.text
    arguments = {"code": "print(123 * 456)"}
    row = {ORIGIN: "tools.jsonl#0", "chat_template_kwargs": {"enable_thinking": False},
           "tools": [{"type": "function", "function": {"name": "python", "description": "Run code.",
                                                       "parameters": {"type": "object", "properties": {}}}}],
           "messages": [{"role": "user", "content": "What is 123 * 456?"},
                        {"role": "assistant", "content": "", "tool_calls": [
                            {"type": "function", "function": {"name": "python", "arguments": arguments}}]},
                        {"role": "tool", "name": "python", "content": "56088"},
                        {"role": "assistant", "content": "The answer is 56088."}]}
    encoded = Encoder(tokenizer, template, "messages")({key: [value] for key, value in row.items()})
    ids, labels = list(encoded["input_ids"][0]), list(encoded["labels"][0])
    assert encoded[PROBLEM] == [""]
    trained = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label != -100])
    call = json.dumps({"name": "python", "arguments": arguments})
    assert trained == f"<tool_call>\n{call}\n</tool_call><|im_end|>The answer is 56088.<|im_end|>"
    untrained = tokenizer.decode([i for i, label in zip(ids, labels, strict=True) if label == -100])
    assert "<tool_response>\n56088\n</tool_response>" in untrained

    row["messages"][1]["tool_calls"][0]["function"]["name"] = "calculator"
    problems = Encoder(tokenizer, template, "messages")({key: [value] for key, value in row.items()})
    assert problems[PROBLEM] == ["messages.1.tool_calls.0 calls an unknown tool 'calculator'; the tools are: python"]

    arguments_ok = '{"code": "print(1)"}'
    row["messages"][1]["tool_calls"][0]["function"] = {"name": "python", "arguments": arguments_ok}
    encoded = Encoder(tokenizer, template, "messages")({key: [value] for key, value in row.items()})
    trained = tokenizer.decode([i for i, label in zip(encoded["input_ids"][0], encoded["labels"][0], strict=True)
                                if label != -100])
    assert trained.startswith('<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>')
    for arguments, says in [('{"code": ', "arguments is text that is not JSON"),
                            ('"print(1)"', "arguments must be a mapping .*got a string"),
                            (None, "arguments must be a mapping .*got null")]:
        row["messages"][1]["tool_calls"][0]["function"] = {"name": "python", "arguments": arguments}
        problems = Encoder(tokenizer, template, "messages")({key: [value] for key, value in row.items()})
        assert re.match(f"messages.1.tool_calls.0.function.{says}", problems[PROBLEM][0]), problems[PROBLEM]

    row["messages"][1]["tool_calls"][0]["function"] = {"name": "python", "arguments": arguments_ok}
    tokenizer.chat_template = resolve_template("chatml").text   # renders no tool call: the turn would train empty
    problems = Encoder(tokenizer, resolve_template("chatml"), "messages")({key: [value] for key, value in row.items()})
    assert problems[PROBLEM][0].startswith("messages.1.tool_calls: template chatml drops an assistant's tool calls")


def test_a_generated_turn_is_read_as_trls_parser_reads_it(tokenizer):
    """smolalign's own reader of a turn (eval's tool loop) against TRL's parser with smollm3's response template, on
    the forms a model writes: a call, a call after text, a think block, two calls, and malformed ones."""
    from trl.chat_template_utils import parse_response

    from smolalign.tools.calls import parse_turn
    from smolalign.tools.rendering import install_response_parser

    tokenizer.chat_template = resolve_template("smollm3").text
    install_response_parser(tokenizer, "smollm3", {"enable_thinking": True})
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "2 + 3?"}], add_generation_prompt=True,
                                           tokenize=True, return_dict=False, enable_thinking=True)
    code = '{"name": "python", "arguments": {"code": "print(2 + 3)"}}'
    turns = [f"<tool_call>\n{code}\n</tool_call>", f"Let me run it.\n<tool_call>\n{code}\n</tool_call>",
             f"<think>\nI will compute it.\n</think>\n<tool_call>\n{code}\n</tool_call>",
             f"<tool_call>\n{code}\n</tool_call>\n<tool_call>\n{code}\n</tool_call>", "The answer is 5.",
             '<tool_call>\n{"name": python}\n</tool_call>', "<tool_call>\n[1, 2]\n</tool_call>"]
    for turn in turns:
        theirs = parse_response(tokenizer, tokenizer.encode(turn + "<|im_end|>", add_special_tokens=False),
                                prefix=prompt)
        mine = parse_turn(turn + "<|im_end|>")
        assert mine.get("tool_calls") == theirs.get("tool_calls"), turn
        assert read_trajectory([mine]).malformed_calls == read_trajectory([theirs]).malformed_calls, turn


def test_calls_run_as_trl_runs_them():
    from smolalign.tools.calls import run_calls

    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: One.
            b: Two.
        """
        return a + b

    calls = [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}},
             {"type": "function", "function": {"name": "add", "arguments": {"a": 2}}},
             {"type": "function", "function": {"name": "mul", "arguments": {}}}]
    results = run_calls(calls, {"add": add})
    assert [r["content"] for r in results[:1]] == ["5"]
    assert is_tool_error(results[1]["content"]) and "missing 1 required positional argument" in results[1]["content"]
    assert results[2]["content"] == "{'error': 'Tool mul not found.'}"
