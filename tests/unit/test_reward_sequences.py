"""A reward model reads its score at the last token of each sequence: the sequences `smolalign po` with `method:
reward` trains on must be the ones a `model:` reward scores later. They are checked against TRL's own tokenization
of a conversation for its RewardTrainer (`trl.data_utils._tokenize`: the chat template applied to the whole
conversation with the row's chat_template_kwargs), an independent source: each side ends with what the template writes
after the answer's end-of-turn token (smollm3: a newline), and is rendered in the row's think mode. Before, training
stopped at `<|im_end|>` while scoring read the newline after it, and scoring rendered every row in think mode: on
the quickstart pairs a trained reward model's pair accuracy fell from 0.75 to 0.50 when scored."""

from recipe_runs import run_of
from tiny_models import pair_rows, write_jsonl

from smolalign.data.prepare_preference import prepare_preference_data
from smolalign.models.load import load_tokenizer


def _trained_sides(tiny_dir, tmp_path, rows):
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    run = run_of({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "method": "reward",
                  "data": {"sources": [{"path": str(data)}]}, "train": {"max_length": 1024}}, "po", "t")
    tokenizer, template = load_tokenizer(run.recipe.model, "smollm3")
    prepared = prepare_preference_data(run, tokenizer, template)
    return tokenizer, template, [(r["prompt_ids"] + r["chosen_ids"], r["prompt_ids"] + r["rejected_ids"])
                                 for r in prepared.train]


def test_reward_training_sequences_are_trls_and_the_scorers(tiny_dir, tmp_path):
    from trl.data_utils import _tokenize

    from rewards.reward_model import RewardModel

    rows = pair_rows(6)
    rows[1]["chat_template_kwargs"] = {"enable_thinking": True}
    rows[1]["chosen"][0]["content"] = "<think>\nadd them\n</think>\n" + rows[1]["chosen"][0]["content"]
    rows[1]["rejected"][0]["content"] = "<think>\nguess\n</think>\n" + rows[1]["rejected"][0]["content"]
    tokenizer, template, trained = _trained_sides(tiny_dir, tmp_path, rows)
    tokenizer.chat_template = template.text  # what the saved reward model's tokenizer holds
    scorer = RewardModel.__new__(RewardModel)
    scorer._tokenizer = tokenizer
    by_prompt = {tuple(row["prompt"][0].items()): row for row in rows}
    assert len(trained) == len(rows)
    for chosen_ids, rejected_ids in trained:
        prompt = tokenizer.decode(chosen_ids)
        row = next(r for key, r in by_prompt.items() if dict(key)["content"] + "<|im_end|>" in prompt)
        for ids, side in ((chosen_ids, "chosen"), (rejected_ids, "rejected")):
            trls = _tokenize(tokenizer, row["prompt"] + row[side], **row["chat_template_kwargs"])["input_ids"]
            assert ids == list(trls), tokenizer.decode(ids)
            scored = scorer.render(row["prompt"], row[side][0]["content"], row["chat_template_kwargs"])
            assert tokenizer(scored, add_special_tokens=False)["input_ids"] == ids
        assert tokenizer.decode(chosen_ids).endswith("<|im_end|>\n")


def test_plain_text_pairs_train_as_the_one_turn_conversation_they_are_scored_as(tiny_dir, tmp_path):
    """A plain-text prompt and its answers: a `model:` reward scores them as a user turn and the assistant's answer,
    so a reward model trains on that conversation (TRL's tokenization of it), not on the bare concatenated text."""
    from trl.data_utils import _tokenize

    rows = [{**row, "chat_template_kwargs": {"enable_thinking": False}} for row in pair_rows(4, conversational=False)]
    tokenizer, _, trained = _trained_sides(tiny_dir, tmp_path, rows)
    expected = {tuple(_tokenize(tokenizer, [{"role": "user", "content": row["prompt"]},
                                            {"role": "assistant", "content": row[side]}],
                                enable_thinking=False)["input_ids"])
                for row in rows for side in ("chosen", "rejected")}
    assert {tuple(ids) for pair in trained for ids in pair} == expected


def test_plain_text_pairs_without_a_prompt_are_refused_for_a_reward_model(tiny_dir, tmp_path):
    import pytest

    from smolalign.errors import SmolalignError

    rows = [{"chosen": f"{i} + 1 = {i + 1}.", "rejected": f"{i} + 1 = {i + 7}."} for i in range(4)]
    with pytest.raises(SmolalignError, match="a reward model scores an answer to a prompt, and this row has none"):
        _trained_sides(tiny_dir, tmp_path, rows)


def test_a_plain_answer_ending_with_the_end_of_turn_ends_its_turn_once(tiny_dir, tmp_path):
    rows = [{**row, "chosen": row["chosen"] + "<|im_end|>", "chat_template_kwargs": {"enable_thinking": False}}
            for row in pair_rows(2, conversational=False)]
    tokenizer, _, trained = _trained_sides(tiny_dir, tmp_path, rows)
    for chosen_ids, _ in trained:
        assert tokenizer.decode(chosen_ids).count("<|im_end|>") == chosen_ids.count(tokenizer.eos_token_id)
        assert not tokenizer.decode(chosen_ids).endswith("<|im_end|><|im_end|>\n")
