"""The bad-input corpus, reasoning-gym: a task that does not exist (the closest named), a config key its task does not
take (named, with the nearest field), a config its task refuses, the source's keys on another kind of source, the
same through `smolalign eval --data` and a recipe's `eval:` section, the reward's parameters and column, and the
library missing (the extra to install named): each exit 2 with one line, before any model loads (harness:
tests/badinput.py)."""

import sys

import pytest
from badinput import GOOD_PROMPT, Case, jsonl, rl_recipe, run_refused, sft_recipe

RL = ("rl", "{dir}/r.yaml", "--dry-run")
SFT = ("sft", "{dir}/r.yaml", "--dry-run")
REWARD = [{"name": "reasoning_gym"}]


def _source(case_id: str, source: dict, *culprit: str, rewards=REWARD) -> Case:
    return Case(f"rg-{case_id}", RL, culprit, {"r.yaml": rl_recipe(data={"sources": [source]}, rewards=rewards),
                                               "prompts.jsonl": jsonl(GOOD_PROMPT)})


def _eval(case_id: str, data: str, *culprit: str) -> Case:
    return Case(f"rg-eval-{case_id}", ("eval", "{tiny}", "--data", data, "--reward", "reasoning_gym"), culprit)


CASES = [
    _source("unknown-task", {"path": "reasoning_gym:chain_sun"}, "data.sources.0", "'chain_sun'",
            "closest: chain_sum"),
    _source("unknown-task-far", {"path": "reasoning_gym:sudokuu"}, "'sudokuu'", "sudoku"),
    _source("composite", {"path": "reasoning_gym:composite"}, "'composite'", "several reasoning_gym:TASK sources"),
    _source("unseeded-task", {"path": "reasoning_gym:list_functions"}, "data.sources.0", "'list_functions'",
            "whatever its seed"),
    _source("unknown-config-key", {"path": "reasoning_gym:chain_sum", "config": {"min_term": 2}}, "data.sources.0",
            "chain_sum", "'min_term'", "did you mean min_terms"),
    _source("config-seed", {"path": "reasoning_gym:chain_sum", "config": {"seed": 2}}, "config.seed"),
    _source("config-refused", {"path": "reasoning_gym:chain_sum", "config": {"min_terms": 5, "max_terms": 2}},
            "data.sources.0", "chain_sum", "max_terms must be >= min_terms"),
    _source("config-wrong-type", {"path": "reasoning_gym:chain_sum", "config": {"min_terms": "two"}},
            "data.sources.0", "chain_sum"),
    _source("config-not-mapping", {"path": "reasoning_gym:chain_sum", "config": [1, 2]}, "data.sources.0.config"),
    _source("size-zero", {"path": "reasoning_gym:chain_sum", "size": 0}, "data.sources.0", "size"),
    _source("size-text", {"path": "reasoning_gym:chain_sum", "size": "many"}, "data.sources.0.size"),
    _source("hub-name", {"path": "reasoning_gym:chain_sum", "name": "main"}, "data.sources.0", "name"),
    _source("size-on-a-file", {"path": "{dir}/prompts.jsonl", "size": 10}, "data.sources.0", "size",
            "{dir}/prompts.jsonl", rewards=[{"name": "think_format"}]),
    _source("config-on-a-hub-id", {"path": "openai/gsm8k", "config": {"x": 1}}, "data.sources.0", "config",
            rewards=[{"name": "think_format"}]),
    _source("reward-unknown-param", {"path": "reasoning_gym:chain_sum", "size": 4}, "reasoning_gym", "'tag'",
            "answer_tag", rewards=[{"name": "reasoning_gym", "params": {"tag": "answer"}}]),
    _source("reward-require-tag-without-tag", {"path": "reasoning_gym:chain_sum", "size": 4}, "reasoning_gym",
            "require_tag", rewards=[{"name": "reasoning_gym", "params": {"answer_tag": None, "require_tag": True}}]),
    Case("rg-reward-on-rows-without-the-column", RL, ("reasoning_gym", "'reasoning_gym'"),
         {"r.yaml": rl_recipe(rewards=REWARD), "prompts.jsonl": jsonl(GOOD_PROMPT)}),
    # A hand-written column is checked before training (the data check), not at the first batch that holds it.
    Case("rg-written-column-unknown-task", RL, ("reasoning_gym", "{dir}/prompts.jsonl#1", "'chain_sun'"),
         {"r.yaml": rl_recipe(rewards=REWARD), "prompts.jsonl": jsonl(
             {**GOOD_PROMPT, "reasoning_gym": {"task": "chain_sum", "config": {}, "entry": {"answer": "4"}}},
             {**GOOD_PROMPT, "reasoning_gym": {"task": "chain_sun", "config": {}, "entry": {"answer": "4"}}})}),
    Case("rg-written-column-unknown-config-key", RL, ("reasoning_gym", "{dir}/prompts.jsonl#0", "'min_term'"),
         {"r.yaml": rl_recipe(rewards=REWARD), "prompts.jsonl": jsonl(
             {**GOOD_PROMPT, "reasoning_gym": {"task": "chain_sum", "config": {"min_term": 2}, "entry": {}}})}),
    Case("rg-written-column-not-json", RL, ("reasoning_gym", "{dir}/prompts.jsonl#0", "{task, config"),
         {"r.yaml": rl_recipe(rewards=REWARD), "prompts.jsonl": jsonl({**GOOD_PROMPT, "reasoning_gym": "{task: x"})}),
    Case("rg-recipe-eval-section", SFT, ("eval.data.0", "'chain_sun'"),
         {"r.yaml": sft_recipe(eval={"data": [{"path": "reasoning_gym:chain_sun"}], "rewards": REWARD}),
          "chat.jsonl": jsonl({"messages": [{"role": "user", "content": "hi"},
                                            {"role": "assistant", "content": "hello"}]})}),
    _eval("unknown-task", "reasoning_gym:chain_sun", "--data reasoning_gym:chain_sun", "chain_sum"),
    _eval("unknown-config-key", "reasoning_gym:chain_sum {size: 4, config: {min_term: 2}}",
          "--data reasoning_gym:chain_sum", "'min_term'"),
    _eval("unknown-source-key", "reasoning_gym:chain_sum {sise: 4}", "--data reasoning_gym:chain_sum", "sise",
          "size"),
    _eval("not-a-mapping", "reasoning_gym:chain_sum 4", "--data", "a mapping"),
    _eval("bad-yaml", "reasoning_gym:chain_sum {size: [", "--data reasoning_gym:chain_sum", "invalid YAML"),
    Case("rg-rewards-test-missing-column",
         ("rewards", "test", "reasoning_gym", "--completions", "{dir}/c.jsonl"), ("{dir}/c.jsonl#1", "reasoning_gym"),
         {"c.jsonl": jsonl({"completion": "4", "reasoning_gym": None}, {"completion": "4"})}),
    Case("rg-rewards-test-unknown-task",
         ("rewards", "test", "reasoning_gym", "--completions", "{dir}/c.jsonl"), ("{dir}/c.jsonl#0", "'chain_sun'"),
         {"c.jsonl": jsonl({"completion": "4", "reasoning_gym": {"task": "chain_sun", "entry": {"answer": "4"}}})}),
    Case("rg-rewards-test-not-a-row",
         ("rewards", "test", "reasoning_gym", "--completions", "{dir}/c.jsonl"), ("{dir}/c.jsonl#0", "{task, config"),
         {"c.jsonl": jsonl({"completion": "4", "reasoning_gym": "4"})}),
    Case("rg-rewards-test-not-json",
         ("rewards", "test", "reasoning_gym", "--completions", "{dir}/c.jsonl"), ("{dir}/c.jsonl#0", "{task, config"),
         {"c.jsonl": jsonl({"completion": "4", "reasoning_gym": "{task: chain_sum"})}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)


NOT_INSTALLED = [
    _source("not-installed-source", {"path": "reasoning_gym:chain_sum"}, "data.sources.0",
            "pip install 'smolalign[reasoning-gym]'", rewards=[{"name": "think_format"}]),
    _source("not-installed-reward", {"path": "{dir}/prompts.jsonl"}, "reasoning_gym",
            "pip install 'smolalign[reasoning-gym]'"),
    _eval("not-installed", "reasoning_gym:chain_sum", "--data reasoning_gym:chain_sum",
          "pip install 'smolalign[reasoning-gym]'"),
    Case("rg-rewards-test-not-installed", ("rewards", "test", "reasoning_gym", "--completions", "{dir}/c.jsonl"),
         ("reasoning_gym", "pip install 'smolalign[reasoning-gym]'"), {"c.jsonl": jsonl({"completion": "4"})}),
]


@pytest.mark.parametrize("case", NOT_INSTALLED, ids=lambda c: c.id)
def test_refused_without_the_library(case, cli, tmp_path, tiny_dir, monkeypatch):
    for name in [m for m in sys.modules if m == "reasoning_gym" or m.startswith("reasoning_gym.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # `import reasoning_gym` raises ImportError
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)
