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


def complies(turn: str, mode: str) -> bool:
    """Whether a whole assistant turn (prefill + generated text) obeys `mode` (think or no_think)."""
    if turn.count(THINK_OPEN) != 1 or turn.count(THINK_CLOSE) != 1:
        return False
    parts = split_think(turn)
    if parts is None:
        return False
    reasoning, answer = parts
    return bool(answer) and (bool(reasoning) if mode == "think" else not reasoning)
