"""Length rewards, in tokens: DAPO's soft overlong punishment (with separate limits for think and no_think rows,
as SmolLM3 needed), open-r1's cosine-scaled accuracy, and an n-gram repetition penalty.

Token counts come from `completion_ids` (TRL passes them); without them (e.g. `smolalign rewards test` on a file of
texts) the `tokenizer` parameter, a tokenizer directory or hub id, counts the tokens.
"""

import math
from typing import Any

from rewards.math import MathAccuracy
from rewards.text import column, completion_text
from rewards.think_mode import row_mode


def soft_overlong(length: int, max_length: int, cache: int) -> float:
    """DAPO Eq. 13: 0 up to max_length - cache, then falling linearly to -1 at max_length, -1 beyond."""
    if length <= max_length - cache:
        return 0.0
    if length <= max_length:
        return (max_length - cache - length) / cache
    return -1.0


class TokenCounter:
    def __init__(self, tokenizer: str | None):
        self.source, self._tokenizer = tokenizer, None

    def lengths(self, completions: list, completion_ids: list | None) -> list[int]:
        if completion_ids is not None:
            return [len(ids) for ids in completion_ids]
        if self.source is None:
            raise ValueError("this reward counts tokens: pass completion_ids, or set the tokenizer parameter "
                             "(a model source) to count them")
        if self._tokenizer is None:
            from pathlib import Path

            from transformers import AutoTokenizer

            local = Path(self.source).expanduser()
            self._tokenizer = AutoTokenizer.from_pretrained(str(local) if local.exists() else self.source)
        texts = [completion_text(c) for c in completions]
        return [len(ids) for ids in self._tokenizer(texts, add_special_tokens=False)["input_ids"]]


class SoftOverlong:
    """`soft_overlong`: DAPO's soft overlong punishment, 0 up to `max_length - cache` tokens, then falling linearly
    to -1 at `max_length`, -1 beyond; think rows can have limits of their own.

    Args:
        max_length: tokens at which the penalty reaches -1 (no_think rows, and think rows without their own limit).
        cache: the width of the linear window before `max_length`, in tokens (at most `max_length`).
        think_max_length: `max_length` for think rows; default: `max_length`.
        think_cache: `cache` for think rows; default: `cache`.
        mode: auto reads each row's mode (system flag, else chat_template_kwargs); think or no_think applies that
            mode's limits to every row.
        tokenizer: a tokenizer directory or hub id that counts the tokens when the caller passes no completion ids
            (`smolalign rewards test` on a file of texts); training passes them.
    """

    def __init__(self, max_length: int, cache: int, think_max_length: int | None = None,
                 think_cache: int | None = None, mode: str = "auto", tokenizer: str | None = None):
        for name, value in (("max_length", max_length), ("cache", cache), ("think_max_length", think_max_length),
                            ("think_cache", think_cache)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise ValueError(f"{name} must be a positive number of tokens")
        if mode not in ("auto", "think", "no_think"):
            raise ValueError(f"mode must be auto, think or no_think, got {mode!r}")
        self.limits = {"no_think": (max_length, cache),
                       "think": (think_max_length or max_length, think_cache or cache)}
        for prefix, (limit, window) in zip(("", "think_"), self.limits.values(), strict=True):
            if window > limit:
                defaults = "; think_cache defaults to cache, think_max_length to max_length" if prefix else ""
                raise ValueError(f"{prefix}cache ({window}) must not exceed {prefix}max_length ({limit}){defaults}")
        self.mode = mode
        self.counter = TokenCounter(tokenizer)
        self.required_columns = ()
        self.__name__ = "soft_overlong"

    def __call__(self, completions: list, completion_ids: list | None = None, prompts: list | None = None,
                 **columns) -> list[float]:
        lengths = self.counter.lengths(completions, completion_ids)
        prompts = prompts if prompts is not None else [None] * len(completions)
        kwargs = column(columns, "chat_template_kwargs", len(completions))
        out = []
        for length, prompt, row_kwargs in zip(lengths, prompts, kwargs, strict=True):
            mode = self.mode if self.mode != "auto" else row_mode(prompt, row_kwargs)
            out.append(soft_overlong(length, *self.limits[mode]))
        return out


class CosineScaled:
    """`cosine_length`: accuracy scaled by length along a cosine (open-r1): short right answers score most, long
    wrong ones are punished least; None when the gold answer does not parse.

    Args:
        max_length: the length in tokens at which the cosine ends (longer answers score as this length).
        min_value_wrong: the score of a wrong answer of length 0 (the harshest).
        max_value_wrong: the score of a wrong answer of `max_length` tokens or more.
        min_value_correct: the score of a right answer of `max_length` tokens or more.
        max_value_correct: the score of a right answer of length 0 (the best).
        gold_column: the dataset column holding the gold answer (scored as math_accuracy scores it).
        tokenizer: a tokenizer directory or hub id that counts the tokens when the caller passes no completion ids.
    """

    def __init__(self, max_length: int, min_value_wrong: float = -1.0, max_value_wrong: float = -0.5,
                 min_value_correct: float = 0.5, max_value_correct: float = 1.0, gold_column: str = "solution",
                 tokenizer: str | None = None):
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length <= 0:
            raise ValueError("max_length must be a positive number of tokens")
        self.max_length = max_length
        self.wrong, self.correct = (min_value_wrong, max_value_wrong), (min_value_correct, max_value_correct)
        self.accuracy = MathAccuracy(gold_column)
        self.row_problem = self.accuracy.row_problem  # the same gold answers: refused by the same data check
        self.counter = TokenCounter(tokenizer)
        self.required_columns = (gold_column,)
        self.__name__ = "cosine_length"

    def __call__(self, completions: list, completion_ids: list | None = None, **columns) -> list[float | None]:
        correct = self.accuracy(completions, **columns)
        lengths = self.counter.lengths(completions, completion_ids)
        out = []
        for is_correct, length in zip(correct, lengths, strict=True):
            if is_correct is None:
                out.append(None)
                continue
            low, high = self.correct if is_correct else (self.wrong[1], self.wrong[0])
            progress = min(length, self.max_length) / self.max_length
            out.append(low + 0.5 * (high - low) * (1.0 + math.cos(math.pi * progress)))
        return out


class Repetition:
    """`repetition`: max_penalty × the share of repeated word n-grams (0 for text without repeats).

    Args:
        ngram_size: the number of words in each n-gram compared.
        max_penalty: the score when every n-gram is a repeat (at most 0).
    """

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0):
        if max_penalty > 0:
            raise ValueError("max_penalty must be <= 0")
        if ngram_size < 1:
            raise ValueError(f"ngram_size must be at least 1, got {ngram_size}")
        self.ngram_size, self.max_penalty = ngram_size, max_penalty
        self.required_columns = ()
        self.__name__ = "repetition"

    def penalty(self, text: str) -> float:
        words = text.lower().split()
        if len(words) < self.ngram_size:
            return 0.0
        grams = [tuple(words[i:i + self.ngram_size]) for i in range(len(words) - self.ngram_size + 1)]
        return (1 - len(set(grams)) / len(grams)) * self.max_penalty

    def __call__(self, completions: list, **columns: Any) -> list[float]:
        return [self.penalty(completion_text(c)) for c in completions]
