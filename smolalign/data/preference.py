"""Preference rows -> token ids: `prompt_ids` + `chosen_ids` + `rejected_ids` (pairs) or `prompt_ids` +
`completion_ids` + `label` (unpaired, for KTO), rendered with smolalign's template and checked row by row.

The completion of a conversational row is exactly what the template's generation span marks after the prompt's
generation prompt (the answer and its end-of-turn token), so the model is scored on what it would generate. Checks,
each naming the row: a pair whose chosen and rejected conversations have different prompts, a template that renders
the prompt differently once an answer follows, an answer that does not end with the end-of-turn token, a think mode
other than the one asked for, an empty answer, and identical chosen and rejected answers (no training signal).
"""

import sys
from dataclasses import dataclass

from smolalign.data.encode import Encoder, _row_kwargs, _tools, common_prefix_length
from smolalign.data.mixture import ORIGIN, decoded
from smolalign.data.rows import missing_problem, text_or_messages_problem
from smolalign.errors import SmolalignError
from smolalign.templates.render import render

PROBLEM = "_problem"
IDENTICAL = "chosen and rejected are identical (no training signal)"
EMPTY = "an answer is empty"
DROPPABLE = (IDENTICAL, EMPTY)
"""Data problems that `data.on_untrained: drop` skips (with a count) instead of failing."""


@dataclass
class PreferenceEncoder(Encoder):
    """Batched: a `datasets.map` function over preference (or unpaired) rows."""

    whole_turns: bool = False
    """A reward model's sides keep what the template writes after the answer's end-of-turn token (ChatML's newline):
    its score is read at the rendered conversation's last token, as TRL's RewardTrainer tokenizes a conversation and
    as a `model:` reward renders one to score it; a plain-text prompt and its answers are rendered as that one-turn
    conversation too."""

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        rows = [{k: batch[k][i] for k in batch} for i in range(len(batch[ORIGIN]))]
        names = ("chosen", "rejected") if self.format == "preference" else ("completion",)
        rendered = [self.render_pair(row, names) for row in rows]
        texts = [text for r in rendered for text in r["texts"]]
        tokens = iter(self.tokenize(texts))
        out: dict[str, list] = {"prompt_ids": [], PROBLEM: [], **{f"{n}_ids": [] for n in names}}
        if self.format == "unpaired":
            out["label"] = []
        for row, r in zip(rows, rendered, strict=True):
            encoded = [next(tokens) for _ in r["texts"]]
            problem = r["problem"] or ""
            prompt_ids, completions = [], [[] for _ in names]
            if not problem:
                prompt_ids, completions, problem = self.split(encoded, r["head"], r["ends"], r["templated"])
            out["prompt_ids"].append(prompt_ids)
            for name, ids in zip(names, completions, strict=True):
                out[f"{name}_ids"].append(ids)
            if self.format == "unpaired":
                label, label_problem = _label(row.get("label"))
                out["label"].append(label)
                problem = problem or label_problem
            out[PROBLEM].append(problem)
        return out

    def render_pair(self, row: dict, names: tuple[str, ...]) -> dict:
        """Texts of prompt + each answer, the prompt's length in characters, and where each answer ends."""
        answers = [decoded(row[n]) for n in names]
        prompt = decoded(row.get("prompt"))
        problem = self.pair_problem(row, prompt, answers, names)
        if problem:
            return {"texts": [], "head": 0, "ends": [], "templated": True, "problem": problem}
        plain = all(isinstance(a, str) for a in answers) and (prompt is None or isinstance(prompt, str))
        if plain and self.whole_turns:  # a reward model is scored on a conversation: rendered as one below
            if prompt is None:
                return {"texts": [], "head": 0, "ends": [], "templated": False,
                        "problem": "a reward model scores an answer to a prompt, and this row has none (plain-text "
                                   "chosen and rejected): give the pairs a prompt column"}
            answers = [a.removesuffix(self.eos_token) for a in answers]  # the template ends the turn
        elif plain:
            prompt = prompt or ""
            texts = [prompt + a if (prompt + a).endswith(self.eos_token) else prompt + a + self.eos_token
                     for a in answers]
            problem = EMPTY if any(not a.strip() for a in answers) else ""
            return {"texts": texts, "head": len(prompt), "ends": [len(t) for t in texts], "templated": False,
                    "problem": problem}
        try:
            prompt, answers = conversation_parts(prompt, answers, names)
        except ValueError as exc:
            return {"texts": [], "head": 0, "ends": [], "templated": True, "problem": str(exc)}
        kwargs = {**self.template_kwargs, **_row_kwargs(row.get("chat_template_kwargs"))}
        tools = _tools(row.get("tools"))
        head, _ = render(self.template, prompt, add_generation_prompt=True, tools=tools,
                         special_tokens=self.special_tokens, **kwargs)
        texts, ends, problem = [], [], ""
        for answer in answers:
            text, spans = render(self.template, prompt + answer, tools=tools, special_tokens=self.special_tokens,
                                 **kwargs)
            if not text.startswith(head):
                problem = problem or ("the template renders the prompt differently once an answer follows, so the "
                                      "answer cannot be separated from it")
            spans = [(s, e) for s, e in spans if e > len(head)]
            ends.append(spans[-1][1] if spans else _end_after_eos(text, self.eos_token, len(head)))
            texts.append(text)
            problem = problem or self.think_problem(prompt + answer, kwargs, text)
            if not any(str(m.get("content") or "").strip() or m.get("tool_calls") for m in answer):
                problem = problem or EMPTY
        return {"texts": texts, "head": len(head), "ends": ends, "templated": True, "problem": problem}

    @staticmethod
    def pair_problem(row: dict, prompt, answers: list, names: tuple[str, ...]) -> str:
        """A missing or malformed prompt or answer (see `data.rows`)."""
        columns = ("prompt", *names)
        for name, answer in zip(names, answers, strict=True):
            problem = missing_problem(row, name, columns) if answer is None else text_or_messages_problem(answer, name)
            if problem:
                return problem
        if prompt is None:
            return missing_problem(row, "prompt", columns) if len(names) == 1 else ""
        return text_or_messages_problem(prompt, "prompt")

    def split(self, encoded: list[tuple], head: int, ends: list[int], templated: bool):
        """(prompt ids, answer ids per answer, problem): prompt tokens end where the prompt's characters end;
        a token straddling the boundary belongs to the answer, and the shared prompt is the common prefix."""
        import numpy as np

        prompts, answers, tails = [], [], []
        for (ids, offsets), end in zip(encoded, ends, strict=True):
            boundary = int(np.searchsorted(offsets[:, 1], head, side="right"))
            stop = int(np.searchsorted(offsets[:, 0], end, side="left"))
            prompts.append(ids[:boundary].tolist())
            answers.append(ids[boundary:stop].tolist())
            tails.append(ids[stop:].tolist() if self.whole_turns and templated else [])
        shared = min(common_prefix_length(prompts[0], p) for p in prompts)
        answers = [p[shared:] + a for p, a in zip(prompts, answers, strict=True)]
        prompt_ids = prompts[0][:shared]
        if any(not a for a in answers):
            return prompt_ids, answers, EMPTY
        if templated and any(a[-1] != self.eos_id for a in answers):
            bad = next(a for a in answers if a[-1] != self.eos_id)
            token = self.tokenizer.convert_ids_to_tokens(bad[-1])
            return prompt_ids, answers, (f"an answer ends with {token!r}, not the end-of-turn token "
                                         f"{self.eos_token!r}: the model would not learn to stop")
        answers = [a + t for a, t in zip(answers, tails, strict=True)]
        if len(answers) == 2 and answers[0] == answers[1]:
            return prompt_ids, answers, IDENTICAL
        return prompt_ids, answers, ""


def conversation_parts(prompt, answers: list, names: tuple[str, ...]) -> tuple[list[dict], list[list[dict]]]:
    """(prompt messages, answer messages per answer). Accepts an explicit prompt (a string or messages) with answers
    that are the assistant turns, possibly repeating the prompt, or no prompt with full conversations that share
    it. Raises ValueError, with a message for the row, when the prompts of the answers differ."""
    answers = [[{"role": "assistant", "content": a}] if isinstance(a, str) else list(a or []) for a in answers]
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if prompt is None:
        if len(answers) == 1:
            raise ValueError("the row has no prompt")
        first, second = answers
        shared = 0
        while shared < min(len(first), len(second)) and first[shared] == second[shared]:
            shared += 1
        # The prompt ends at the last non-assistant message both conversations share.
        while shared and first[shared - 1].get("role") == "assistant":
            shared -= 1
        prompt = first[:shared]
        answers = [first[shared:], second[shared:]]
        if not prompt:
            raise ValueError(f"{names[0]} and {names[1]} have different prompts (their first messages differ)")
    prompt = list(prompt)
    stripped = []
    for name, answer in zip(names, answers, strict=True):
        if answer and answer[0].get("role") != "assistant":
            if answer[:len(prompt)] != prompt:
                raise ValueError(f"{name} does not continue the row's prompt: chosen and rejected must answer the "
                                 "same prompt")
            answer = answer[len(prompt):]
        if not answer or any(m.get("role") != "assistant" for m in answer):
            raise ValueError(f"{name} must be the assistant's answer (assistant messages after the prompt)"
                             if answer else EMPTY)
        stripped.append(answer)
    return prompt, stripped


def _label(value) -> tuple[bool, str]:
    if isinstance(value, bool):
        return value, ""
    if value in (0, 1):
        return bool(value), ""
    return False, f"label must be true or false, got {value!r}"


def _end_after_eos(text: str, eos: str, start: int) -> int:
    found = text.find(eos, start)
    return found + len(eos) if found >= 0 else len(text)


def check_rows(encoded, on_untrained: str):
    """Fail on the first problem row (naming it), or with `on_untrained: drop` skip identical and empty pairs."""
    problems = encoded[PROBLEM]
    hard = [i for i, p in enumerate(problems) if p and not (on_untrained == "drop" and p in DROPPABLE)]
    if hard:
        first = hard[0]
        hint = "; set data.on_untrained: drop to skip such rows" if problems[first] in DROPPABLE else ""
        raise SmolalignError(f"data row {encoded[first][ORIGIN]}: {problems[first]} ({len(hard)} row(s) affected"
                             f"{hint})")
    dropped = sum(1 for p in problems if p)
    if dropped:
        print(f"dropped {dropped} row(s) with identical or empty answers", file=sys.stderr)
        encoded = encoded.select([i for i, p in enumerate(problems) if not p])
    return encoded, dropped
