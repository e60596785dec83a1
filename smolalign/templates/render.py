"""Rendering conversations to text plus the character spans the template marks as generated ({% generation %}).

transformers' own renderer does the Jinja work (same sandbox, same AssistantTracker as `apply_chat_template`), so
what smolalign trains on is what `apply_chat_template(..., return_assistant_tokens_mask=True)` would mark.
"""

import re
from typing import Any

from smolalign.errors import SmolalignError
from smolalign.templates.registry import ChatTemplate

Span = tuple[int, int]
_RENDERED_MODE = re.compile(r"Reasoning Mode: /(no_think|think)\b")


def render(template: ChatTemplate, messages: list[dict], *, add_generation_prompt: bool = False,
           tools: list | None = None, special_tokens: dict | None = None, **kwargs: Any) -> tuple[str, list[Span]]:
    """The rendered text and the generation spans of one conversation (none for a template without markers)."""
    from jinja2 import TemplateError
    from transformers.utils.chat_template_utils import render_jinja_template

    markers = template.has_generation_markers  # asked without them, transformers warns at every render
    try:
        texts, spans = render_jinja_template(
            conversations=[messages], tools=tools, chat_template=template.text,
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
