"""The data pipeline on a tiny tokenizer: formats, masks, mixtures, row checks, truncation and the cache."""

import json
import re
from collections import Counter
from dataclasses import replace

import pytest
from recipe_runs import run_of
from tiny_models import chat_rows, write_jsonl

from smolalign.data.mixture import build_mixture, weighted_rows
from smolalign.data.prepare import prepare_sft_data
from smolalign.errors import SmolalignError
from smolalign.models.load import load_tokenizer


def make_recipe(tiny_dir, sources, template="smollm3", train=None, **data):
    """The run of an sft recipe on the tiny model."""
    return run_of({"model": {"source": str(tiny_dir)}, "template": {"name": template},
                            "data": {"sources": sources, **data}, "train": {"max_length": 256, **(train or {})}},
                           "sft", "test")


def prepare(tiny_dir, sources, template="smollm3", train=None, use_cache=False, **data):
    recipe = make_recipe(tiny_dir, sources, template, train, **data)
    tokenizer, chat_template = load_tokenizer(recipe.recipe.model, template)
    return prepare_sft_data(recipe, tokenizer, chat_template, use_cache=use_cache), tokenizer


def trained_text(tokenizer, row) -> list[str]:
    """Decoded maximal runs of trained tokens."""
    out, run = [], []
    for token, label in zip(row["input_ids"], row["labels"], strict=True):
        if label != -100:
            run.append(token)
        elif run:
            out.append(tokenizer.decode(run))
            run = []
    if run:
        out.append(tokenizer.decode(run))
    return out


def test_weighted_rows_downsample_and_upsample():
    assert weighted_rows(4, 1.0, 0) == [0, 1, 2, 3]
    assert weighted_rows(4, 2.0, 0) == [0, 1, 2, 3, 0, 1, 2, 3]
    half = weighted_rows(10, 0.5, 0)
    assert len(half) == 5 and len(set(half)) == 5
    one_and_half = weighted_rows(10, 1.5, 0)
    assert len(one_and_half) == 15 and sorted(set(one_and_half)) == list(range(10))
    assert weighted_rows(10, 0.5, 1) == weighted_rows(10, 0.5, 1)


def test_mixture_weights_split_and_origins(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": f"a{i}"} for i in range(10)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"text": f"b{i}"} for i in range(4)])
    recipe = run_of({"model": {"source": "org/m"}, "data": {
        "sources": [{"path": str(a), "weight": 0.5}, {"path": str(b), "weight": 1.0}], "eval_split": 3}}, "sft", "t")
    mixture = build_mixture(recipe.data)
    assert mixture.format == "text"
    assert mixture.rows_per_source == {str(a): (10, 5), str(b): (4, 4)}
    assert len(mixture.train) == 6 and len(mixture.eval) == 3
    origins = list(mixture.train["_origin"]) + list(mixture.eval["_origin"])
    assert sum(o.startswith(str(b)) for o in origins) == 4 and len(set(origins)) == 9


@pytest.mark.parametrize(("weight", "eval_split", "held"), [(2.0, 0.1, 4), (1.5, 6, 6), (3.0, 39, 39)])
def test_no_held_out_row_is_trained_on_when_a_source_repeats(tmp_path, weight, eval_split, held):
    """A source weighted above 1 repeats its rows: the held-out rows are distinct rows of the mixture, and every
    copy of each leaves training (else eval_loss is measured on rows the model trained on)."""
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": f"a{i}"} for i in range(40)])
    recipe = run_of({"model": {"source": "org/m"}, "data": {
        "sources": [{"path": str(a), "weight": weight}], "eval_split": eval_split}}, "sft", "t")
    mixture = build_mixture(recipe.data)
    held_out, trained = list(mixture.eval["text"]), list(mixture.train["text"])
    assert len(held_out) == held == len(set(held_out))   # 10% of the 40 distinct rows, or the count asked for
    assert not set(held_out) & set(trained)
    whole = Counter(build_mixture(replace(recipe.data, eval_split=0)).train["text"])  # the mixture, nothing held out
    assert sum(whole.values()) == round(40 * weight)
    assert Counter(trained) == Counter({text: n for text, n in whole.items() if text not in held_out})


def test_sources_of_one_folder_keep_their_own_names(tmp_path):
    """Two splits of one dataset are two sources: counted apart, and each row named by its split."""
    folder = tmp_path / "set"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [{"text": f"t{i}"} for i in range(6)])
    write_jsonl(folder / "validation.jsonl", [{"text": f"v{i}"} for i in range(2)])
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [
        {"path": str(folder)}, {"path": str(folder), "split": "validation", "weight": 2.0}]}}, "sft", "t")
    mixture = build_mixture(recipe.data)
    assert mixture.rows_per_source == {str(folder): (6, 6), f"{folder}[validation]": (2, 4)}
    origins = dict(zip(mixture.train["_origin"], mixture.train["text"], strict=True))
    assert origins[f"{folder}#1"] == "t1" and origins[f"{folder}[validation]#1"] == "v1"


def test_a_source_its_weight_leaves_no_row_is_refused(tmp_path):
    def mixture(rows: int, weight: float):
        data = write_jsonl(tmp_path / f"s{rows}.jsonl", [{"text": f"s{i}"} for i in range(rows)])
        return build_mixture(run_of({"model": {"source": "org/m"}, "data": {"sources": [
            {"path": str(data), "weight": weight}]}}, "sft", "t").data)

    with pytest.raises(SmolalignError, match=r"s20\.jsonl: weight 0\.02 of its 20 row\(s\) keeps none"):
        mixture(20, 0.02)
    for rows in (20, 1, 3, 7):  # n × weight = 0.5 rounds to no row (a half rounds to even): the weight suggested keeps one
        with pytest.raises(SmolalignError, match="keeps none") as refused:
            mixture(rows, 0.5 / rows)
        suggested = float(re.search(r"a weight of at least ([0-9.]+)", str(refused.value)).group(1))
        assert len(mixture(rows, suggested).train) == 1, (rows, suggested)


def test_an_eval_split_share_that_leaves_no_training_row_is_refused(tmp_path):
    one = write_jsonl(tmp_path / "one.jsonl", [{"text": "only"}])
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [{"path": str(one), "weight": 3.0}],
                                                            "eval_split": 0.5}}, "sft", "t")
    with pytest.raises(SmolalignError, match=r"data.eval_split 0.5 leaves no training rows \(the mixture has 1 distinct"):
        build_mixture(recipe.data)


def test_sources_of_other_rows_are_named_apart():
    """Another revision of a dataset, or another seed of a generated task, reads other rows: their row names differ,
    so holding out row i of one leaves row i of the other in training; the same rows twice share their names."""
    from smolalign.inputs.data_sources import row_labels
    from smolalign.recipe.data_schema import SourceSection

    assert row_labels([SourceSection("org/set", revision="v1"), SourceSection("org/set", revision="v2")]) == \
        ["org/set@v1", "org/set@v2"]
    task = "reasoning_gym:chain_sum"
    assert row_labels([SourceSection(task, seed=0, size=8), SourceSection(task, seed=1000, size=8),
                       SourceSection(task, seed=0, size=8, weight=2.0)]) == [task, f"{task} (source 2)", task]


def test_one_file_read_by_two_sources_is_held_out_whole(tmp_path):
    """Two sources reading the same rows (another weight, say): a held-out row is trained by neither."""
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": f"a{i}"} for i in range(20)])
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [{"path": str(a)}, {"path": str(a)}],
                                                            "eval_split": 0.3}}, "sft", "t")
    mixture = build_mixture(recipe.data)
    assert len(mixture.eval) == 6 and not set(mixture.eval["text"]) & set(mixture.train["text"])
    assert list(mixture.rows_per_source) == [str(a), f"{a} (source 2)"] and len(mixture.train) == 28


def test_sources_with_and_without_template_kwargs_mix(tmp_path):
    """A `chat_template_kwargs` column holding `{}` (datasets types it Json) mixes with a source without one."""
    from smolalign.data.mixture import decoded

    turn = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    kwargs = write_jsonl(tmp_path / "kw.jsonl", [{"messages": turn, "chat_template_kwargs": {}},
                                                 {"messages": turn, "chat_template_kwargs": {"enable_thinking": False}}])
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"messages": turn}])
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [{"path": str(kwargs)}, {"path": str(plain)}]}},
                    "sft", "t")
    rows = build_mixture(recipe.data).train
    assert [decoded(v) for v in rows["chat_template_kwargs"]] == [{}, {"enable_thinking": False}, None]


def test_column_mapping_and_missing_columns(tmp_path):
    data = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a", "junk": 1}])
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [
        {"path": str(data), "columns": {"question": "prompt", "answer": "completion"}}]}}, "sft", "t")
    mixture = build_mixture(recipe.data)
    assert mixture.format == "prompt_completion" and set(mixture.train.column_names) == {"prompt", "completion", "_origin"}
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [
        {"path": str(data), "columns": {"query": "prompt"}}]}}, "sft", "t")
    with pytest.raises(SmolalignError, match=r"qa\.jsonl has no column 'query' \(columns: question, answer, junk\)"):
        build_mixture(recipe.data)
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [{"path": str(data)}]}}, "sft", "t")
    with pytest.raises(SmolalignError, match="cannot tell its format"):
        build_mixture(recipe.data)


def test_missing_file_and_mixed_formats(tmp_path):
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [
        {"path": str(tmp_path / "nope.jsonl")}]}}, "sft", "t")
    with pytest.raises(SmolalignError, match=r"nope\.jsonl: no such file"):
        build_mixture(recipe.data)
    a = write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    b = write_jsonl(tmp_path / "b.jsonl", chat_rows(1))
    recipe = run_of({"model": {"source": "org/m"}, "data": {"sources": [{"path": str(a)}, {"path": str(b)}]}},
                             "sft", "t")
    with pytest.raises(SmolalignError, match="mix formats"):
        build_mixture(recipe.data)


def test_sources_with_different_optional_columns_mix(tiny_dir, tmp_path):
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"messages": [{"role": "user", "content": "hi"},
                                                                 {"role": "assistant", "content": "yo"}]}])
    with_kwargs = write_jsonl(tmp_path / "kw.jsonl", [{
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "chat_template_kwargs": {"enable_thinking": False}}])
    # Without a system message the think-mode default instructions are long: leave room for them.
    prepared, tokenizer = prepare(tiny_dir, [{"path": str(plain)}, {"path": str(with_kwargs)}],
                                  train={"max_length": 2048})
    texts = [tokenizer.decode(row["input_ids"]) for row in prepared.train]
    assert sum("Reasoning Mode: /no_think" in t for t in texts) == 1
    assert sum("Reasoning Mode: /think" in t for t in texts) == 1


def test_prompt_completion_strings_train_on_completion_and_eos(tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "pc.jsonl", [{"prompt": "what is 2 plus 2", "completion": " the answer is 4"}])
    prepared, tokenizer = prepare(tiny_dir, [{"path": str(data)}])
    assert trained_text(tokenizer, prepared.train[0]) == [" the answer is 4<|im_end|>"]
    prepared, tokenizer = prepare(tiny_dir, [{"path": str(data)}], train={"completion_only_loss": False})
    assert trained_text(tokenizer, prepared.train[0])[0].startswith("what is 2 plus 2")


def test_conversational_prompt_completion_trains_the_answer(tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "pc.jsonl", [{
        "prompt": [{"role": "user", "content": "what is 2 plus 2"}],
        "completion": [{"role": "assistant", "content": "4"}], "chat_template_kwargs": {"enable_thinking": False}}])
    prepared, tokenizer = prepare(tiny_dir, [{"path": str(data)}])
    row = prepared.train[0]
    assert trained_text(tokenizer, row) == ["4<|im_end|>"]
    assert tokenizer.decode(row["input_ids"]).endswith("<|im_start|>assistant\n<think>\n\n</think>\n4<|im_end|>\n")


def test_text_rows_are_trained_whole_with_eos(tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", [{"text": "hello there"}])
    prepared, tokenizer = prepare(tiny_dir, [{"path": str(data)}])
    assert trained_text(tokenizer, prepared.train[0]) == ["hello there<|im_end|>"]


def test_row_kwargs_override_recipe_defaults(tiny_dir, tmp_path):
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
             "chat_template_kwargs": {"enable_thinking": True}},
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
             "chat_template_kwargs": {"enable_thinking": None}}]
    data = write_jsonl(tmp_path / "c.jsonl", rows)
    recipe = run_of({"model": {"source": str(tiny_dir)}, "template": {"kwargs": {"enable_thinking": False}},
                              "data": {"sources": [{"path": str(data)}]}, "train": {"max_length": 2048}}, "sft", "t")
    tokenizer, template = load_tokenizer(recipe.recipe.model, "smollm3")
    prepared = prepare_sft_data(recipe, tokenizer, template, use_cache=False)
    modes = [tokenizer.decode(r["input_ids"]).split("Reasoning Mode: ")[1][:9] for r in prepared.train]
    assert modes == ["/think\n\n#", "/no_think"]


def test_rows_with_nothing_trained_fail_or_are_dropped(tiny_dir, tmp_path, capsys):
    rows = chat_rows(3) + [{"messages": [{"role": "user", "content": "only a question"}]}]
    data = write_jsonl(tmp_path / "c.jsonl", rows)
    with pytest.raises(SmolalignError, match=r"c\.jsonl#3: no token is trained \(1 row\(s\)"):
        prepare(tiny_dir, [{"path": str(data)}])
    prepared, _ = prepare(tiny_dir, [{"path": str(data)}], on_untrained="drop")
    assert len(prepared.train) == 3 and prepared.stats["train"]["dropped_untrained"] == 1
    assert "dropped 1 row(s)" in capsys.readouterr().err


@pytest.mark.parametrize("row, turn", [
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " \n"}]}, "messages.1"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""},
                   {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]}, "messages.1"),
    ({"prompt": "q", "completion": ""}, "completion"),
    ({"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": ""}]},
     "completion.0"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>\n\n</think>\n"}],
      "chat_template_kwargs": {"enable_thinking": False}}, "messages.1"),
], ids=["messages", "history-turn", "text-completion", "completion-messages", "only-a-think-block"])
def test_an_empty_answer_fails_or_is_dropped(tiny_dir, tmp_path, capsys, row, turn):
    """An empty answer trains only the end of turn: the model learns to stop at once (pairs refuse it too)."""
    other = ({"prompt": "q", "completion": "a"} if "prompt" in row and isinstance(row["prompt"], str) else
             {"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]}
             if "prompt" in row else chat_rows(1)[0])
    data = write_jsonl(tmp_path / "c.jsonl", [other, other, row])
    with pytest.raises(SmolalignError, match=rf"c\.jsonl#2: {turn}: an answer is empty .*on_untrained: drop"):
        prepare(tiny_dir, [{"path": str(data)}], train={"max_length": 2048})
    prepared, _ = prepare(tiny_dir, [{"path": str(data)}], train={"max_length": 2048}, on_untrained="drop")
    assert len(prepared.train) == 2 and prepared.stats["train"]["dropped_empty"] == 1
    assert prepared.stats["train"]["dropped_untrained"] == 0
    assert "dropped 1 row(s) with an empty answer" in capsys.readouterr().err
    if "messages" in row:  # dropped between rows, before one with nothing trained: the later drop picks right
        first = write_jsonl(tmp_path / "first.jsonl", [other, row, {"messages": [{"role": "user", "content": "q"}]},
                                                       other])
        again, _ = prepare(tiny_dir, [{"path": str(first)}], train={"max_length": 2048, "packing": False},
                           on_untrained="drop")
        without = write_jsonl(tmp_path / "without.jsonl", [other, {"messages": [{"role": "user", "content": "q"}]},
                                                           other])
        kept, _ = prepare(tiny_dir, [{"path": str(without)}], train={"max_length": 2048, "packing": False},
                          on_untrained="drop")
        assert [r["input_ids"] for r in again.train] == [r["input_ids"] for r in kept.train]
        assert (again.stats["train"]["dropped_empty"], again.stats["train"]["dropped_untrained"]) == (1, 1)
        assert again.stats["train"]["tokens"] == kept.stats["train"]["tokens"]   # the dropped row's not counted


def test_the_plan_bounds_the_steps_when_rows_may_be_dropped(tiny_dir, tmp_path):
    """With data.on_untrained: drop, rows leave as they are encoded: the plan's step count is a bound, and the run
    takes at most as many steps."""
    from smolalign.plan import make_plan

    rows = chat_rows(8)
    for row in rows[:3]:
        row["messages"][-1]["content"] = ""
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    train = {"max_length": 2048, "packing": False, "per_device_train_batch_size": 2, "max_steps": -1,
             "num_train_epochs": 1}
    run = make_recipe(tiny_dir, [{"path": str(data)}], train=train, on_untrained="drop")
    assert make_plan(run, None, 8).rows["steps"].startswith("≤ 4 (1 epoch(s) of 8 rows before dropping")
    prepared, _ = prepare(tiny_dir, [{"path": str(data)}], train=train, on_untrained="drop")
    assert len(prepared.train) == 5 and run.settings.optimizer_steps(len(prepared.train)) == 3
    kept = make_recipe(tiny_dir, [{"path": str(data)}], train=train)
    assert make_plan(kept, None, 8).rows["steps"].startswith("4 (1 epoch(s) of 8 rows)")


@pytest.mark.parametrize("kwargs, system, refused, reasoning", [
    ({"enable_thinking": False}, None, True, "<think>\nwork it out\n</think>\nA"),
    ({}, "Be brief /no_think", True, "<think>\nwork it out\n</think>\nA"),
    ({"enable_thinking": False}, None, True, "<think>\nwork it out, never closed"),
    ({}, None, False, "<think>\nwork it out\n</think>\nA"),
    ({"enable_thinking": False, "strip_history_reasoning": True}, None, False, "<think>\nwork it out\n</think>\nA"),
], ids=["no_think-kwarg", "no_think-flag", "unclosed", "think", "stripped-history"])
def test_reasoning_in_a_no_think_answer_is_refused(tiny_dir, tmp_path, kwargs, system, refused, reasoning):
    """The template adds no empty think block to an answer that opens with <think>, so a no_think row that holds
    reasoning would train the model to reason in no_think mode."""
    head = [{"role": "system", "content": system}] if system else []
    row = {"messages": [*head, {"role": "user", "content": "q"},
                        {"role": "assistant", "content": reasoning},
                        {"role": "user", "content": "q2"},
                        {"role": "assistant", "content": "<think>\n\n</think>\nB"}], "chat_template_kwargs": kwargs}
    data = write_jsonl(tmp_path / "c.jsonl", [row])
    if refused:
        with pytest.raises(SmolalignError, match=r"c\.jsonl#0: messages\.\d reasons .* in no_think mode"):
            prepare(tiny_dir, [{"path": str(data)}], train={"max_length": 2048})
    else:
        prepared, _ = prepare(tiny_dir, [{"path": str(data)}], train={"max_length": 2048})
        assert len(prepared.train) == 1


def test_truncation_that_leaves_nothing_trained_is_caught(tiny_dir, tmp_path):
    long_question = "what is the sum " * 80
    rows = [{"messages": [{"role": "user", "content": long_question}, {"role": "assistant", "content": "4"}]}]
    data = write_jsonl(tmp_path / "c.jsonl", rows)
    with pytest.raises(SmolalignError, match="no token is trained"):
        prepare(tiny_dir, [{"path": str(data)}], train={"max_length": 64})
    prepared, _ = prepare(tiny_dir, [{"path": str(data)}], train={"max_length": 64, "truncation_mode": "keep_end"})
    assert len(prepared.train[0]["input_ids"]) == 64 and prepared.stats["train"]["truncated"] == 1


def test_end_of_turn_outside_the_trained_span_is_refused(tiny_dir, tmp_path):
    template = tmp_path / "bad.jinja"
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
        "{{ m.content }}{% endgeneration %}<|im_end|>\n{% else %}{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}")
    data = write_jsonl(tmp_path / "c.jsonl", chat_rows(2))
    with pytest.raises(SmolalignError, match="not the end-of-turn token '<\\|im_end\\|>'"):
        prepare(tiny_dir, [{"path": str(data)}], template=str(template))


def test_template_without_markers_needs_full_loss(tiny_dir, tmp_path):
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    data = write_jsonl(tmp_path / "c.jsonl", chat_rows(2))
    with pytest.raises(SmolalignError, match="no {% generation %} markers"):
        prepare(tiny_dir, [{"path": str(data)}], template=str(template))
    prepared, _ = prepare(tiny_dir, [{"path": str(data)}], template=str(template),
                          train={"assistant_only_loss": False})
    assert all(label != -100 for label in prepared.train[0]["labels"])


def test_think_mode_that_was_not_rendered_is_refused(tiny_dir, tmp_path):
    template = tmp_path / "always_think.jinja"
    template.write_text(
        "{# ignores enable_thinking #}<|im_start|>system\nReasoning Mode: /think<|im_end|>\n"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
        "{{ m.content }}<|im_end|>{% endgeneration %}\n{% else %}{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}")
    data = write_jsonl(tmp_path / "c.jsonl", chat_rows(2))
    with pytest.raises(SmolalignError, match=r"c\.jsonl#1: asked for no_think mode but the template rendered think"):
        prepare(tiny_dir, [{"path": str(data)}], template=str(template))


def test_second_preparation_comes_from_the_cache(tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "c.jsonl", chat_rows(6))
    first, _ = prepare(tiny_dir, [{"path": str(data)}], train={"packing": "bfd"}, use_cache=True)
    second, _ = prepare(tiny_dir, [{"path": str(data)}], train={"packing": "bfd"}, use_cache=True)
    assert not first.stats["cached"] and second.stats["cached"]
    assert first.fingerprint == second.fingerprint
    assert first.train.to_list() == second.train.to_list()
    other, _ = prepare(tiny_dir, [{"path": str(data)}], train={"packing": "bfd", "max_length": 128}, use_cache=True)
    assert other.fingerprint != first.fingerprint and not other.stats["cached"]
    data.write_text(data.read_text() + json.dumps(chat_rows(1, seed=5)[0]) + "\n")
    edited, _ = prepare(tiny_dir, [{"path": str(data)}], train={"packing": "bfd"}, use_cache=True)
    assert edited.fingerprint != first.fingerprint and not edited.stats["cached"]


def test_a_process_that_cannot_see_the_main_ones_prepared_data_is_refused(tiny_dir, tmp_path, monkeypatch):
    """Under a launcher the main process prepares first and the others read its cache: a process whose cache does
    not hold it (another node's, not shared) is refused naming SMOLALIGN_CACHE, rather than preparing it again."""
    data = write_jsonl(tmp_path / "c.jsonl", chat_rows(6))
    recipe = make_recipe(tiny_dir, [{"path": str(data)}])
    tokenizer, chat_template = load_tokenizer(recipe.recipe.model, "smollm3")
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "main-node"))
    main = prepare_sft_data(recipe, tokenizer, chat_template)
    assert not main.stats["cached"]
    other = prepare_sft_data(recipe, tokenizer, chat_template, prepared_by_another=True)
    assert other.stats["cached"] and other.train.to_list() == main.train.to_list()
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "other-node"))
    with pytest.raises(SmolalignError, match="not in this process's cache.*SMOLALIGN_CACHE"):
        prepare_sft_data(recipe, tokenizer, chat_template, prepared_by_another=True)


def test_preference_rows_are_prepared_once_and_read_from_the_cache(tiny_dir, tmp_path, monkeypatch):
    from tiny_models import pair_rows

    from smolalign.data.prepare_preference import prepare_preference_data

    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "cache"))
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(6))

    def prepared(method: str, **kwargs):
        run = run_of({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": method,
                      "data": {"sources": [{"path": str(data)}]}, "train": {"max_length": 128}}, "po", "test")
        tokenizer, chat_template = load_tokenizer(run.recipe.model, "chatml")
        return prepare_preference_data(run, tokenizer, chat_template, **kwargs)

    first = prepared("dpo")
    again = prepared("dpo", prepared_by_another=True)
    assert not first.stats["cached"] and again.stats["cached"]
    assert again.train.to_list() == first.train.to_list() and again.fingerprint == first.fingerprint
    unpaired = prepared("kto")  # KTO's rows (one answer each) are not DPO's pairs
    assert not unpaired.stats["cached"] and len(unpaired.train) == 2 * len(first.train)


def test_parquet_and_json_sources_and_worker_processes_give_the_same_rows(tiny_dir, tmp_path):
    import datasets

    rows = chat_rows(12)
    jsonl = write_jsonl(tmp_path / "c.jsonl", rows)
    parquet = tmp_path / "c.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    array = tmp_path / "c.json"
    array.write_text(json.dumps(rows))
    reference, _ = prepare(tiny_dir, [{"path": str(jsonl)}])
    for source, train in ((parquet, {}), (array, {}), (jsonl, {"dataset_num_proc": 2})):
        other, _ = prepare(tiny_dir, [{"path": str(source)}], train=train)
        assert other.train.to_list() == reference.train.to_list()
