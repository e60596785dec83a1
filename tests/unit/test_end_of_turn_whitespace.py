"""A template that trains the newline after the end-of-turn token, as the alignment-handbook's SmolLM3 training
template does ("<|im_end|>\\n" inside {% generation %}), is accepted; anything else after it is still refused."""

import datasets

from smolalign.data.encode import PROBLEM, Encoder, LossMask
from smolalign.data.mixture import ORIGIN
from smolalign.data.prepare import encode_rows
from smolalign.models.load import load_tokenizer
from smolalign.recipe.schema import ModelSection
from smolalign.templates.registry import ChatTemplate
from smolalign.templates.render import trained_after_end_of_turn

# The handbook's loop, reduced to what matters here: the whole assistant turn, with its trailing newline, is trained.
HANDBOOK_STYLE = """{%- for message in messages -%}
{%- if message.role == "user" -%}{{ "<|im_start|>user\\n" + message.content + "<|im_end|>\\n" }}
{%- elif message.role == "assistant" -%}{% generation %}{{ "<|im_start|>assistant\\n" + message.content + "<|im_end|>" + TAIL }}{% endgeneration %}
{%- endif -%}{%- endfor -%}"""


def encode(tiny_dir, tail: str):
    tokenizer, _ = load_tokenizer(ModelSection(source=str(tiny_dir)), "chatml")
    template = ChatTemplate("handbook-style", HANDBOOK_STYLE.replace("TAIL", repr(tail)), "test")
    rows = [{"messages": [{"role": "user", "content": "what is one plus two"},
                          {"role": "assistant", "content": "three"}], ORIGIN: "row#0"}]
    encoded = encode_rows(datasets.Dataset.from_list(rows), Encoder(tokenizer, template, "messages", LossMask(), {}))
    return tokenizer, template, encoded[0]


def test_newline_after_end_of_turn_is_accepted(tiny_dir):
    tokenizer, template, row = encode(tiny_dir, "\n")
    assert row[PROBLEM] == ""
    trained = [t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
    assert tokenizer.decode(trained) == "<|im_start|>assistant\nthree<|im_end|>\n"
    assert trained_after_end_of_turn(template) == "\n"


def test_text_after_end_of_turn_is_refused(tiny_dir):
    _, template, row = encode(tiny_dir, "\nhello")
    assert "trained span ends with" in row[PROBLEM]
    assert trained_after_end_of_turn(template) == ""
