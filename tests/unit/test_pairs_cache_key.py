"""The key that names a pairs file in the cache, and that says whether generated pairs are up to date, changes with
everything the pairs depend on: the recipe's template (its name, its kwargs, the text of a .jinja file), which every
side without a template of its own renders with, and a team's reward file a verifier or scorer runs. Otherwise
`smolalign po` reuses pairs sampled after other prompts, in another mode, or checked by an old verifier."""

import json

import pytest
from recipe_runs import loaded_run

from smolalign.inputs.pairs_file import config_key


@pytest.fixture
def recipe(tmp_path, write_recipe, tiny_dir):
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"prompt": "what is 1 plus 2", "solution": "3"}) + "\n")
    (tmp_path / "check.py").write_text("def right(completions, **kw):\n    return [1.0] * len(completions)\n")
    template = tmp_path / "mine.jinja"
    template.write_text(_chatml().read_text())
    side = {"source": str(tiny_dir)}

    def make(*overrides, graded=False, template_name="smollm3"):
        pairs = ({"graded": {"sampler": side, "n": 2, "scorer": [{"name": f"{tmp_path}/check.py:right"}]}}
                 if graded else {"strong": side, "weak": side,
                                 "verifier": {"rewards": [{"name": f"{tmp_path}/check.py:right"}]}})
        path = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": template_name},
                             "method": "apo_zero", "pairs": {"prompts": [{"path": str(tmp_path / "prompts.jsonl")}],
                                                             **pairs}})
        return loaded_run(str(path), list(overrides), "po").recipe

    make.folder, make.template = tmp_path, template
    return make


def _chatml():
    from paths import REPO

    return REPO / "chat_templates" / "chatml.jinja"


@pytest.mark.parametrize("graded", [False, True], ids=["verified", "graded"])
def test_the_key_changes_with_the_template_and_the_reward_file(recipe, graded):
    base = config_key(recipe(graded=graded))
    assert config_key(recipe(graded=graded)) == base   # the same recipe: the same pairs
    assert config_key(recipe("template.name=chatml", graded=graded)) != base
    assert config_key(recipe("template.kwargs.enable_thinking=false", graded=graded)) != base
    reward = recipe.folder / "check.py"
    reward.write_text(reward.read_text() + "# edited\n")
    assert config_key(recipe(graded=graded)) != base


def test_the_key_changes_when_a_template_file_is_edited(recipe):
    before = config_key(recipe(template_name=str(recipe.template)))
    recipe.template.write_text(recipe.template.read_text().replace(
        '{{- "<|im_start|>assistant\\n" -}}{%- endif -%}', '{{- "<|im_start|>assistant\\n<think>\\n" -}}{%- endif -%}'))
    assert config_key(recipe(template_name=str(recipe.template))) != before


def test_the_verifier_reads_each_answer_whole_in_the_mode_it_was_generated_in(recipe):
    """A template that opens `<think>\\n` in its generation prompt: the verifier gets the answer with it in front
    (else reasoning cut off by the budget reads as an answer); sides with think: null generate in the recipe's
    template mode, and the verifier is told that mode."""
    from smolalign.pairs.prompts import Prompt
    from smolalign.pairs.scorer import Scorer
    from smolalign.pairs.verified import _score
    from smolalign.recipe.generation_schema import RewardSection

    seen = {}

    def record(completions, chat_template_kwargs, **kw):
        seen.update(completions=completions, modes=chat_template_kwargs)
        return [1.0] * len(completions)

    opened = recipe.folder / "opened.jinja"
    opened.write_text(recipe.template.read_text().replace(
        '{{- "<|im_start|>assistant\\n" -}}{%- endif -%}', '{{- "<|im_start|>assistant\\n<think>\\n" -}}{%- endif -%}'))
    built = recipe(f"template.name={opened}", "template.kwargs.enable_thinking=false")
    scorer = Scorer([RewardSection("record")], [record], "pairs.verifier.rewards")
    prompt = Prompt("k", [{"role": "user", "content": "1+2?"}], "p#0", {"solution": "3"})
    answer = {"text": "1 plus 2 is 3.\n</think>\n3", "finished": True, "tokens": 8, "ids": None}
    _score(scorer, [prompt], [[answer]], built, built.pairs.weak)
    assert seen["completions"] == ["<think>\n1 plus 2 is 3.\n</think>\n3"]
    assert seen["modes"] == [{"enable_thinking": False}]
    smollm3 = recipe("template.kwargs.enable_thinking=false")
    _score(scorer, [prompt], [[{**answer, "text": "3"}]], smollm3, smollm3.pairs.weak)
    assert seen["completions"] == ["3"]   # smollm3 closes its no_think block: nothing is put in front


def test_the_key_changes_when_a_sides_own_template_file_is_edited(recipe):
    before = config_key(recipe(f"pairs.weak.template={recipe.template}"))
    recipe.template.write_text(recipe.template.read_text() + "\n")
    assert config_key(recipe(f"pairs.weak.template={recipe.template}")) != before


def test_the_pairs_are_sampled_under_the_system_prompt_they_train_under(recipe):
    """`data.system_prompt` goes into every pair's prompt in training: the generators are given it too, and the key
    holds it (else pairs sampled without it are reused, and the answers train under a prompt nobody answered)."""
    from smolalign.pairs.prompts import load_prompts

    plain = recipe()
    briefed = recipe("data.system_prompt=Answer briefly.")
    assert config_key(briefed) != config_key(plain)
    assert load_prompts(plain).prompts[0].messages == [{"role": "user", "content": "what is 1 plus 2"}]
    assert load_prompts(briefed).prompts[0].messages == [{"role": "system", "content": "Answer briefly."},
                                                        {"role": "user", "content": "what is 1 plus 2"}]
