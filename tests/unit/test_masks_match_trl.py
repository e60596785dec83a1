"""Our batched masks against TRL's own per-row preparation (apply_chat_template with assistant masks): the same
token ids and the same trained positions, row for row, on conversations and prompt/completion data."""

from types import SimpleNamespace

import datasets
from tiny_models import chat_rows

from smolalign.data.encode import Encoder, LossMask
from smolalign.data.mixture import ORIGIN
from smolalign.data.prepare import encode_rows
from smolalign.models.load import load_tokenizer
from smolalign.recipe.schema import ModelSection


def trl_labels(dataset, tokenizer, **config):
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir="unused", max_length=None, use_cpu=True, bf16=False, report_to="none", **config)
    state = SimpleNamespace(_tokenizer=tokenizer, chat_template=None,
                            completion_only_loss=config.get("completion_only_loss", False))
    return SFTTrainer._prepare_dataset(state, dataset, tokenizer, args, False, None, "train")


def ours(dataset, tokenizer, template, fmt):
    dataset = dataset.add_column(ORIGIN, [str(i) for i in range(len(dataset))])
    return encode_rows(dataset, Encoder(tokenizer, template, fmt, LossMask(), {}))


def test_conversation_masks_equal_trl(tiny_dir):
    tokenizer, template = load_tokenizer(ModelSection(source=str(tiny_dir)), "smollm3")
    rows = chat_rows(20) + [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " sure "}]}]
    dataset = datasets.Dataset.from_list([{"messages": r["messages"]} for r in rows])
    expected = trl_labels(dataset, tokenizer, assistant_only_loss=True)
    got = ours(dataset, tokenizer, template, "messages")
    assert list(got["input_ids"]) == list(expected["input_ids"])
    assert list(got["labels"]) == list(expected["labels"])


def test_conversational_prompt_completion_masks_equal_trl(tiny_dir):
    tokenizer, template = load_tokenizer(ModelSection(source=str(tiny_dir)), "chatml")
    rows = [{"prompt": r["messages"][:-1], "completion": r["messages"][-1:]} for r in chat_rows(12)]
    dataset = datasets.Dataset.from_list(rows)
    expected = trl_labels(dataset, tokenizer, completion_only_loss=True, assistant_only_loss=True)
    got = ours(dataset, tokenizer, template, "prompt_completion")
    assert list(got["input_ids"]) == list(expected["input_ids"])
    assert list(got["labels"]) == list(expected["labels"])
