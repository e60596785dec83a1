"""Math accuracy with math-verify: 1.0 when the completion's final answer equals the gold answer, else 0.0.

The gold answer is parsed once per distinct string; a gold answer that does not parse gives None (the sample is
skipped, not punished), and `row_problem` lets the data check refuse such rows before training. Only the answer is
scored: reasoning inside think tags is ignored. Within the answer, math-verify reads what `rewards.final_answer`
picks: the whole answer, as math-verify alone would, except where one of its rules (final statement, boxes, asides)
is better. Scoring the last expression of the whole text (what math-verify alone does) rewards an answer whose
justification ends with the gold number ("The answer is 5 (since 2 + 2 = 4)" against 4) and lets a boxed result of
the working outrank the answer stated after it: invitations to reward hacking under GRPO. open-r1 scores only boxed
/ LaTeX answers; its verdicts are kept wherever it gives one (every box read as a set when the gold is a set).
"""

from typing import Any

from rewards.final_answer import THINK, Reading, read
from rewards.text import answer_part, column, completion_text

_PARSED_CACHE = 4096
"""Distinct answer texts whose parse is kept: the generations of one prompt often end in the same `\\boxed{}`."""


def is_set(parsed: list) -> bool:
    """Whether a parsed gold answer is a set of several values ({1, 2}, "1, 2", "x = 1, 2"): then several boxes are
    read as one set (class boxes)."""
    from sympy import FiniteSet

    value = parsed[0] if parsed else None
    value = getattr(value, "rhs", value) if getattr(value, "is_Relational", False) else value
    return isinstance(value, FiniteSet) and len(value) > 1


class MathAccuracy:
    """`math_accuracy`: 1.0 when the answer the completion states (rewards.final_answer: after the last `</think>`,
    its final statement or boxes) is math-verify-equivalent to the row's gold answer, 0.0 when not, None when the gold
    answer is blank or does not parse (one that does not parse is refused before training: smolalign.data.check).

    Args:
        gold_column: the dataset column holding the gold answer.
        timeout_seconds: the time limit of each math-verify parse or comparison (a whole number of seconds, at
            least 1, is used for parsing).
    """

    score_range = (0.0, 1.0)
    """The lowest and highest score a completion can get (pairs thresholds are checked against it)."""

    def __init__(self, gold_column: str = "solution", timeout_seconds: float = 5.0):
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be above 0, got {timeout_seconds}")
        self.gold_column = gold_column
        self.timeout_seconds = timeout_seconds
        self.required_columns = (gold_column,)
        self.__name__ = "math_accuracy"
        self._gold: dict[str, Any] = {}
        self._parsed: dict[str, list] = {}

    def gold(self, value: Any):
        key = str(value)
        if key not in self._gold:
            self._gold[key] = self._parse(key) or None
        return self._gold[key]

    def row_problem(self, row: dict) -> str:
        """Why a data row's gold answer cannot be scored ("" when it can, or when it is blank: a row with no math
        answer, scored None like any unparseable gold)."""
        value = row.get(self.gold_column)
        if value is None or not str(value).strip() or self.gold(value) is not None:
            return ""
        return f"its gold answer {str(value)!r:.60} (column {self.gold_column!r}) does not parse with math-verify"

    def _parse(self, text: str):
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

        if text in self._parsed:
            return self._parsed[text]
        try:
            parsed = parse(text, extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()],
                           parsing_timeout=max(1, int(self.timeout_seconds)))
        except Exception:  # math-verify raises its own timeout and parsing errors
            parsed = []
        if len(self._parsed) >= _PARSED_CACHE:
            self._parsed.clear()
        self._parsed[text] = parsed
        return parsed

    def reading(self, completion: Any, gold_parsed: list) -> Reading:
        """What is read of a completion: rewards.final_answer.read of its answer, with the class think when a think
        block was left out (its reasoning is never read); nothing when there is no answer (a think block never
        closed, or nothing after it)."""
        text = completion_text(completion)
        answer = answer_part(text)
        think = (THINK,) if answer != text else ()
        if not answer or not answer.strip():
            return Reading((), think)
        found = read(answer, is_set(gold_parsed))
        return Reading(found.parts, (*think, *found.rules), found.fallback)

    def _answer(self, found: Reading) -> list:
        """The parsed answer: one parse (a statement's sentence without math: what follows it), or, class boxes, the set
        of every box's value."""
        from latex2sympy2_extended.sets import FiniteSet

        parsed = [self._parse(part) for part in found.parts]
        if len(parsed) == 1:
            return parsed[0] or (self._parse(found.fallback) if found.fallback else [])
        if not parsed or not all(parsed):
            return []
        values = [v for p in parsed for v in (p[0].args if isinstance(p[0], FiniteSet) else (p[0],))]
        return [FiniteSet(*values)]

    def score(self, completion: Any, gold: Any) -> float | None:
        from math_verify import verify

        gold_parsed = self.gold(gold)
        if gold_parsed is None:
            return None
        parsed = self._answer(self.reading(completion, gold_parsed))
        if not parsed:
            return 0.0
        try:
            return 1.0 if verify(gold_parsed, parsed, timeout_seconds=max(1, int(self.timeout_seconds))) else 0.0
        except Exception:
            return 0.0

    def __call__(self, completions: list, **columns) -> list[float | None]:
        golds = column(columns, self.gold_column, len(completions))
        return [self.score(c, g) for c, g in zip(completions, golds, strict=True)]
