"""Math accuracy with math-verify: 1.0 when the completion's final answer equals the gold answer, else 0.0.

The gold answer is parsed once per distinct string; a gold answer that does not parse gives None (the sample is
skipped, not punished). Only the answer is scored: reasoning inside think tags is ignored, and math-verify takes
the last expression of the answer, so a different number earlier in the text does not count.
"""

from typing import Any

from rewards.text import answer_part, column, completion_text


class MathAccuracy:
    """`math_accuracy`: params `gold_column` (default "solution") and `timeout_seconds` (per parse or verify)."""

    def __init__(self, gold_column: str = "solution", timeout_seconds: float = 5.0):
        self.gold_column = gold_column
        self.timeout_seconds = timeout_seconds
        self.required_columns = (gold_column,)
        self.__name__ = "math_accuracy"
        self._gold: dict[str, Any] = {}

    def gold(self, value: Any):
        key = str(value)
        if key not in self._gold:
            self._gold[key] = self._parse(key) or None
        return self._gold[key]

    def _parse(self, text: str):
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

        try:
            return parse(text, extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()],
                         parsing_timeout=max(1, int(self.timeout_seconds)))
        except Exception:  # math-verify raises its own timeout and parsing errors
            return []

    def score(self, completion: Any, gold: Any) -> float | None:
        from math_verify import verify

        gold_parsed = self.gold(gold)
        if gold_parsed is None:
            return None
        answer = answer_part(completion_text(completion))
        if not answer or not answer.strip():
            return 0.0
        parsed = self._parse(answer)
        if not parsed:
            return 0.0
        try:
            return 1.0 if verify(gold_parsed, parsed, timeout_seconds=max(1, int(self.timeout_seconds))) else 0.0
        except Exception:
            return 0.0

    def __call__(self, completions: list, **columns) -> list[float | None]:
        golds = column(columns, self.gold_column, len(completions))
        return [self.score(c, g) for c, g in zip(completions, golds, strict=True)]
