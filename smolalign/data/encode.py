"""Tokenization with loss masks: rows -> `input_ids` + `labels` (-100 where nothing is trained).

What is ours: conversations are rendered with the template's {% generation %} spans, the rendered texts are
tokenized in one batched call of the fast tokenizer, and a token is trained when its characters overlap a trained
span. That is the rule `apply_chat_template(return_assistant_tokens_mask=True)` applies one row at a time, done in
batch. Each row is also checked here: its end-of-turn tokens are trained, the think mode it asked for is the one
rendered, and something is trained at all.
"""

import copy
import functools
import json
from dataclasses import dataclass, field
from typing import Any

from rewards.text import THINK_OPEN, split_think
from rewards.think_mode import row_mode
from smolalign.data.mixture import ORIGIN, decoded
from smolalign.data.rows import kind, messages_problem, missing_problem, tool_names, unknown_tool_problem
from smolalign.errors import SmolalignError
from smolalign.templates.registry import ChatTemplate
from smolalign.templates.render import render, rendered_think_mode
from smolalign.tools.rendering import tool_rendering_gap

PROBLEM = "_problem"
"""Column holding what is wrong with a row ("" when nothing is)."""
UNTRAINED = "no token is trained"
EMPTY_ANSWER = "an answer is empty (trained, it teaches the model to end its turn at once)"
"""A row problem that `data.on_untrained: drop` skips (with a count) instead of failing, as for preference pairs."""


@dataclass
class LossMask:
    assistant_only: bool = True
    """Conversations: train only on what the template marks with {% generation %}."""
    completion_only: bool = True
    """Prompt/completion rows: train only on the completion."""


def require_generation_markers(template: ChatTemplate, fmt: str, mask: LossMask) -> None:
    """Assistant-only loss on conversations needs {% generation %} markers, or nothing would be trained."""
    if fmt == "messages" and mask.assistant_only and not template.has_generation_markers:
        raise SmolalignError(
            f"template {template.name} has no {{% generation %}} markers, so assistant-only loss would train on "
            "nothing; use a template with markers (smollm3, chatml) or set train.assistant_only_loss: false")


@dataclass
class Encoder:
    tokenizer: Any
    template: ChatTemplate
    format: str
    mask: LossMask = field(default_factory=LossMask)
    template_kwargs: dict = field(default_factory=dict)
    """Defaults for every row; a row's own chat_template_kwargs override them."""

    def __post_init__(self) -> None:
        self.special_tokens = {k: v for k, v in self.tokenizer.special_tokens_map.items() if isinstance(v, str)}
        self.eos_token = self.tokenizer.eos_token
        self.eos_id = self.tokenizer.eos_token_id
        self.backend = _plain_backend(self.tokenizer)
        require_generation_markers(self.template, self.format, self.mask)

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        rows = [{k: batch[k][i] for k in batch} for i in range(len(batch[ORIGIN]))]
        rendered = [self.render_row(row) for row in rows]
        out: dict[str, list] = {"input_ids": [], "labels": [], PROBLEM: []}
        for (text, spans, problem, from_template), (ids, offsets) in zip(
                rendered, self.tokenize([r[0] for r in rendered]), strict=True):
            labels = ids if spans is None else masked_labels(ids, offsets, spans, len(text))
            if not problem and from_template and spans:
                problem = self.end_of_turn_problem(ids, labels)
            if not problem and not (labels != -100).any():
                problem = UNTRAINED
            out["input_ids"].append(ids)
            out["labels"].append(labels)
            out[PROBLEM].append(problem)
        return out

    def tokenize(self, texts: list[str]) -> list[tuple]:
        """(ids, character offsets) per text as numpy arrays, from one batched call of the Rust tokenizer."""
        import numpy as np

        if self.backend is not None:
            encodings = self.backend.encode_batch(texts, add_special_tokens=False)
            return [(np.asarray(e.ids, dtype=np.int64), np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2))
                    for e in encodings]
        encoded = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True,
                                 return_attention_mask=False)
        return [(np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64).reshape(-1, 2))
                for ids, offsets in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)]

    def render_row(self, row: dict) -> tuple[str, list[tuple[int, int]] | None, str, bool]:
        """(text, trained character spans or None for all, problem, whether spans came from the template)."""
        problem = self.row_problem(row)
        if problem:
            return "", [], problem, False
        if self.format == "text":
            text = row["text"] or ""
            return (text if text.endswith(self.eos_token) else text + self.eos_token), None, "", False
        kwargs = {**self.template_kwargs, **_row_kwargs(row.get("chat_template_kwargs"))}
        tools = _tools(row.get("tools"))
        if self.format == "messages":
            messages = decoded(row["messages"])
            text, spans = render(self.template, messages, tools=tools, special_tokens=self.special_tokens, **kwargs)
            problem = self.think_problem(messages, kwargs, text) or self.answers_problem(messages, messages, kwargs)
            return text, (spans if self.mask.assistant_only else None), problem, self.mask.assistant_only
        prompt, completion = decoded(row["prompt"]), decoded(row["completion"])
        if isinstance(prompt, str):
            if not completion.strip():
                return "", [], f"completion: {EMPTY_ANSWER}", False
            text = prompt + completion
            text = text if text.endswith(self.eos_token) else text + self.eos_token
            return text, ([(len(prompt), len(text))] if self.mask.completion_only else None), "", False
        head, _ = render(self.template, prompt, add_generation_prompt=True, tools=tools,
                         special_tokens=self.special_tokens, **kwargs)
        text, spans = render(self.template, prompt + completion, tools=tools, special_tokens=self.special_tokens,
                             **kwargs)
        start = common_prefix_length(head, text)
        completion_span = [(start, len(text))]
        trained = _intersect(spans, start) if self.template.has_generation_markers else completion_span
        problem = self.think_problem(prompt, kwargs, text) or self.answers_problem(prompt, completion, kwargs,
                                                                                   "completion")
        return text, (trained if self.mask.completion_only else None), problem, self.mask.completion_only

    def row_problem(self, row: dict) -> str:
        """What keeps a row from rendering as written (see `data.rows`): a missing, mistyped or malformed field."""
        columns = {"text": ("text",), "messages": ("messages",)}.get(self.format, ("prompt", "completion"))
        values = {c: decoded(row.get(c)) for c in columns}
        for column, value in values.items():
            if value is None:
                return missing_problem(row, column, columns)
        if self.format == "text":
            return "" if isinstance(values["text"], str) else f"text must be a string, got {kind(values['text'])}"
        known = tool_names(decoded(row.get("tools")))
        if self.format == "messages":
            return messages_problem(values["messages"]) or (
                unknown_tool_problem(values["messages"], known) if known is not None else "")
        prompt, completion = values["prompt"], values["completion"]
        if isinstance(prompt, str):
            return "" if isinstance(completion, str) else f"completion must be text, as the prompt is, got {kind(completion)}"
        return (messages_problem(prompt, "prompt") or messages_problem(completion, "completion") or (
            unknown_tool_problem(completion, known, "completion") if known is not None else ""))

    def think_problem(self, messages: list[dict], kwargs: dict, text: str) -> str:
        if not self.template.is_hybrid:
            return ""
        wanted, got = row_mode(messages, kwargs), rendered_think_mode(text)
        if got is not None and got != wanted:
            return f"asked for {wanted} mode but the template rendered {got}"
        return ""

    def answers_problem(self, conversation: list[dict], answers: list[dict], kwargs: dict,
                        field: str = "messages") -> str:
        """An assistant answer that trains the wrong thing: empty (nothing after its think block and no tool call:
        EMPTY_ANSWER, naming the turn), tool calls the template drops, or reasoning (a <think> block with text) in a
        no_think row, which teaches the model to reason where the mode says not to. With strip_history_reasoning,
        turns before the last user turn lose their reasoning and are not checked for it."""
        no_think = self.template.is_hybrid and row_mode(conversation, kwargs) == "no_think"
        users = [i for i, m in enumerate(answers) if isinstance(m, dict) and m.get("role") == "user"]
        kept_from = users[-1] if users and kwargs.get("strip_history_reasoning") else 0
        for index, message in enumerate(answers):
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            text = message.get("content") if isinstance(message.get("content"), str) else ""
            where = f"{field}.{index}"
            if message.get("tool_calls") and self.tool_gap is not None:
                return (f"{where}.tool_calls: template {self.template.name} drops an assistant's tool calls (it "
                        f"leaves out {self.tool_gap!r}), so the turn would train without them; use template "
                        "smollm3")
            reasoning, answer = think_parts(text)
            if not answer.strip() and not message.get("tool_calls"):
                return f"{where}: {EMPTY_ANSWER}"
            if no_think and index >= kept_from and reasoning:
                return (f"{where} reasons (a <think> block with text) in no_think mode, which would teach the model "
                        "to reason where the mode says not to; take the reasoning out, or give the row think mode")
        return ""

    @functools.cached_property
    def tool_gap(self) -> str | None:
        """What of a tool exchange the template drops (None: it renders it all), asked once."""
        return tool_rendering_gap(self.template)

    def end_of_turn_problem(self, ids, labels) -> str:
        """Every trained span must end with the end-of-turn token, or the model never learns to stop."""
        import numpy as np

        trained = labels != -100
        span_ends = trained & ~np.append(trained[1:], False)
        for end in np.flatnonzero(span_ends & (ids != self.eos_id)):
            # Whitespace trained after the end-of-turn token is accepted: the handbook's SmolLM3 training template
            # closes each answer with "<|im_end|>\n" inside {% generation %}.
            start = end
            while start > 0 and trained[start] and ids[start] != self.eos_id and self._is_whitespace(ids[start]):
                start -= 1
            if not (trained[start] and ids[start] == self.eos_id):
                token = self.tokenizer.convert_ids_to_tokens(int(ids[end]))
                return (f"a trained span ends with {token!r}, not the end-of-turn token {self.eos_token!r} "
                        "(whitespace may follow it): the model would not learn to stop")
        return ""

    def _is_whitespace(self, token_id) -> bool:
        return not self.tokenizer.decode([int(token_id)]).strip()


def masked_labels(ids, offsets, spans: list[tuple[int, int]], length: int):
    """`ids` where a token's characters overlap a span, -100 elsewhere (numpy arrays in and out)."""
    import numpy as np

    if not spans:
        return np.full_like(ids, -100)
    inside = np.zeros(length + 1, dtype=np.int32)
    for start, end in spans:
        inside[start] += 1
        inside[end] -= 1
    covered = np.concatenate([[0], np.cumsum(np.cumsum(inside)[:length] > 0)])
    trained = covered[offsets[:, 1]] - covered[offsets[:, 0]] > 0
    return np.where(trained, ids, -100)


def _plain_backend(tokenizer):
    """A copy of the fast tokenizer's Rust backend with padding and truncation off, or None for slow tokenizers."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    backend = copy.deepcopy(backend)
    backend.no_padding()
    backend.no_truncation()
    return backend


def _tools(value: Any) -> list | None:
    """Per-row tools: a list, or a JSON string as TRL datasets store them; elements given as JSON strings are decoded
    too, so a template prints each definition once, not as an encoded string."""
    value = decoded(value)
    if isinstance(value, str):
        value = _json_tool(value)
    if isinstance(value, list):
        value = [_json_tool(tool) if isinstance(tool, str) else tool for tool in value]
    return value or None


def _json_tool(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise SmolalignError(f"a tools value is neither a list nor JSON: {text[:80]!r}") from None


def _row_kwargs(value: Any) -> dict:
    value = decoded(value)
    if not value:
        return {}
    if not isinstance(value, dict):
        raise SmolalignError(f"chat_template_kwargs must be a mapping, got {value!r}")
    return {k: v for k, v in value.items() if v is not None}


def common_prefix_length(a, b) -> int:
    """How many leading items (characters, token ids) two sequences share."""
    if b[:len(a)] == a:
        return len(a)
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _intersect(spans: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    return [(max(s, start), e) for s, e in spans if e > start]



def think_parts(text: str) -> tuple[str, str]:
    """(reasoning, answer) of an answer (`rewards.text.split_think`): a closed think block opening it and what follows;
    an unclosed one is all reasoning, and the whole text stands as the answer; no block, no reasoning."""
    parts = split_think(text)
    if parts is not None:
        return parts
    opened = text.lstrip().startswith(THINK_OPEN)
    return (text.lstrip()[len(THINK_OPEN):].strip() if opened else ""), text
