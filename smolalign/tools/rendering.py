"""Whether a chat template can carry a tool conversation, checked on the tokenizer before any model loads, and the
response parser that reads the model's tool calls back out of its tokens.

TRL's tool loop needs three things of the tokenizer (GRPOTrainer checks the first two only when it is built, after
the model loaded): the template renders a whole exchange (assistant tool call, tool result) without dropping a part;
it preserves prefixes (an earlier turn renders the same whatever follows, since TRL appends the tool result's tokens
to the generated ones); and a response parser turns generated tokens into a message with `tool_calls`. TRL knows the
parsers of templates it ships; smolalign's `smollm3`, and any template whose assistant turn is
`<|im_start|>assistant\\n`, an optional think block, then `<tool_call>{json}</tool_call>` blocks (the Hermes form
SmolLM3 was trained on) use the parser of that form. A parser is accepted only when it reads back, from the
template's own rendering, the very call that was rendered.
"""

from smolalign.errors import SmolalignError
from smolalign.templates.render import render

_PROBE_CALL = {"name": "probe_tool", "arguments": {"x": 1, "label": "two words"}}


def _probe_schema() -> dict:
    return {"type": "function", "function": {
        "name": "probe_tool", "description": "A tool used to check the template.",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer", "description": "a number"},
                                                        "label": {"type": "string", "description": "a text"}},
                       "required": ["x", "label"]}}}


def _reads_back(tokenizer, template_kwargs: dict) -> bool:
    from trl.chat_template_utils import parse_response

    schema = [_probe_schema()]
    messages = [{"role": "user", "content": "Call the tool."},
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": _PROBE_CALL}]}]
    prompt = tokenizer.apply_chat_template(messages[:1], tools=schema, add_generation_prompt=True, tokenize=True,
                                           return_dict=False, **template_kwargs)
    full = tokenizer.apply_chat_template(messages, tools=schema, tokenize=True, return_dict=False, **template_kwargs)
    if list(full[:len(prompt)]) != list(prompt):
        return False
    parsed = parse_response(tokenizer, list(full[len(prompt):]), prefix=list(prompt), tools=schema)
    calls = parsed.get("tool_calls") or []
    return len(calls) == 1 and calls[0].get("function") == _PROBE_CALL


def install_response_parser(tokenizer, template_name: str, template_kwargs: dict) -> None:
    """Give `tokenizer` the parser that reads tool calls out of generated tokens, and check the template can carry a
    tool conversation (exit 2 naming the template and what it lacks)."""
    from trl.chat_template_utils import (
        add_response_schema,
        is_chat_template_prefix_preserving,
        qwen3_template,
        supports_tool_calling,
    )

    where = f"template {template_name}"
    if not supports_tool_calling(tokenizer):
        raise SmolalignError(f"tools: {where} does not render a tool conversation (an assistant's tool_calls or the "
                             "tool's result is dropped); use template.name smollm3, or a template that renders both")
    if not is_chat_template_prefix_preserving(tokenizer):
        raise SmolalignError(f"tools: {where} renders an earlier turn differently once a tool result follows it, so "
                             "the tool's tokens cannot be appended to the generated ones; use template.name smollm3")
    has_parser = (getattr(tokenizer, "response_template", None) is not None
                  or getattr(tokenizer, "response_schema", None) is not None)
    if not has_parser:
        try:
            add_response_schema(tokenizer)  # the templates TRL ships
        except ValueError:
            tokenizer.response_template = qwen3_template  # the Hermes form: <tool_call>{json}</tool_call>
    if not _reads_back(tokenizer, template_kwargs):
        tokenizer.response_template = None
        raise SmolalignError(f"tools: {where}: the model's tool calls could not be read back from the template's own "
                             "rendering of one (no response parser knows its form); use template.name smollm3")


def tool_rendering_gap(template) -> str | None:
    """What of a whole tool exchange `template` drops (the tools' schemas, an assistant's call with its arguments,
    the tool's result), None when it renders it all."""
    schema = _probe_schema()
    messages = [{"role": "user", "content": "Call the tool."},
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": _PROBE_CALL}]},
                {"role": "tool", "name": "probe_tool", "content": "tool_result_sentinel"}]
    text, _ = render(template, messages, tools=[schema])
    parts = ("A tool used to check the template.", '"label": "two words"', "tool_result_sentinel")
    return next((part for part in parts if part not in text), None)


def check_renders_tools(template) -> None:
    """A template (smolalign renders the prompts itself: `eval`) that renders a whole tool exchange; else exit 2
    naming it."""
    missing = tool_rendering_gap(template)
    if missing is not None:
        raise SmolalignError(f"tools: template {template.name} does not render a tool conversation (it drops "
                             f"{missing!r}); use template smollm3")
