"""Rendering conversations to text plus the character spans the template marks as generated ({% generation %}).

transformers' own renderer does the Jinja work (same sandbox, same AssistantTracker as `apply_chat_template`), so
what smolalign trains on is what `apply_chat_template(..., return_assistant_tokens_mask=True)` would mark.
"""

import json
import re
from typing import Any

from rewards.text import THINK_CLOSE, THINK_OPEN
from smolalign.errors import SmolalignError
from smolalign.templates.registry import ChatTemplate

Span = tuple[int, int]
_PROBE = [{"role": "user", "content": "x"}]
_RENDERED_MODE = re.compile(r"Reasoning Mode: /(no_think|think)\b")


def render(template: ChatTemplate, messages: list[dict], *, add_generation_prompt: bool = False,
           tools: list | None = None, special_tokens: dict | None = None, **kwargs: Any) -> tuple[str, list[Span]]:
    """The rendered text and the generation spans of one conversation (none for a template without markers)."""
    from jinja2 import TemplateError
    from transformers.utils.chat_template_utils import render_jinja_template

    markers = template.has_generation_markers  # asked without them, transformers warns at every render
    try:
        texts, spans = render_jinja_template(
            conversations=[with_arguments_as_mappings(messages)], tools=tools, chat_template=template.text,
            return_assistant_tokens_mask=markers, add_generation_prompt=add_generation_prompt,
            **{**(special_tokens or {}), **kwargs},
        )
    except TemplateError as exc:
        raise SmolalignError(f"template {template.name} failed to render: {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a value of a type the template cannot use
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "none"
        raise SmolalignError(f"template {template.name} failed to render ({type(exc).__name__}: {exc}); its kwargs "
                             f"were {given} (template.kwargs, a row's chat_template_kwargs): check their types") from None
    return texts[0], [tuple(s) for s in spans[0]] if markers else []


def with_arguments_as_mappings(messages: list[dict]) -> list[dict]:
    """The messages with each tool call's arguments given as JSON text (OpenAI's form) parsed into the mapping they
    write, so that a template prints one JSON form whichever way a row gave them (spacing, escapes). Text that is
    not a JSON object stays as it is: the row check refuses it (`data.rows.tool_calls_problem`)."""
    if not isinstance(messages, list) or not any(isinstance(m, dict) and m.get("tool_calls") for m in messages):
        return messages
    out = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list):
            message = {**message, "tool_calls": [_parsed_call(call) for call in calls]}
        out.append(message)
    return out


def _parsed_call(call):
    inner = isinstance(call, dict) and isinstance(call.get("function"), dict)
    spec = call["function"] if inner else call
    if not isinstance(spec, dict) or not isinstance(spec.get("arguments"), str):
        return call
    try:
        arguments = json.loads(spec["arguments"])
    except json.JSONDecodeError:
        return call
    if not isinstance(arguments, dict):
        return call
    spec = {**spec, "arguments": arguments}
    return {**call, "function": spec} if inner else spec


def answer_prefill(template, kwargs: dict, special_tokens: dict | None = None) -> str:
    """The part of the generation prompt that belongs to the answer: from the template's `<think>` on, e.g.
    `<think>\n\n</think>\n` for smollm3 in no_think mode; "" when the template prefills no think block (or is
    unknown: None, a server's own template)."""
    if template is None:
        return ""
    with_prompt = render(template, _PROBE, add_generation_prompt=True, special_tokens=special_tokens, **kwargs)[0]
    without = render(template, _PROBE, add_generation_prompt=False, special_tokens=special_tokens, **kwargs)[0]
    generation_prompt = with_prompt[len(without):] if with_prompt.startswith(without) else with_prompt
    start = generation_prompt.find(THINK_OPEN)
    return generation_prompt[start:] if start >= 0 else ""


def opened_think(template, kwargs: dict, special_tokens: dict | None = None) -> str:
    """`answer_prefill` when it opens a think block it does not close (`<think>\n`, as reasoning models' templates
    end their generation prompt: the model writes only `reasoning</think>answer`), else "". What reads a generated
    answer (a reward, a verifier) puts it back in front, or the reasoning reads as the answer."""
    prefill = answer_prefill(template, kwargs, special_tokens)
    return prefill if THINK_OPEN in prefill and THINK_CLOSE not in prefill else ""


def rendered_think_mode(text: str) -> str | None:
    """The mode a SmolLM3-style render announces in its metadata, or None if it announces none."""
    match = _RENDERED_MODE.search(text)
    return match.group(1) if match else None


def trained_after_end_of_turn(template: ChatTemplate) -> str:
    """The whitespace a template trains after an answer's last token (the handbook's SmolLM3 training template
    trains "<|im_end|>\\n"): the tail of the generation span of a one-exchange conversation; "" when none."""
    if not template.has_generation_markers:
        return ""
    try:
        text, spans = render(template, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
    except SmolalignError:
        return ""
    if not spans:
        return ""
    answer = text[spans[-1][0]:spans[-1][1]]
    return answer[len(answer.rstrip()):]
