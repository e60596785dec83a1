"""Preference rows -> prompt/answer ids, checked against hand-written token texts, and bad rows named."""

import pytest
from tiny_models import write_jsonl

from smolalign.errors import SmolalignError

QUESTION = [{"role": "user", "content": "what is 1 plus 2"}]
GOOD = [{"role": "assistant", "content": "1 + 2 = 3."}]
BAD = [{"role": "assistant", "content": "the answer is 5"}]
PROMPT_TEXT = "<|im_start|>user\nwhat is 1 plus 2<|im_end|>\n<|im_start|>assistant\n"


def prepare(tmp_path, write_recipe, tiny_dir, rows, method="dpo", template="chatml", max_length=256, **data):
    from recipe_runs import loaded_run

    from smolalign.data.prepare_preference import prepare_preference_data
    from smolalign.models.load import load_tokenizer

    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    recipe_path = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": template}, "method": method,
                                "data": {"sources": [{"path": str(path)}], **data},
                                "train": {"max_length": max_length, "per_device_train_batch_size": 2}})
    run = loaded_run(str(recipe_path), [], "po")
    tokenizer, chat_template = load_tokenizer(run.recipe.model, run.recipe.template.name)
    return prepare_preference_data(run, tokenizer, chat_template), tokenizer


def decoded(tokenizer, row: dict) -> dict:
    return {k: tokenizer.decode(v) for k, v in row.items() if k.endswith("_ids")}


def test_conversational_pair_splits_at_the_generation_prompt(tmp_path, write_recipe, tiny_dir):
    data, tokenizer = prepare(tmp_path, write_recipe, tiny_dir, [{"prompt": QUESTION, "chosen": GOOD, "rejected": BAD}])
    assert decoded(tokenizer, data.train[0]) == {"prompt_ids": PROMPT_TEXT, "chosen_ids": "1 + 2 = 3.<|im_end|>",
                                                 "rejected_ids": "the answer is 5<|im_end|>"}


def test_implicit_prompt_is_the_shared_start_of_both_conversations(tmp_path, write_recipe, tiny_dir):
    row = {"chosen": QUESTION + GOOD, "rejected": QUESTION + BAD}
    data, tokenizer = prepare(tmp_path, write_recipe, tiny_dir, [row])
    assert decoded(tokenizer, data.train[0])["prompt_ids"] == PROMPT_TEXT
    assert decoded(tokenizer, data.train[0])["chosen_ids"] == "1 + 2 = 3.<|im_end|>"


def test_plain_pair_gets_the_end_of_turn_token(tmp_path, write_recipe, tiny_dir):
    data, tokenizer = prepare(tmp_path, write_recipe, tiny_dir,
                              [{"prompt": "what is 1 plus 2", "chosen": " 3.", "rejected": " 5."}])
    assert decoded(tokenizer, data.train[0]) == {"prompt_ids": "what is 1 plus 2", "chosen_ids": " 3.<|im_end|>",
                                                 "rejected_ids": " 5.<|im_end|>"}


def test_a_token_across_the_prompt_boundary_goes_to_the_answers(tmp_path, write_recipe, tiny_dir):
    # Byte-level BPE writes " 3" as one token, so a prompt ending in a space shares it with the answer: the
    # prompt is the part both sequences share, as TRL does it.
    data, tokenizer = prepare(tmp_path, write_recipe, tiny_dir,
                              [{"prompt": "what is 1 plus 2 ", "chosen": "3.", "rejected": "5."}])
    assert decoded(tokenizer, data.train[0]) == {"prompt_ids": "what is 1 plus 2", "chosen_ids": " 3.<|im_end|>",
                                                 "rejected_ids": " 5.<|im_end|>"}


def test_think_and_no_think_pairs_mix_by_row(tmp_path, write_recipe, tiny_dir):
    rows = [{"prompt": QUESTION, "chosen": GOOD, "rejected": BAD, "chat_template_kwargs": {"enable_thinking": mode}}
            for mode in (True, False)]
    data, tokenizer = prepare(tmp_path, write_recipe, tiny_dir, rows, template="smollm3", max_length=2048)
    prompts = [tokenizer.decode(data.train[i]["prompt_ids"]) for i in range(2)]
    assert "/think" in prompts[0] and prompts[0].endswith("<|im_start|>assistant\n")
    assert "/no_think" in prompts[1] and prompts[1].endswith("<|im_start|>assistant\n<think>\n\n</think>\n")


def test_kto_turns_each_pair_into_a_desirable_and_an_undesirable_row(tmp_path, write_recipe, tiny_dir):
    rows = [{"prompt": QUESTION, "chosen": GOOD, "rejected": BAD}] * 3
    data, tokenizer = prepare(tmp_path, write_recipe, tiny_dir, rows, method="kto")
    got = sorted((tokenizer.decode(r["completion_ids"]), r["label"]) for r in data.train)
    assert got == [("1 + 2 = 3.<|im_end|>", True)] * 3 + [("the answer is 5<|im_end|>", False)] * 3


@pytest.mark.parametrize(("row", "message"), [
    ({"chosen": QUESTION + GOOD, "rejected": [{"role": "user", "content": "hi"}] + BAD}, "different prompts"),
    ({"prompt": QUESTION, "chosen": QUESTION + GOOD,
      "rejected": [{"role": "user", "content": "what is 2 plus 2"}] + BAD}, "does not continue the row's prompt"),
    ({"prompt": QUESTION, "chosen": GOOD, "rejected": GOOD}, "identical"),
    ({"prompt": QUESTION, "chosen": [{"role": "assistant", "content": ""}], "rejected": BAD}, "empty"),
])
def test_bad_rows_are_named(tmp_path, write_recipe, tiny_dir, row, message):
    good = {"prompt": QUESTION, "chosen": GOOD, "rejected": BAD}
    with pytest.raises(SmolalignError, match=message) as caught:
        prepare(tmp_path, write_recipe, tiny_dir, [good, row])
    assert "rows.jsonl#1" in str(caught.value)


def test_identical_pairs_can_be_dropped(tmp_path, write_recipe, tiny_dir):
    rows = [{"prompt": QUESTION, "chosen": GOOD, "rejected": BAD}, {"prompt": QUESTION, "chosen": GOOD, "rejected": GOOD}]
    data, _ = prepare(tmp_path, write_recipe, tiny_dir, rows, on_untrained="drop")
    assert len(data.train) == 1 and data.stats["train"]["dropped_identical_or_empty"] == 1


def test_prompts_that_fill_max_length_are_dropped_and_counted(tmp_path, write_recipe, tiny_dir):
    long_question = [{"role": "user", "content": "what is the sum " * 200}]
    rows = [{"prompt": QUESTION, "chosen": GOOD, "rejected": BAD}, {"prompt": long_question, "chosen": GOOD, "rejected": BAD}]
    data, _ = prepare(tmp_path, write_recipe, tiny_dir, rows)
    assert len(data.train) == 1 and data.stats["train"]["prompt_too_long"] == 1
