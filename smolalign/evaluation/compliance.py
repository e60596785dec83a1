"""What it means for an answer to obey its reasoning mode, judged on the whole assistant turn.

The whole turn is what the template prefilled after the assistant header (from its `<think>` on) followed by the
generated text. The smollm3 template prefills `<think>\n\n</think>\n` in no_think mode and nothing in think mode
(docs: smollm3-chat-template.md, "Generation prompt"), so:
- think: the turn opens a think block with non-empty reasoning, closes it, and then answers (non-empty);
- no_think: the turn carries an empty think block (prefilled or generated) and then answers: no reasoning at all.
Exactly one `<think>` and one `</think>` in either mode: a second block, or a block that is never closed (an
answer cut off while reasoning), does not comply. Leading whitespace is allowed before the block.
"""


from rewards.text import THINK_CLOSE, THINK_OPEN, split_think
from smolalign.templates.render import render

_PROBE = [{"role": "user", "content": "x"}]


def complies(turn: str, mode: str) -> bool:
    """Whether a whole assistant turn (prefill + generated text) obeys `mode` (think or no_think)."""
    if turn.count(THINK_OPEN) != 1 or turn.count(THINK_CLOSE) != 1:
        return False
    parts = split_think(turn)
    if parts is None:
        return False
    reasoning, answer = parts
    return bool(answer) and (bool(reasoning) if mode == "think" else not reasoning)


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
