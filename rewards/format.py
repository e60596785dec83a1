"""Format rewards: think tags consistent with the row's mode, and open-r1-style tag counting.

`think_format` scores 1.0 when the completion has the shape its row's mode asks for, else 0.0:
- think: exactly one `<think>` at the start, non-empty reasoning, one `</think>`, then a non-empty answer;
- no_think: a non-empty answer with no reasoning: no think tags at all (SmolLM3's template puts the empty block in
  the prompt), or one empty `<think></think>` block at the start and nothing else in it.
"""

import re

from rewards.text import THINK_CLOSE, THINK_OPEN, column, completion_text, split_think
from rewards.think_mode import row_mode


def think_shape_ok(text: str, mode: str) -> bool:
    opens, closes = text.count(THINK_OPEN), text.count(THINK_CLOSE)
    if mode == "no_think":
        if opens == closes == 0:
            return bool(text.strip())
        parts = split_think(text)
        return opens == closes == 1 and parts is not None and not parts[0] and bool(parts[1])
    parts = split_think(text)
    return opens == closes == 1 and parts is not None and bool(parts[0]) and bool(parts[1])


class ThinkFormat:
    """`think_format`: 1.0 when the completion has the shape its row's mode asks for (think: one closed, non-empty
    think block, then an answer; no_think: an answer with no reasoning), else 0.0.

    Args:
        mode: auto reads each row's mode (a /think or /no_think flag in its system message, else its
            chat_template_kwargs.enable_thinking, else `default_mode`); think or no_think scores every row in that mode.
        default_mode: the mode of a row that states none, when `mode` is auto.
    """

    score_range = (0.0, 1.0)
    """The lowest and highest score a completion can get (pairs thresholds are checked against it)."""

    def __init__(self, mode: str = "auto", default_mode: str = "think"):
        if mode not in ("auto", "think", "no_think") or default_mode not in ("think", "no_think"):
            raise ValueError("mode must be auto, think or no_think; default_mode think or no_think")
        self.mode, self.default_mode = mode, default_mode
        self.required_columns = ()
        self.__name__ = "think_format"

    def __call__(self, completions: list, prompts: list | None = None, **columns) -> list[float]:
        prompts = prompts if prompts is not None else [None] * len(completions)
        kwargs = column(columns, "chat_template_kwargs", len(completions))
        out = []
        for completion, prompt, row_kwargs in zip(completions, prompts, kwargs, strict=True):
            mode = self.mode if self.mode != "auto" else row_mode(prompt, row_kwargs, self.default_mode)
            out.append(1.0 if think_shape_ok(completion_text(completion), mode) else 0.0)
        return out


class TagCount:
    """`tag_count`: an equal share of 1.0 for each tag that appears exactly once (open-r1's partial-credit format
    reward).

    Args:
        tags: the strings counted; default the think tags with the newlines open-r1 expects (`"<think>\\n"`,
            `"\\n</think>\\n"`).
    """

    score_range = (0.0, 1.0)
    """The lowest and highest score a completion can get (pairs thresholds are checked against it)."""

    def __init__(self, tags: list[str] | None = None):
        self.tags = list(tags or ["<think>\n", "\n</think>\n"])
        self.required_columns = ()
        self.__name__ = "tag_count"

    def __call__(self, completions: list, **columns) -> list[float]:
        return [sum(completion_text(c).count(tag) == 1 for tag in self.tags) / len(self.tags) for c in completions]




class AnswerFormat:
    """`answer_format`: 1.0 when the completion is laid out as open-r1's format reward asks,
    `<think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>`, else 0.0. With param `language` (open-r1's code_format), the
    answer must also hold a fenced ```language block; a row's `language` column overrides it.

    Args:
        language: open-r1's code_format: the answer must also hold a fenced code block of this language (a row's
            `language` column overrides it); none checks the layout only.
    """

    score_range = (0.0, 1.0)
    """The lowest and highest score a completion can get (pairs thresholds are checked against it)."""

    def __init__(self, language: str | None = None):
        self.language = language
        self.required_columns = ()
        self.__name__ = "answer_format"

    def pattern(self, language: str | None) -> re.Pattern:
        code = rf".*?```{re.escape(language)}.*?```" if language else ""
        # MULTILINE as open-r1 has it: `$` also matches before a newline, so text after the last line is tolerated.
        return re.compile(rf"^<think>\n.*?\n</think>\n<answer>\n.*?{code}.*?\n</answer>$", re.DOTALL | re.MULTILINE)

    def __call__(self, completions: list, **columns) -> list[float]:
        languages = column(columns, "language", len(completions)) if self.language else [None] * len(completions)
        return [1.0 if self.pattern(row_language or self.language).match(completion_text(c)) else 0.0
                for c, row_language in zip(completions, languages, strict=True)]
