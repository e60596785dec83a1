"""The bad-input corpus, what renders and scores the data: chat templates (in a recipe and in `template render`),
reward functions (built-in and a team's own file) and the `eval:` section / `smolalign eval`, each refused with
exit 2 and one line naming the file, line, function or key (harness: tests/badinput.py)."""

import json

import pytest
from badinput import GOOD_CHAT, GOOD_PROMPT, Case, jsonl, rl_recipe, run_refused, sft_recipe

SFT = ("sft", "{dir}/r.yaml", "--dry-run")
RL = ("rl", "{dir}/r.yaml", "--dry-run")
RENDER = ("template", "render", "smollm3", "--messages", "{dir}/m.json")
_CHAT = jsonl(GOOD_CHAT)
_MARKED = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
           "{{ m.content }}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _template(case_id: str, text, *culprit: str) -> Case:
    files = {"r.yaml": sft_recipe(template={"name": "{dir}/t.jinja"}), "chat.jsonl": _CHAT, "t.jinja": text}
    return Case(f"template-{case_id}", SFT, culprit, files)


TEMPLATES = [
    _template("syntax-unclosed-tag", _MARKED.replace("{% endfor %}", ""), "{dir}/t.jinja", "line 4"),
    _template("syntax-line-3", "{% for m in messages %}\n{{ m.content }}\n{{ m.role }\n{% endfor %}", "{dir}/t.jinja",
              "line 3"),
    _template("syntax-unknown-tag", "{% frobnicate %}", "{dir}/t.jinja", "line 1"),
    _template("syntax-bad-expression", "{{ messages[ }}", "{dir}/t.jinja", "line 1"),
    _template("not-utf8", b"{{ messages }}\xff\xfe", "{dir}/t.jinja", "UTF-8"),
    _template("no-generation-markers", "{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}",
              "generation"),
    _template("end-of-turn-untrained", _MARKED.replace("<|im_end|>{% endgeneration %}",
                                                       "{% endgeneration %}<|im_end|>"), "{dir}/chat.jsonl#0"),
    _template("raises", "{{ raise_exception('no system messages here') }}", "t"),
    Case("template-missing-file", SFT, ("{dir}/none.jinja",),
         {"r.yaml": sft_recipe(template={"name": "{dir}/none.jinja"}), "chat.jsonl": _CHAT}),
    Case("template-unknown-name", SFT, ("smolm3",), {"r.yaml": sft_recipe(template={"name": "smolm3"}),
                                                   "chat.jsonl": _CHAT}),
    Case("template-kwargs-not-mapping", SFT, ("template.kwargs",),
         {"r.yaml": sft_recipe(template={"name": "smollm3", "kwargs": [1]}), "chat.jsonl": _CHAT}),
    Case("template-render-syntax-error", ("template", "render", "{dir}/t.jinja", "--messages", "{dir}/m.json"),
         ("{dir}/t.jinja", "line 1"), {"t.jinja": "{% if %}", "m.json": json.dumps(GOOD_CHAT["messages"])}),
    Case("template-render-content-number", RENDER, ("--messages", "messages.0.content"),
         {"m.json": json.dumps([{"role": "user", "content": 5}])}),
    Case("template-render-content-dict", RENDER, ("--messages", "messages.1.content"),
         {"m.json": json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": {"a": 1}}])}),
    Case("template-render-role-robot", RENDER, ("--messages", "messages.0.role"),
         {"m.json": json.dumps([{"role": "robot", "content": "hi"}])}),
    Case("template-render-not-list", RENDER, ("--messages", "messages"), {"m.json": json.dumps("hello")}),
    Case("template-render-row-messages-string", RENDER, ("--messages", "messages"),
         {"m.json": json.dumps({"messages": "hello"})}),
    Case("template-render-invalid-json", RENDER, ("--messages", "invalid JSON"), {"m.json": "[{\"role\": "}),
    Case("template-render-missing-file", RENDER, ("--messages",)),
    Case("template-render-kwargs-not-json", (*RENDER, "--kwargs", "{enable_thinking}"), ("--kwargs",),
         {"m.json": json.dumps(GOOD_CHAT["messages"])}),
    Case("template-render-kwargs-list", (*RENDER, "--kwargs", "[1]"), ("--kwargs",),
         {"m.json": json.dumps(GOOD_CHAT["messages"])}),
    Case("template-render-unknown-template", ("template", "render", "smolm3", "--messages", "{dir}/m.json"),
         ("smolm3",), {"m.json": json.dumps(GOOD_CHAT["messages"])}),
]


def _reward(case_id: str, code: str, *culprit: str, function: str = "score") -> Case:
    files = {"r.yaml": rl_recipe(rewards=[{"name": f"{{dir}}/my_reward.py:{function}"}]),
             "prompts.jsonl": jsonl(GOOD_PROMPT, GOOD_PROMPT), "my_reward.py": code}
    return Case(f"reward-{case_id}", RL, (f"my_reward.py:{function}", *culprit), files)


REWARDS = [
    _reward("positional-parameter", "def score(x):\n    return [0.0]\n", "'x'"),
    _reward("unknown-keyword", "def score(completions, answer, **kwargs):\n    return [0.0] * len(completions)\n",
            "'answer'"),
    _reward("no-kwargs", "def score(completions, prompts):\n    return [0.0] * len(completions)\n", "**kwargs"),
    _reward("positional-only", "def score(completions, /, **kwargs):\n    return [0.0] * len(completions)\n",
            "'completions'"),
    _reward("returns-strings", "def score(completions, **kwargs):\n    return ['good' for _ in completions]\n",
            "numbers"),
    _reward("returns-scalar", "def score(completions, **kwargs):\n    return 1.0\n", "list"),
    _reward("returns-none", "def score(completions, **kwargs):\n    pass\n", "list"),
    _reward("returns-too-many", "def score(completions, **kwargs):\n    return [1.0, 0.0, 0.5]\n",
            "one score per completion"),
    _reward("returns-dict", "def score(completions, **kwargs):\n    return [{'score': 1}]\n", "numbers"),
    _reward("returns-bools", "def score(completions, **kwargs):\n    return [True for _ in completions]\n",
            "numbers"),
    _reward("raises", "def score(completions, **kwargs):\n    return [1 / 0 for _ in completions]\n",
            "ZeroDivisionError"),
    _reward("reads-missing-column", "def score(completions, **kwargs):\n    return [float(kwargs['answer'][0])]\n",
            "KeyError"),
    _reward("import-error", "import not_a_module_anywhere\n", "does not import"),
    _reward("syntax-error", "def score(:\n", "does not import"),
    _reward("no-such-function", "def other(completions, **kwargs):\n    return [0.0]\n", "score"),
    _reward("not-callable", "score = 3\n", "score"),
    Case("reward-missing-file", RL, ("{dir}/none.py",),
         {"r.yaml": rl_recipe(rewards=[{"name": "{dir}/none.py:score"}]), "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-unknown-builtin", RL, ("think_formt",),
         {"r.yaml": rl_recipe(rewards=[{"name": "think_formt"}]), "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-unknown-param", RL, ("soft_overlong", "bogus"),
         {"r.yaml": rl_recipe(rewards=[{"name": "soft_overlong", "params": {"bogus": 1}}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    # A parameter of the wrong type was swallowed where the reward used it: every gold answer then "did not parse".
    Case("reward-param-wrong-type", RL, ("math_accuracy", "'timeout_seconds'", "float or int", "'x'"),
         {"r.yaml": rl_recipe(rewards=[{"name": "math_accuracy", "params": {"timeout_seconds": "x"}}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-param-bool-for-int", RL, ("repetition", "'ngram_size'", "int"),
         {"r.yaml": rl_recipe(rewards=[{"name": "repetition", "params": {"ngram_size": True}}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-param-out-of-range", RL, ("repetition", "ngram_size must be at least 1"),
         {"r.yaml": rl_recipe(rewards=[{"name": "repetition", "params": {"ngram_size": 0}}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-missing-column", RL, ("math_accuracy", "solution"),
         {"r.yaml": rl_recipe(rewards=[{"name": "math_accuracy"}]),
          "prompts.jsonl": jsonl({"prompt": [{"role": "user", "content": "2+2?"}]})}),
    # A gold answer math-verify cannot parse would leave its prompt unscored for the whole run: named before it.
    Case("reward-gold-does-not-parse", RL, ("math_accuracy", "{dir}/prompts.jsonl#1", "'a moose?'", "math-verify"),
         {"r.yaml": rl_recipe(rewards=[{"name": "math_accuracy"}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT, {**GOOD_PROMPT, "solution": "a moose?"})}),
    Case("reward-golds-do-not-parse-first-few-named", RL,
         ("math_accuracy", "{dir}/prompts.jsonl#2", "{dir}/prompts.jsonl#3", "{dir}/prompts.jsonl#6", "7 rows in all"),
         {"r.yaml": rl_recipe(rewards=[{"name": "math_accuracy"}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT, GOOD_PROMPT, *({**GOOD_PROMPT, "solution": f"bad{i}"} for i in range(7)))}),
    Case("reward-gold-in-named-column-does-not-parse", RL, ("math_accuracy", "{dir}/prompts.jsonl#0", "'answer'"),
         {"r.yaml": rl_recipe(rewards=[{"name": "math_accuracy", "params": {"gold_column": "answer"}}]),
          "prompts.jsonl": jsonl({**GOOD_PROMPT, "answer": "no idea"})}),
    Case("reward-cosine-gold-does-not-parse", RL, ("cosine_length", "{dir}/prompts.jsonl#1", "math-verify"),
         {"r.yaml": rl_recipe(rewards=[{"name": "cosine_length", "params": {"max_length": 8}}]),
          "prompts.jsonl": jsonl(GOOD_PROMPT, {**GOOD_PROMPT, "solution": "a moose?"})}),
    Case("reward-no-rewards", RL, ("rewards",), {"r.yaml": rl_recipe(rewards=[]), "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-num-generations-one", RL, ("train.num_generations",),
         {"r.yaml": rl_recipe(train={"num_generations": 1}), "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    Case("reward-temperature-zero", RL, ("train.temperature",),
         {"r.yaml": rl_recipe(train={"temperature": 0}), "prompts.jsonl": jsonl(GOOD_PROMPT)}),
]


def _team_reward_elsewhere(case: Case) -> list[Case]:
    """The same team reward through `rewards test` and `smolalign eval`: one check, refused the same way."""
    code = case.files["my_reward.py"]
    culprit = case.culprit
    completions = jsonl({"completion": "4", **GOOD_PROMPT}, {"completion": "5", **GOOD_PROMPT})
    name = culprit[0].split(":")[1]
    return [Case(case.id.replace("reward-", "rewards-test-"),
                 ("rewards", "test", f"{{dir}}/my_reward.py:{name}", "--completions", "{dir}/c.jsonl"), culprit,
                 {"my_reward.py": code, "c.jsonl": completions}),
            Case(case.id.replace("reward-", "eval-reward-"),
                 ("eval", "{tiny}", "--data", "{dir}/eval.jsonl", "--reward", f"{{dir}}/my_reward.py:{name}"),
                 culprit, {"my_reward.py": code, "eval.jsonl": jsonl(GOOD_PROMPT, GOOD_PROMPT)})]


# The team reward's check is one function; training, `rewards test` and eval all call it.
_TEAM = [c for c in REWARDS if c.id.startswith("reward-") and "my_reward.py" in c.files]
_SCORED = [
    Case("rewards-test-signature-without-column",
         ("rewards", "test", "{dir}/sig.py:score", "--completions", "{dir}/c.jsonl"), ("sig.py:score", "solution"),
         {"sig.py": "def score(completions):\n    return [0.0] * len(completions)\n",
          "c.jsonl": jsonl({"completion": "4", **GOOD_PROMPT})}),
    Case("rewards-test-strings-for-answers",
         ("rewards", "test", "{dir}/wrong_return.py:score", "--completions", "{dir}/c.jsonl"),
         ("{dir}/c.jsonl#0", "wrong_return.py:score", "numbers"),
         {"wrong_return.py": "def score(completions, **kwargs):\n    return [c if isinstance(c, str) and c else 0.0 for c in completions]\n",
          "c.jsonl": jsonl({"completion": "4", **GOOD_PROMPT})}),
    Case("rewards-test-raises-on-an-answer",
         ("rewards", "test", "{dir}/r.py:score", "--completions", "{dir}/c.jsonl"),
         ("{dir}/c.jsonl#1", "r.py:score", "ZeroDivisionError"),
         {"r.py": "def score(completions, **kwargs):\n    return [1 / (c != '5') for c in completions]\n",
          "c.jsonl": jsonl({"completion": "4", **GOOD_PROMPT}, {"completion": "5", **GOOD_PROMPT})}),
]
TEAM_ELSEWHERE = [c for case in _TEAM for c in _team_reward_elsewhere(case)] + _SCORED

_EVAL = {"data": [{"path": "{dir}/eval.jsonl"}], "rewards": [{"name": "math_accuracy"}]}


def _eval(case_id: str, changes: dict, *culprit: str, rows: str = jsonl(GOOD_PROMPT)) -> Case:
    return Case(f"eval-{case_id}", SFT, culprit, {"r.yaml": sft_recipe(eval={**_EVAL, **changes}),
                                                  "chat.jsonl": _CHAT, "eval.jsonl": rows})


EVAL = [
    _eval("unknown-key", {"bogus": 1}, "eval.bogus"),
    _eval("unknown-reward", {"rewards": [{"name": "math_acuracy"}]}, "eval.rewards.0", "math_acuracy"),
    _eval("no-rewards", {"rewards": []}, "eval", "rewards"),
    _eval("unknown-mode", {"modes": ["fast"]}, "eval", "fast"),
    _eval("samples-zero", {"samples": 0}, "eval", "samples"),
    _eval("top-p-zero", {"top_p": 0}, "eval", "top_p"),
    _eval("missing-file", {"data": [{"path": "{dir}/none.jsonl"}]}, "{dir}/none.jsonl"),
    _eval("gold-does-not-parse", {}, "math_accuracy", "{dir}/eval.jsonl#1", "math-verify",
          rows=jsonl(GOOD_PROMPT, {**GOOD_PROMPT, "solution": "a moose?"})),
    Case("eval-command-gold-does-not-parse", ("eval", "{tiny}", "--data", "{dir}/eval.jsonl", "--reward",
                                              "math_accuracy"), ("math_accuracy", "{dir}/eval.jsonl#1", "math-verify"),
         {"eval.jsonl": jsonl(GOOD_PROMPT, {**GOOD_PROMPT, "solution": "a moose?"})}),
    Case("eval-command-no-reward", ("eval", "{tiny}", "--data", "{dir}/eval.jsonl"), ("--reward",),
         {"eval.jsonl": jsonl(GOOD_PROMPT)}),
    Case("eval-command-samples-text", ("eval", "{tiny}", "--data", "{dir}/eval.jsonl", "--reward", "math_accuracy",
                                       "-k", "many"), ("-k",), {"eval.jsonl": jsonl(GOOD_PROMPT)}),
]

CASES = TEMPLATES + REWARDS + TEAM_ELSEWHERE + EVAL


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)
