"""Where a completion states its final answer: the text that math_accuracy hands to math-verify, and the rules that
chose it. math-verify reads a whole answer well (LaTeX delimiters, tuples, intervals, sets, relations, equations, the
last expression wins); a rule changes what it reads only where that is wrong, and each is named by its class in
RULES (docs/math-answers.md gives the examples):

- think: the reasoning in a think block is never read (`rewards.text.answer_part`);
- final statement: the last "the (final) answer is" / "answer:" is read to the end of its sentence (or of a clause
  after a comma), over the working before it (boxed or not) and the checks after it, unless a `\\boxed{}` follows it;
- boxes: of several `\\boxed{}` after the last statement, the last one, or all of them as one set when the gold
  answer is a set;
- asides: a parenthesised remark in prose ("(since 2 + 2 = 4)") is left out.
Math (`$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`, `\\begin…\\end`, `{…}`) is never cut: no sentence ends and no aside
is taken inside it."""

import re
from dataclasses import dataclass

THINK, STATEMENT, BOXES, ASIDES = "think", "final statement", "boxes", "asides"
RULES = (THINK, STATEMENT, BOXES, ASIDES)

_MATH = re.compile(  # a span is at most 4,000 characters, so that a run of openers costs no more than their text
    r"\$\$.{1,4000}?\$\$|\\\[.{1,4000}?\\\]|\\\(.{1,4000}?\\\)|\\begin\{([a-z]+\*?)\}.{0,4000}?\\end\{\1\}"
    r"|(?<![\\$])\$(?=[^\s$])(?:\\.|[^$\\\n])*?(?<=\S)\$(?!\d)",  # inline $…$; "$5 and $6" are prices
    re.DOTALL)
_HIDDEN = "\0"
_BRACE = re.compile(r"(?<!\\)[{}]")
_STATEMENT = re.compile(
    r"\b(?:final\s+)?answers?\b(?:\s+(?:to|for)\b[^.?;:\n]{0,60}?)?[*\s]*(?::|\b(?:is|are)\b)[\s*:]*"
    r"(?=[-+\u2212\d$\\({\[\0]|[A-Za-z]\s*(?:[=<>\u2264\u2265]|\\[lg]eq?\b|\\neq?\b)|(?-i:[A-Z])(?![A-Za-z]))",
    re.IGNORECASE)
"""An answer statement: "the (final) answer is", "answers are", "answer to the question is", "Answer:", followed by
what can only be an answer: a number, a sign, math (hidden by `masked`), a bracket, an equation or relation ("x = 3"),
or one capital letter (a choice). "The answer is correct: $2 \\cdot 5 + 3 = 13$", "I hope the answer is helpful" and
"the answer would be 24 if order mattered" are not statements: a box or the last expression before them stays the
answer."""
_SENTENCE_END = re.compile(r"[.?;](?=\s|$)|\n|,\s+(?!(?:and|or)\b)[A-Za-z]{2,}")
"""A sentence ends at a full stop, a newline, or a comma opening a clause ("25, since …"; "1, 2 and 3" goes on)."""
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_CALCULATION = re.compile(r"(?<![<>!])=|\s[-+*/×÷]\s")
_PUNCTUATION = ".,;:!?"
_LONGEST_ASIDE = 400
"""Characters: a longer parenthesised passage is not a remark."""
_MATH_LEFT = re.compile(r"[\d\\$]")


@dataclass(frozen=True)
class Reading:
    parts: tuple[str, ...]
    """What math-verify reads: one text, or several boxes that form one set."""
    rules: tuple[str, ...] = ()
    """The classes (RULES) that made `parts` differ from the whole answer; () when math-verify reads it all."""
    fallback: str = ""
    """For a statement whose sentence holds no math ("The answer is as follows:"): all that follows it."""


def masked(text: str) -> str:
    """`text` with every math span and brace group hidden (same length), so that prose rules never cut math."""
    chars = list(text)
    for match in _MATH.finditer(text):
        chars[match.start():match.end()] = _HIDDEN * (match.end() - match.start())
    depth, start = 0, 0
    for brace in _BRACE.finditer(text):
        if brace.group() == "{":
            start = brace.start() if depth == 0 else start
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                chars[start:brace.end()] = _HIDDEN * (brace.end() - start)
    return "".join(chars)


def boxes(text: str) -> list[tuple[int, int]]:
    """(start, end) of every `\\boxed{…}`, braces balanced."""
    found, index = [], text.find("\\boxed{")
    while index >= 0:
        depth = 0
        for end in range(index + len("\\boxed"), len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                found.append((index, end + 1))
                break
        else:
            break
        index = text.find("\\boxed{", end + 1)
    return found


def _pairs(hidden: str) -> list[tuple[int, int]]:
    """(open, close) of every matched pair of parentheses, in order of the opening one (one pass: a degenerate
    generation full of "(" costs no more than any other text)."""
    stack, pairs = [], []
    for index, char in enumerate(hidden):
        if char == "(":
            stack.append(index)
        elif char == ")" and stack:
            pairs.append((stack.pop(), index))
    return sorted(pairs)


def _apart(hidden: str, start: int, end: int) -> bool:
    before = hidden[start - 1] if start else " "
    after = hidden[end + 1] if end + 1 < len(hidden) else " "
    return (before.isspace() or before in _PUNCTUATION) and (after.isspace() or after in _PUNCTUATION)


def without_asides(text: str) -> str:
    """Class asides: `text` without its parenthesised remarks in prose: outside math, a group opened after a space
    or punctuation and closed before one (not a call "f(x + 1)", a product "(x + 1)(x - 1)", `\\left(` or `\\(`),
    holding a word ("(since …)", "(in cm)"), or, without a comma, an "=" or a spaced operator ("(2+2=4)",
    "(12 + 30)"); tuples, intervals and signed numbers ("(1, 2)", "(0, 1]", "(-3)") stay. The text is kept whole when
    nothing mathematical would be left."""
    hidden, cuts, done = masked(text), [], 0
    for start, end in _pairs(hidden):
        if start < done or end - start > _LONGEST_ASIDE or not _apart(hidden, start, end):
            continue
        inner = hidden[start + 1:end]
        if _WORD.search(inner) or ("," not in inner and _CALCULATION.search(inner)):
            begin = start
            while begin and text[begin - 1].isspace():
                begin -= 1
            cuts.append((begin, end + 1))
            done = end + 1
    if not cuts:
        return text
    kept, last = [], 0
    for start, end in cuts:
        kept.append(text[last:start])
        last = end
    stripped = "".join(kept) + text[last:]
    return stripped if _MATH_LEFT.search(stripped) else text


def _sentence(text: str) -> str:
    """The first sentence of `text` (leading space skipped), never cut inside math."""
    text = text.lstrip()
    end = _SENTENCE_END.search(masked(text))
    return text[:end.start() if end else len(text)].strip()


def read(answer: str, gold_is_set: bool = False) -> Reading:
    """What math-verify reads of an answer (the text after the think block): the boxes after the last answer
    statement, else that statement's sentence, else the whole answer; asides left out of prose.

    Examples:
        >>> read("The answer is 5 (since 2 + 2 = 4)").parts
        ('5',)
        >>> read(r"First \\boxed{255}. The final answer is $10,455$.").parts
        ('$10,455$',)
    """
    statements = list(_STATEMENT.finditer(masked(answer)))
    statement = statements[-1] if statements else None
    found = final_boxes(answer, statement.start() if statement else 0, gold_is_set)
    if found is None and statement is not None:
        found = stated(answer[statement.end():])
    return found or whole(answer)


def final_boxes(answer: str, after: int, gold_is_set: bool) -> Reading | None:
    """Class boxes: the `\\boxed{}` from `after` (the start of the last answer statement) on, the model's own mark of
    its answer: the last one, or every one as one set when the gold is a set ("\\boxed{1}, \\boxed{2} and \\boxed{3}"
    against {1, 2, 3}, as open-r1 reads them); None without one. Boxes before the statement are working (class final
    statement)."""
    every_box = boxes(answer)
    final = [box for box in every_box if box[0] >= after]
    if not final:
        return None
    chosen = final if gold_is_set else final[-1:]
    return Reading(tuple(answer[s:e] for s, e in chosen), (BOXES,) if len(every_box) > 1 else ())


def stated(rest: str) -> Reading:
    """Class final statement: what follows the last "the (final) answer is" / "answer:" (`rest`) up to the end of its
    sentence, asides left out: not the working before it, boxed or not, nor the checks after it ("Answer: 7. Because
    3 + 4 = 7 and 7 + 1 = 8" reads 7). A sentence without math falls back to all of `rest`."""
    kept = without_asides(rest)
    sentence = _sentence(kept)
    rules = (STATEMENT, ASIDES) if sentence != _sentence(rest) else (STATEMENT,)
    return Reading((sentence,), rules, kept.strip())


def whole(answer: str) -> Reading:
    """No statement and no box: the whole answer, as math-verify reads it (its last expression), asides left out."""
    text = without_asides(answer)
    return Reading((text.strip(),), (ASIDES,) if text != answer else ())
