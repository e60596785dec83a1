"""The bad-input corpus, data: rows of every format (messages, prompt/completion, preference, KTO, prompts for rl,
the prompts of `pairs:`) that would crash, or silently train on something else than written, each refused with
exit 2 and one line naming `file#row` and the field (harness: tests/badinput.py)."""

import json

import pytest
from badinput import GOOD_CHAT, GOOD_PAIR, GOOD_PROMPT, Case, jsonl, po_recipe, rl_recipe, run_refused, sft_recipe

SFT = ("sft", "{dir}/r.yaml", "--dry-run")
PO = ("po", "{dir}/r.yaml", "--dry-run")
RL = ("rl", "{dir}/r.yaml", "--dry-run")


def _chat(case_id: str, bad, *culprit: str, command=SFT) -> Case:
    """A good row, then `bad` (a row, or raw bytes for the whole file): refused naming chat.jsonl#1."""
    data = bad if isinstance(bad, bytes) else jsonl(GOOD_CHAT, bad)
    return Case(f"messages-{case_id}", command, culprit or ("{dir}/chat.jsonl#1",),
                {"r.yaml": sft_recipe(), "chat.jsonl": data})


def _turns(*messages) -> dict:
    return {"messages": list(messages)}


def _with(**changes) -> dict:
    return {**GOOD_PAIR, **changes}


USER, ANSWER = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
MESSAGES = [
    _chat("content-number", _turns({"role": "user", "content": 5}, ANSWER), "{dir}/chat.jsonl#1", "messages.0.content"),
    _chat("content-float", _turns(USER, {"role": "assistant", "content": 2.5}), "{dir}/chat.jsonl#1",
          "messages.1.content"),
    _chat("content-dict", _turns(USER, {"role": "assistant", "content": {"text": "hello"}}), "{dir}/chat.jsonl#1",
          "messages.1.content"),
    _chat("content-list-of-parts", _turns({"role": "user", "content": [{"type": "text", "text": "hi"}]}, ANSWER),
          "{dir}/chat.jsonl#1", "messages.0.content"),
    _chat("content-bool", _turns({"role": "user", "content": True}, ANSWER), "{dir}/chat.jsonl#1",
          "messages.0.content"),
    _chat("content-null-user", _turns({"role": "user", "content": None}, ANSWER), "{dir}/chat.jsonl#1",
          "messages.0.content"),
    _chat("content-missing", _turns({"role": "user"}, ANSWER), "{dir}/chat.jsonl#1", "messages.0.content"),
    _chat("assistant-content-null", _turns(USER, {"role": "assistant", "content": None}), "{dir}/chat.jsonl#1",
          "messages.1.content"),
    _chat("role-robot", _turns({"role": "robot", "content": "hi"}, ANSWER), "{dir}/chat.jsonl#1", "messages.0.role"),
    _chat("role-human", _turns({"role": "human", "content": "hi"}, ANSWER), "{dir}/chat.jsonl#1", "messages.0.role"),
    _chat("role-missing", _turns({"content": "hi"}, ANSWER), "{dir}/chat.jsonl#1", "messages.0.role"),
    _chat("role-number", _turns({"role": 1, "content": "hi"}, ANSWER), "{dir}/chat.jsonl#1", "messages.0.role"),
    _chat("role-uppercase", _turns({"role": "User", "content": "hi"}, ANSWER), "{dir}/chat.jsonl#1",
          "messages.0.role"),
    _chat("as-string", {"messages": "hi there"}, "{dir}/chat.jsonl#1", "messages"),
    _chat("as-dict", {"messages": {"role": "user", "content": "hi"}}, "{dir}/chat.jsonl#1", "messages"),
    _chat("as-number", {"messages": 3}, "{dir}/chat.jsonl#1", "messages"),
    _chat("empty-list", {"messages": []}, "{dir}/chat.jsonl#1", "messages"),
    _chat("message-is-string", {"messages": ["hi", "hello"]}, "{dir}/chat.jsonl#1", "messages.0"),
    _chat("no-assistant-turn", _turns(USER), "{dir}/chat.jsonl#1", "no token is trained"),
    _chat("only-system", _turns({"role": "system", "content": "be nice"}), "{dir}/chat.jsonl#1"),
    _chat("mixed-schema-prompt-completion", {"prompt": "hi", "completion": "hello"}, "{dir}/chat.jsonl#1",
          "messages is missing"),
    _chat("mixed-schema-text", {"text": "hello world"}, "{dir}/chat.jsonl#1", "messages is missing"),
    _chat("invalid-utf8", (json.dumps(GOOD_CHAT) + "\n").encode() + b'{"messages": "\xff\xfe"}\n',
          "{dir}/chat.jsonl#1", "UTF-8"),
    _chat("invalid-utf8-first-row", b'{"messages": [{"role": "user", "content": "caf\xe9"}]}\n',
          "{dir}/chat.jsonl#0", "UTF-8"),
    _chat("invalid-json-line", (json.dumps(GOOD_CHAT) + "\n{\"messages\": [\n").encode(), "{dir}/chat.jsonl#1",
          "invalid JSON"),
    _chat("line-is-array", (json.dumps(GOOD_CHAT) + "\n[1, 2]\n").encode(), "{dir}/chat.jsonl"),
    Case("messages-json-one-object", SFT, ("{dir}/chat.json", "one JSON object"),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.json"}]}), "chat.json": json.dumps(GOOD_CHAT)}),
    Case("messages-empty-file", SFT, ("{dir}/chat.jsonl",), {"r.yaml": sft_recipe(), "chat.jsonl": ""}),
    Case("messages-no-known-columns", SFT, ("{dir}/chat.jsonl", "format"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl({"question": "hi", "answer": "hello"})}),
    Case("messages-sharegpt-string", SFT, ("{dir}/chat.jsonl#1", "conversations"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl({"conversations": [{"from": "human", "value": "hi"},
                                                                        {"from": "gpt", "value": "hello"}]},
                                                     {"conversations": "hi"})}),
    Case("messages-sharegpt-unknown-speaker", SFT, ("{dir}/chat.jsonl#0", "messages.0.role"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl({"conversations": [{"from": "narrator", "value": "hi"},
                                                                        {"from": "gpt", "value": "hello"}]})}),
    Case("messages-unsupported-suffix", SFT, ("chat.csv",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.csv"}]}), "chat.csv": "a,b\n"}),
    Case("messages-missing-column-rename", SFT, ("conversation",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.jsonl", "columns": {"conversation": "messages"}}]}),
          "chat.jsonl": jsonl(GOOD_CHAT)}),
    Case("messages-preview-content-number", ("data", "preview", "{dir}/r.yaml"), ("{dir}/chat.jsonl#1",
                                                                                "messages.0.content"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl(GOOD_CHAT, _turns({"role": "user", "content": 5}, ANSWER))}),
    Case("messages-preview-role-robot", ("data", "preview", "{dir}/r.yaml"), ("{dir}/chat.jsonl#1",
                                                                            "messages.0.role"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl(GOOD_CHAT, _turns({"role": "robot", "content": "x"}, ANSWER))}),
    Case("messages-row-outside-sample", SFT, ("{dir}/chat.jsonl#299", "messages.1.role"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl(*[GOOD_CHAT] * 299, _turns(USER, {"role": "bot", "content": "x"}),
                                                     *[GOOD_CHAT] * 200)}),
    Case("messages-held-out-row", SFT, ("{dir}/chat.jsonl#", "messages.0.content"),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.jsonl"}], "eval_split": 0.5}),
          "chat.jsonl": jsonl(*[GOOD_CHAT] * 3, _turns({"role": "user", "content": 1}, ANSWER))}),
    Case("preference-row-outside-sample", PO, ("{dir}/pairs.jsonl#150", "chosen.0.content"),
         {"r.yaml": po_recipe(), "pairs.jsonl": jsonl(*[GOOD_PAIR] * 150, _with(chosen=[{"role": "assistant",
                                                                                       "content": 0}]))}),
    Case("messages-random-sample-row", SFT, ("{dir}/chat.jsonl#70", "messages.0.content"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl(*[GOOD_CHAT] * 70, _turns({"role": "user", "content": 7}, ANSWER),
                                                     *[GOOD_CHAT] * 10)}),
]


def _pc(case_id: str, bad: dict, *culprit: str) -> Case:
    good = {"prompt": [USER], "completion": [ANSWER]}
    return Case(f"prompt-completion-{case_id}", SFT, ("{dir}/chat.jsonl#1", *culprit),
                {"r.yaml": sft_recipe(), "chat.jsonl": jsonl(good, bad)})


PROMPT_COMPLETION = [
    _pc("completion-number", {"prompt": [USER], "completion": [{"role": "assistant", "content": 4}]},
        "completion.0.content"),
    _pc("prompt-content-dict", {"prompt": [{"role": "user", "content": {"q": 1}}], "completion": [ANSWER]},
        "prompt.0.content"),
    _pc("prompt-role-robot", {"prompt": [{"role": "robot", "content": "hi"}], "completion": [ANSWER]},
        "prompt.0.role"),
    _pc("completion-null", {"prompt": [USER], "completion": None}, "completion is missing"),
    _pc("completion-empty", {"prompt": [USER], "completion": []}, "completion"),
    _pc("string-and-messages", {"prompt": "hi", "completion": [ANSWER]}, "completion must be text"),
    _pc("completion-string-in-list", {"prompt": [USER], "completion": ["hello"]}, "completion.0"),
    # datasets reads a column of strings and numbers as JSON, so the string "4" of row 0 arrives as a number too
    Case("prompt-completion-text-number", SFT, ("{dir}/chat.jsonl#", "completion must be text"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl({"prompt": "2+2=", "completion": "4"},
                                                     {"prompt": "3+3=", "completion": 6})}),
    Case("text-number", SFT, ("{dir}/chat.jsonl#1", "text"),
         {"r.yaml": sft_recipe(train={"assistant_only_loss": False}),
          "chat.jsonl": jsonl({"text": "hello"}, {"text": 5})}),
]


def _pair(case_id: str, bad: dict, *culprit: str, method: str = "dpo") -> Case:
    return Case(f"preference-{case_id}", PO, ("{dir}/pairs.jsonl#1", *culprit),
                {"r.yaml": po_recipe(method=method), "pairs.jsonl": jsonl(GOOD_PAIR, bad)})


PREFERENCE = [
    _pair("identical-conversational", _with(rejected=GOOD_PAIR["chosen"]), "identical"),
    _pair("identical-text", {"prompt": "hi", "chosen": "hello", "rejected": "hello"}, "identical"),
    _pair("chosen-number", _with(chosen=[{"role": "assistant", "content": 1}]), "chosen.0.content"),
    _pair("rejected-dict", _with(rejected=[{"role": "assistant", "content": {"a": 1}}]), "rejected.0.content"),
    _pair("chosen-role-robot", _with(chosen=[{"role": "robot", "content": "x"}]), "chosen.0.role"),
    _pair("chosen-null", _with(chosen=None), "chosen is missing"),
    _pair("prompt-content-number", _with(prompt=[{"role": "user", "content": 3}]), "prompt.0.content"),
    _pair("prompt-number", _with(prompt=42), "prompt"),
    _pair("chosen-empty-answer", _with(chosen=[{"role": "assistant", "content": ""}]), "empty"),
    _pair("answer-is-user-turn", _with(chosen=[{"role": "user", "content": "x"}]), "chosen"),
    Case("preference-no-rejected-column", PO, ("{dir}/pairs.jsonl", "rejected"),
         {"r.yaml": po_recipe(), "pairs.jsonl": jsonl({"prompt": "hi", "chosen": "hello"})}),
    Case("preference-messages-data", PO, ("messages",),
         {"r.yaml": po_recipe(), "pairs.jsonl": jsonl(GOOD_CHAT)}),
    Case("preference-invalid-utf8", PO, ("{dir}/pairs.jsonl#0", "UTF-8"),
         {"r.yaml": po_recipe(), "pairs.jsonl": b'{"prompt": "\xff", "chosen": "a", "rejected": "b"}\n'}),
]

KTO_GOOD = {"prompt": [USER], "completion": [ANSWER], "label": True}
KTO = [
    Case(f"kto-{case_id}", PO, ("{dir}/pairs.jsonl#1", *culprit),
         {"r.yaml": po_recipe(method="kto"), "pairs.jsonl": jsonl(KTO_GOOD, {**KTO_GOOD, **bad})})
    for case_id, bad, culprit in [
        ("label-string", {"label": "yes"}, ("label",)),
        ("label-two", {"label": 2}, ("label",)),
        ("completion-number", {"completion": [{"role": "assistant", "content": 9}]}, ("completion.0.content",)),
        ("prompt-role-robot", {"prompt": [{"role": "robot", "content": "x"}]}, ("prompt.0.role",)),
        ("completion-null", {"completion": None}, ("completion is missing",)),
    ]
] + [
    Case("kto-unpaired-with-dpo", PO, ("kto",), {"r.yaml": po_recipe(), "pairs.jsonl": jsonl(KTO_GOOD, KTO_GOOD)}),
]


def _prompts(case_id: str, bad: dict, *culprit: str) -> Case:
    return Case(f"rl-prompts-{case_id}", RL, ("{dir}/prompts.jsonl#1", *culprit),
                {"r.yaml": rl_recipe(), "prompts.jsonl": jsonl(GOOD_PROMPT, bad)})


RL_PROMPTS = [
    _prompts("content-number", {"prompt": [{"role": "user", "content": 5}]}, "prompt.0.content"),
    _prompts("role-robot", {"prompt": [{"role": "robot", "content": "hi"}]}, "prompt.0.role"),
    _prompts("prompt-number", {"prompt": 5}, "prompt"),
    _prompts("prompt-dict", {"prompt": {"role": "user", "content": "hi"}}, "prompt"),
    _prompts("ends-with-assistant", {"prompt": [USER, ANSWER]}, "user message"),
    _prompts("empty-list", {"prompt": []}, "prompt"),
    _prompts("messages-content-dict", {"messages": [{"role": "user", "content": {"a": 1}}]}, "messages.0.content"),
    Case("rl-prompts-no-prompt-column", RL, ("{dir}/prompts.jsonl", "prompt"),
         {"r.yaml": rl_recipe(), "prompts.jsonl": jsonl({"question": "hi"})}),
    Case("rl-prompts-invalid-utf8", RL, ("{dir}/prompts.jsonl#0", "UTF-8"),
         {"r.yaml": rl_recipe(), "prompts.jsonl": b'{"prompt": "\xc3\x28"}\n'}),
]


def _pairs_recipe(prompts_file: str = "{dir}/prompts.jsonl") -> str:
    side = {"source": "{tiny}", "max_new_tokens": 4}
    return po_recipe(method="apo_zero", data=None, pairs={"prompts": [{"path": prompts_file}], "strong": side,
                                                          "weak": side})


PAIRS = [
    Case("pairs-prompt-content-number", PO, ("{dir}/prompts.jsonl#1", "prompt.0.content"),
         {"r.yaml": _pairs_recipe(), "prompts.jsonl": jsonl(GOOD_PROMPT, {"prompt": [{"role": "user", "content": 1}]})}),
    Case("pairs-prompt-role-robot", PO, ("{dir}/prompts.jsonl#1", "prompt.0.role"),
         {"r.yaml": _pairs_recipe(), "prompts.jsonl": jsonl(GOOD_PROMPT, {"prompt": [{"role": "robot", "content": "x"}]})}),
    Case("pairs-prompt-invalid-utf8", PO, ("{dir}/prompts.jsonl#0", "UTF-8"),
         {"r.yaml": _pairs_recipe(), "prompts.jsonl": b'{"prompt": "\xff"}\n'}),
    Case("pairs-prompts-missing-file", PO, ("{dir}/none.jsonl",), {"r.yaml": _pairs_recipe("{dir}/none.jsonl")}),
    Case("pairs-prompt-string-messages", PO, ("{dir}/prompts.jsonl#1", "messages"),
         {"r.yaml": _pairs_recipe(), "prompts.jsonl": jsonl({"messages": [USER]}, {"messages": "hi"})}),
]

CASES = MESSAGES + PROMPT_COMPLETION + PREFERENCE + KTO + RL_PROMPTS + PAIRS


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)
