"""`smolalign data preview` on a tiny model: exactly the assistant answers and their end-of-turn tokens are trained,
and packed documents restart their position ids."""

import json

from tiny_models import chat_rows, write_jsonl

from smolalign.templates.registry import resolve_template

MULTI_TURN = {"messages": [
    {"role": "system", "content": "Be brief. /no_think"},
    {"role": "user", "content": "hello there"},
    {"role": "assistant", "content": "hi, what is the question"},
    {"role": "user", "content": "what is 2 plus 3"},
    {"role": "assistant", "content": "2 + 3 = 5."},
]}


def preview(cli, recipe, *extra) -> list[dict]:
    code, out, err = cli("data", "preview", recipe, "--json", *extra)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def runs(row: dict, trained: bool) -> list[str]:
    """Texts of the maximal runs of tokens whose trained flag equals `trained`."""
    out, current = [], None
    for token, flag in zip(row["tokens"], row["trained"], strict=True):
        if flag == trained:
            current = (current or "") + token
        elif current is not None:
            out.append(current)
            current = None
    if current is not None:
        out.append(current)
    return out


def recipe_for(write_recipe, tiny_dir, data, **train) -> str:
    return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                             "data": {"sources": [{"path": str(data)}]}, "train": {"max_length": 256, **train}}))


def test_multi_turn_trains_exactly_the_assistant_answers(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", [MULTI_TURN])
    rows = preview(cli, recipe_for(write_recipe, tiny_dir, data), "-n", "1")
    assert len(rows) == 1
    row = rows[0]
    assert set(row) == {"input_ids", "tokens", "trained", "position_ids"}
    assert runs(row, True) == ["hi, what is the question<|im_end|>", "2 + 3 = 5.<|im_end|>"]
    assert runs(row, False) == [
        "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /no_think\n\n"
        "## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n<|im_start|>user\nhello there<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n",
        "\n<|im_start|>user\nwhat is 2 plus 3<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n",
        "\n",
    ]
    assert row["position_ids"] == list(range(len(row["input_ids"])))
    assert "".join(row["tokens"]).count("<|im_end|>") == 5


def test_packed_documents_restart_position_ids(cli, write_recipe, tiny_dir, tiny_tokenizer, tmp_path):
    conversations = chat_rows(12)
    data = write_jsonl(tmp_path / "chat.jsonl", conversations)
    rows = preview(cli, recipe_for(write_recipe, tiny_dir, data, packing="bfd"), "-n", "50")
    template = resolve_template("smollm3").text
    lengths = sorted(len(tiny_tokenizer.apply_chat_template(c["messages"], chat_template=template, tokenize=True,
                                                            return_dict=False)) for c in conversations)
    packed = []
    for row in rows:
        starts = [i for i, p in enumerate(row["position_ids"]) if p == 0]
        assert starts[0] == 0
        bounds = [*starts, len(row["position_ids"])]
        for start, end in zip(bounds, bounds[1:], strict=False):
            assert row["position_ids"][start:end] == list(range(end - start))
            assert row["trained"][start] is False  # nothing is predicted across a document boundary
            packed.append(end - start)
        assert len(row["input_ids"]) <= 256
    assert sorted(packed) == lengths
    assert len(rows) < len(conversations)


def test_readable_preview_marks_trained_spans(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", [MULTI_TURN])
    code, out, err = cli("data", "preview", recipe_for(write_recipe, tiny_dir, data), "-n", "1")
    assert code == 0, err
    assert "⟦hi, what is the question<|im_end|>⟧" in out and "⟦2 + 3 = 5.<|im_end|>⟧" in out


def test_preview_of_a_po_recipe_shows_chosen_and_rejected(cli, write_recipe, tiny_dir, tmp_path):
    from tiny_models import pair_rows

    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(3))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "apo_zero",
                           "data": {"sources": [{"path": str(data)}]}})
    code, out, err = cli("data", "preview", recipe, "-n", "1")
    assert code == 0, err
    first = pair_rows(3)[0]
    question, good, bad = first["prompt"][0]["content"], first["chosen"][0]["content"], first["rejected"][0]["content"]
    prompt = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    assert f"[chosen] {prompt}⟦{good}<|im_end|>⟧" in out
    assert f"[rejected] {prompt}⟦{bad}<|im_end|>⟧" in out

    code, out, err = cli("data", "preview", recipe, "-n", "2", "--json", "--set", "method=kto")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 2 and all(isinstance(r["label"], bool) for r in rows)
    assert "".join(rows[0]["prompt_tokens"]).endswith("<|im_start|>assistant\n")
