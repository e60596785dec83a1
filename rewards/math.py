"""Math accuracy with math-verify: 1.0 when the completion's final answer equals the gold answer, else 0.0.

The gold answer is parsed once per distinct string; a gold answer that does not parse gives None (the sample is
skipped, not punished). Only the answer is scored: reasoning inside think tags is ignored. Within the answer, an
explicit anchor decides what is scored, the first that is present of:
1. the last `\boxed{...}`:                      "\boxed{42}. Check: 41" -> 42;
2. the last "answer is" / "answer:", up to the end of its sentence, asides in parentheses left out:
   "The answer is 5 (since 2 + 2 = 4)" -> 5 (against gold 4: 0.0);
3. the last `=` of the last line that has one:    "First 3 + 4 = 7, then 7 × 6 = 42." -> 42;
and without any, the whole answer with asides in parentheses left out, where math-verify takes the last expression:
"The sum is 42. (12 + 30)" -> 42, "We get 42. No wait: 41." -> 41. Scoring the last number of the text (what
math-verify alone does) rewarded an answer whose justification ends with the gold number, and punished a right
answer followed by its working: an invitation to reward hacking under GRPO. open-r1 scores only boxed / LaTeX
answers; rule 1 agrees with it wherever it gives a score.
"""

import re
from typing import Any

from rewards.text import answer_part, column, completion_text

_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)|\n")
_ASIDE = re.compile(r"\s*\([^()]*\s[^()]*\)")
"""A parenthesised remark with a space in it ("(since 2 + 2 = 4)"); "(1,2)" or "f(x)" stay."""


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for index in range(start + len("\\boxed"), len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start:index + 1]
    return None


def _without_asides(text: str) -> str:
    stripped = _ASIDE.sub("", text)
    return stripped if re.search(r"\w", stripped) else text


def scored_part(answer: str) -> str:
    """The part of an answer that is scored, by the anchors in the module docstring.

    Examples:
        >>> scored_part("The answer is 5 (since 2 + 2 = 4)")
        '5'
        >>> scored_part("The sum is 42. (12 + 30)")
        'The sum is 42.'
    """
    boxed = _last_boxed(answer)
    if boxed is not None:
        return boxed
    anchors = list(_ANSWER_IS.finditer(answer))
    if anchors:
        rest = _without_asides(answer[anchors[-1].end():])
        end = _SENTENCE_END.search(rest)
        return (rest[:end.start()] if end else rest).strip()
    lines = [line for line in answer.splitlines() if "=" in line.replace("==", "")]
    if lines:
        rest = _without_asides(lines[-1].rsplit("=", 1)[1])
        end = _SENTENCE_END.search(rest)
        return (rest[:end.start()] if end else rest).strip()
    return _without_asides(answer).strip()


class MathAccuracy:
    """`math_accuracy`: 1.0 when the answer after the last `</think>` is math-verify-equivalent to the row's gold
    answer, 0.0 when not, None when the gold answer does not parse.

    Args:
        gold_column: the dataset column holding the gold answer.
        timeout_seconds: the time limit of each math-verify parse or comparison (a whole number of seconds, at
            least 1, is used for parsing).
    """

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
        parsed = self._parse(scored_part(answer))
        if not parsed:
            return 0.0
        try:
            return 1.0 if verify(gold_parsed, parsed, timeout_seconds=max(1, int(self.timeout_seconds))) else 0.0
        except Exception:
            return 0.0

    def __call__(self, completions: list, **columns) -> list[float | None]:
        golds = column(columns, self.gold_column, len(completions))
        return [self.score(c, g) for c, g in zip(completions, golds, strict=True)]
