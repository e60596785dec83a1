"""The shipped chat templates against hand-written expected renders: think modes, flags, system turn, tools,
determinism, history stripping, and which characters are marked as generated (trained)."""

import json

import pytest

from rewards.think_mode import row_mode
from smolalign.errors import SmolalignError
from smolalign.templates.registry import resolve_template
from smolalign.templates.render import render, rendered_think_mode

SMOLLM3 = resolve_template("smollm3")
HEADER = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\n"
NO_THINK_DEFAULT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n"
STUB = "<think>\n\n</think>\n"


def conversation(system: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"}]


def test_no_think_flag_renders_empty_think_blocks_everywhere():
    text, spans = render(SMOLLM3, conversation("Be brief. /no_think"), add_generation_prompt=True)
    assert text == (
        HEADER + "Reasoning Mode: /no_think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\nhello<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n4<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n")
    assert [text[s:e] for s, e in spans] == ["hello<|im_end|>", "4<|im_end|>"]


def test_think_flag_renders_no_think_blocks():
    text, _ = render(SMOLLM3, conversation("Be brief. /think"), add_generation_prompt=True)
    assert text == (
        HEADER + "Reasoning Mode: /think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nhello<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
        "<|im_start|>assistant\n")


@pytest.mark.parametrize("enable_thinking", [True, False])
def test_thinking_is_not_a_flag(enable_thinking):
    """'/thinking' neither switches the mode nor gets cut out of the instructions (the hub template does both)."""
    text, _ = render(SMOLLM3, conversation("Explain /thinking carefully."), add_generation_prompt=True,
                     enable_thinking=enable_thinking)
    mode, stub = ("/think", "") if enable_thinking else ("/no_think", STUB)
    assert text == (
        HEADER + f"Reasoning Mode: {mode}\n\n## Custom Instructions\n\nExplain /thinking carefully.\n\n<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        f"<|im_start|>assistant\n{stub}hello<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        f"<|im_start|>assistant\n{stub}4<|im_end|>\n"
        f"<|im_start|>assistant\n{stub}")


def test_no_think_x_is_not_a_flag_either():
    text, _ = render(SMOLLM3, conversation("Use /no_think_x mode."))
    assert "Reasoning Mode: /think\n" in text and "Use /no_think_x mode.\n\n<|im_end|>" in text


def test_flag_in_system_message_wins_over_kwarg():
    text, _ = render(SMOLLM3, conversation("/think"), enable_thinking=False)
    assert "Reasoning Mode: /think\n" in text
    assert "## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM" in text  # flag-only: default prompt


def test_no_system_message_uses_kwargs_and_always_closes_the_system_turn():
    messages = [{"role": "user", "content": "hi"}]
    text, _ = render(SMOLLM3, messages, enable_thinking=False, add_generation_prompt=True)
    assert text == (HEADER + "Reasoning Mode: /no_think\n\n## Custom Instructions\n\n" + NO_THINK_DEFAULT +
                    "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" + STUB)
    text, _ = render(SMOLLM3, messages, custom_instructions="Speak French.")
    assert "## Custom Instructions\n\nSpeak French.\n\n<|im_end|>\n<|im_start|>user" in text


def test_tools_render_as_json():
    tool = {"type": "function", "function": {"name": "add", "parameters": {"a": "int"}}}
    text, _ = render(SMOLLM3, [{"role": "user", "content": "hi"}], tools=[tool])
    assert "<tools>\n" + json.dumps(tool) + "\n</tools>" in text
    assert "'name'" not in text
    assert text.count("<|im_end|>") == 2


def test_no_wall_clock_date_unless_given():
    first, _ = render(SMOLLM3, [{"role": "user", "content": "hi"}])
    assert "Today Date" not in first
    dated, _ = render(SMOLLM3, [{"role": "user", "content": "hi"}], date="01 March 2026")
    assert "Knowledge Cutoff Date: June 2025\nToday Date: 01 March 2026\nReasoning Mode" in dated


def test_history_reasoning_kept_by_default_and_stripped_on_request():
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nwhy\n</think>\nA"},
                {"role": "user", "content": "b"}, {"role": "assistant", "content": "<think>\nhow\n</think>\nB"}]
    kept, _ = render(SMOLLM3, messages)
    assert "<|im_start|>assistant\n<think>\nwhy\n</think>\nA<|im_end|>" in kept
    stripped, spans = render(SMOLLM3, messages, strip_history_reasoning=True)
    assert "<|im_start|>assistant\nA<|im_end|>" in stripped
    assert "<|im_start|>assistant\n<think>\nhow\n</think>\nB<|im_end|>" in stripped
    assert [stripped[s:e] for s, e in spans] == ["<think>\nhow\n</think>\nB<|im_end|>"]   # a stripped turn is context
    no_think, spans = render(SMOLLM3, messages, strip_history_reasoning=True, enable_thinking=False)
    assert "<|im_start|>assistant\n<think>\n\n</think>\nA<|im_end|>" in no_think   # a right no_think answer
    assert [no_think[s:e] for s, e in spans] == ["A<|im_end|>", "<think>\nhow\n</think>\nB<|im_end|>"]
    kept_spans = render(SMOLLM3, messages)[1]
    assert [kept[s:e] for s, e in kept_spans] == ["<think>\nwhy\n</think>\nA<|im_end|>",
                                                  "<think>\nhow\n</think>\nB<|im_end|>"]


def test_no_think_turn_that_already_has_a_think_block_gets_no_second_one():
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\n\n</think>\nA"}]
    text, _ = render(SMOLLM3, messages, enable_thinking=False)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\nA<|im_end|>\n")


def test_tool_calls_and_late_system_messages_are_not_dropped():
    messages = [{"role": "user", "content": "add 1 and 2"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]},
                {"role": "tool", "content": "3"}, {"role": "system", "content": "Now be terse."}]
    text, _ = render(SMOLLM3, messages)
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>' in text
    assert ("<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n<|im_start|>system\nNow be terse."
            "<|im_end|>\n") in text


ARGUMENTS = {"a": 1, "b": "two words", "c": "é"}


@pytest.mark.parametrize("arguments", ['{"a": 1, "b": "two words", "c": "é"}', '{"a":1,"b":"two words","c":"\\u00e9"}',
                                       '{\n  "a": 1,\n  "b": "two words",\n  "c": "é"\n}'],
                         ids=["spaced", "compact-escaped", "indented"])
def test_tool_call_arguments_given_as_json_text_train_as_the_object(arguments):
    """OpenAI's form gives a call's arguments as JSON text: the model must learn the object, in one form whichever
    way a row wrote it, not a quoted string."""
    def rendered(args):
        return render(SMOLLM3, [{"role": "user", "content": "add"}, {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "add", "arguments": args}}]}])[0]

    text = rendered(arguments)
    assert text == rendered(ARGUMENTS)
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": "two words", "c": "é"}}\n</tool_call>' in text


def test_the_template_prints_arguments_text_as_it_is_where_trl_renders_it(tiny_dir):
    """TRL and vLLM render through the tokenizer, not smolalign's render: the template itself prints JSON text as
    the object it is, never as a quoted string."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    tokenizer.chat_template = SMOLLM3.text
    arguments = '{"a": 1, "b": "two words"}'
    text = tokenizer.apply_chat_template([{"role": "user", "content": "add"}, {
        "role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "add", "arguments": arguments}}]}], tokenize=False)
    assert f'<tool_call>\n{{"name": "add", "arguments": {arguments}}}\n</tool_call>' in text


def test_chatml_marks_answers_and_end_of_turn():
    text, spans = render(resolve_template("chatml"), conversation("sys"), add_generation_prompt=True)
    assert text == ("<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                    "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                    "<|im_start|>assistant\n4<|im_end|>\n<|im_start|>assistant\n")
    assert [text[s:e] for s, e in spans] == ["hello<|im_end|>", "4<|im_end|>"]


def test_a_template_without_markers_renders_without_transformers_warning(tmp_path, monkeypatch):
    """Asked for generation spans, transformers warns that the template has no {% generation %}; smolalign asks only
    templates that have them (the plan says "without generation markers" once)."""
    from transformers.utils import chat_template_utils

    warned = []
    monkeypatch.setattr(chat_template_utils.logger, "warning_once", lambda *a, **k: warned.append(a))
    plain = tmp_path / "plain.jinja"
    plain.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}")
    for _ in range(2):
        assert render(resolve_template(str(plain)), conversation("sys")) == (
            "<system>sys<user>hi<assistant>hello<user>2+2?<assistant>4", [])
    assert render(resolve_template("chatml"), conversation("sys"))[1]  # spans where there are markers
    assert warned == []


def test_requested_and_rendered_modes():
    assert row_mode(conversation("x /no_think"), {}) == "no_think"
    assert row_mode(conversation("x /thinking"), {"enable_thinking": False}) == "no_think"
    assert row_mode(conversation("x"), {}) == "think"
    assert rendered_think_mode("Reasoning Mode: /no_think\n") == "no_think"
    assert rendered_think_mode("plain") is None


def test_unknown_template_suggests_a_name(tmp_path):
    with pytest.raises(SmolalignError, match="did you mean smollm3"):
        resolve_template("smollm")
    custom = tmp_path / "mine.jinja"
    custom.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert resolve_template(str(custom)).has_generation_markers is False
    with pytest.raises(SmolalignError, match="no such file"):
        resolve_template(str(tmp_path / "missing.jinja"))


def test_hub_template_bugs_are_real_and_ours_fixes_them():
    """The hub original drops the closing of the system turn and is flipped by '/thinking'; ours does neither."""
    template = hub_template()
    messages = conversation("Explain /thinking carefully.")
    text, _ = render(template, messages, enable_thinking=False, strftime_now=lambda fmt: "01 January 2026")
    assert rendered_think_mode(text) == "think"
    assert "Explain ing carefully" in text
    assert "Hugging Face.\n\n<|im_start|>" not in render(SMOLLM3, [{"role": "user", "content": "x"}])[0]


def hub_template():
    """SmolLM3's chat template as HuggingFaceTB/SmolLM3-3B ships it on the hub (tests/fixtures, copied unchanged)."""
    from paths import REPO

    return resolve_template(str(REPO / "tests" / "fixtures" / "smollm3_hub_chat_template.jinja"))


def test_tools_given_as_json_strings_render_as_the_hub_template_prints_them():
    """A list of JSON strings (as datasets store tool definitions) is decoded element-wise, not encoded twice."""
    from smolalign.data.encode import _tools

    tools = [json.dumps({"name": "add", "description": "Add two numbers", "parameters": {"a": {"type": "int"}}}),
             json.dumps({"name": "neg", "parameters": {}})]
    messages = [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "1+1?"}]
    hub, _ = render(hub_template(), messages, xml_tools=tools, strftime_now=lambda fmt: "01 January 2026")
    ours, _ = render(SMOLLM3, messages, xml_tools=_tools(json.dumps(tools)))
    as_strings, _ = render(SMOLLM3, messages, xml_tools=tools)

    def block(text: str) -> str:
        return text[text.index("<tools>\n"):text.index("</tools>\n\nFor each")]

    assert block(ours) == block(hub) == block(as_strings) == "<tools>\n" + "\n".join(tools) + "\n"
    assert '\\"name\\"' not in ours


@pytest.mark.parametrize("system", ["  Indented instructions.", "\n\nAfter blank lines.  \n"])
def test_system_text_keeps_its_leading_whitespace_as_in_the_hub_template(system):
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "x"}]
    hub, _ = render(hub_template(), messages, strftime_now=lambda fmt: "01 January 2026")
    ours, _ = render(SMOLLM3, messages)

    def instructions(text: str) -> str:
        return text.split("## Custom Instructions\n\n", 1)[1].split("\n\n<|im_", 1)[0]

    assert instructions(ours) == instructions(hub) == system.rstrip()
