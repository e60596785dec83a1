"""One rule for a row's think mode: the smollm3 template renders a row and the rewards score the same row, and the
mode the rewards apply is the one the rendered text shows (its "Reasoning Mode:" line and whether the generation
prompt is prefilled with an empty think block), for flags with punctuation, tabs, newlines and look-alikes."""

import json

import pytest
from paths import REPO

from rewards import resolve_reward
from rewards.think_mode import row_mode, scan_flags, with_mode_flag, without_mode_flags
from smolalign.errors import SmolalignError
from smolalign.templates.registry import resolve_template
from smolalign.templates.render import render

SMOLLM3 = resolve_template("smollm3")
STUB = "<think>\n\n</think>\n"
SYSTEMS = [
    "Answer briefly /no_think.", "Answer briefly\t/no_think", "Answer briefly /no_think", "(/no_think) Answer.",
    "Answer briefly,/no_think!", "/no_think\nAnswer briefly.", "Answer.\n/think\n", "Think hard /think.",
    "Explain /thinking carefully.", "Use /no_think_x here.", "a/no_think", "/no_think/x", "x //no_think",
    "Both /think and /no_think.", "Plain instructions.", "/no_think", "\t/think",
]
THINK_ANSWER = "<think>\nadd them\n</think>\n4"
BARE_ANSWER = "4"


def rendered_mode(text: str) -> str:
    """The mode as the rendered prompt shows it: its metadata line, and the prefilled empty think block."""
    metadata = text.split("Reasoning Mode: /", 1)[1].split("\n", 1)[0]
    prefilled = text.endswith("<|im_start|>assistant\n" + STUB)
    assert (metadata == "no_think") == prefilled, "the template disagrees with itself"
    return metadata


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("enable_thinking", [True, False, None])
def test_template_and_rewards_agree_on_every_row(system, enable_thinking):
    prompt = [{"role": "system", "content": system}, {"role": "user", "content": "2 + 2?"}]
    kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    text, _ = render(SMOLLM3, prompt, add_generation_prompt=True, **kwargs)
    mode = rendered_mode(text)

    think_format = resolve_reward("think_format")
    scores = think_format([[{"role": "assistant", "content": a}] for a in (THINK_ANSWER, BARE_ANSWER)],
                          prompts=[prompt, prompt], chat_template_kwargs=[kwargs, kwargs])
    assert scores == ([1.0, 0.0] if mode == "think" else [0.0, 1.0])

    overlong = resolve_reward("soft_overlong", {"max_length": 10, "cache": 5, "think_max_length": 100,
                                                "think_cache": 50})
    score = overlong(["x"], completion_ids=[[0] * 8], prompts=[prompt], chat_template_kwargs=[kwargs])[0]
    assert score == (0.0 if mode == "think" else pytest.approx(-0.6))   # (10 - 5 - 8) / 5 under the no_think limit
    assert row_mode(prompt, kwargs) == mode


@pytest.mark.parametrize(("system", "instructions"), [
    ("Answer briefly /no_think.", "Answer briefly."),
    ("Answer briefly\t/no_think", "Answer briefly"),
    ("/think Explain.", "Explain."),
    ("Be brief. /no_think Then answer.", "Be brief. Then answer."),
    ("Explain /thinking carefully.", "Explain /thinking carefully."),
    ("  Indented instructions.  ", "  Indented instructions."),
])
def test_flags_leave_the_text_the_rule_says(system, instructions):
    text, _ = render(SMOLLM3, [{"role": "system", "content": system}, {"role": "user", "content": "x"}])
    assert f"## Custom Instructions\n\n{instructions}\n\n<|im_end|>" in text
    assert scan_flags(system)[1].rstrip() == instructions


def test_flags_are_added_and_taken_out_by_the_same_rule():
    user = {"role": "user", "content": "x"}
    flagged = with_mode_flag([{"role": "system", "content": "Answer briefly."}, user], "no_think")
    assert flagged[0]["content"] == "Answer briefly. /no_think"
    assert with_mode_flag([user], "think") == [{"role": "system", "content": "/think"}, user]
    assert without_mode_flags(flagged) == ([{"role": "system", "content": "Answer briefly."}, user], True)
    assert without_mode_flags([{"role": "system", "content": "Answer briefly /no_think."}, user])[0][0] == {
        "role": "system", "content": "Answer briefly."}


def write_prompts(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rl_prompts_render_in_the_mode_the_rewards_score(tmp_path, write_recipe):
    """A row's enable_thinking that differs from the recipe's becomes a flag the template honours, and the mode
    column the rewards read agrees with what the template renders."""
    from recipe_runs import loaded_run

    from smolalign.data.prompts import recipe_prompts

    rows = [{"prompt": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "1+1?"}],
             "chat_template_kwargs": {"enable_thinking": False}, "solution": "2"},
            {"prompt": [{"role": "system", "content": "Answer briefly /no_think."}, {"role": "user", "content": "2+2?"}],
             "chat_template_kwargs": {}, "solution": "4"},
            {"prompt": "3+3?", "chat_template_kwargs": {}, "solution": "6"},
            {"prompt": "4+4?", "chat_template_kwargs": {"enable_thinking": False}, "solution": "8"}]
    data = write_prompts(tmp_path / "prompts.jsonl", rows)
    recipe = loaded_run(str(write_recipe({"model": {"source": "tiny"}, "data": {"sources": [{"path": str(data)}]},
                                           "rewards": [{"name": "think_format"}], "template": {"name": "smollm3"}})),
                         [], "rl").recipe
    prompts = recipe_prompts(recipe).train
    expected = ["no_think", "no_think", "think", "no_think"]
    for row, mode in zip(prompts, expected, strict=True):
        text, _ = render(SMOLLM3, row["prompt"], add_generation_prompt=True)   # TRL renders every row alike
        assert rendered_mode(text) == mode
        assert row["chat_template_kwargs"] == {"enable_thinking": mode == "think"}


def test_per_row_modes_are_refused_for_a_template_without_flags(tmp_path, write_recipe):
    from recipe_runs import loaded_run

    from smolalign.data.prompts import recipe_prompts

    data = write_prompts(tmp_path / "prompts.jsonl", [
        {"prompt": "1+1?", "chat_template_kwargs": {}, "solution": "2"},
        {"prompt": "2+2?", "chat_template_kwargs": {"enable_thinking": False}, "solution": "4"}])
    recipe = loaded_run(str(write_recipe({"model": {"source": "tiny"}, "data": {"sources": [{"path": str(data)}]},
                                           "rewards": [{"name": "think_format"}], "template": {"name": "chatml"}})),
                         [], "rl").recipe
    with pytest.raises(SmolalignError, match=r"prompts.jsonl#1: chat_template_kwargs.enable_thinking .* chatml"):
        recipe_prompts(recipe)


def test_a_pair_records_the_mode_its_prompt_renders_in():
    """Pairs generated with think=True for a prompt whose system message says /no_think. are no_think pairs."""
    from smolalign.pairs.prompts import Prompt
    from smolalign.pairs.sides import pair_row

    answer = {"text": "4", "generator": {}, "seed": 0, "tokens": 1}
    flagged = [{"role": "system", "content": "Answer briefly /no_think."}, {"role": "user", "content": "2 + 2?"}]
    plain = [{"role": "user", "content": "2 + 2?"}]
    rows = [pair_row(Prompt("k", messages, "p#0"), answer, answer, True, "c") for messages in (flagged, plain)]
    for row, messages in zip(rows, (flagged, plain), strict=True):
        text, _ = render(SMOLLM3, messages, add_generation_prompt=True, **row["chat_template_kwargs"])
        assert row["chat_template_kwargs"] == {"enable_thinking": rendered_mode(text) == "think"}
    assert [r["chat_template_kwargs"]["enable_thinking"] for r in rows] == [False, True]


@pytest.mark.parametrize("template, says", [("chatml", "template chatml reads no /think"),
                                            ("smollm3", None)])
def test_the_plan_says_when_think_modes_have_no_effect(tmp_path, write_recipe, template, says):
    from recipe_runs import loaded_run

    from smolalign.plan import make_plan

    data = write_prompts(tmp_path / "prompts.jsonl", [{"prompt": "1+1?", "solution": "2"}])
    recipe = loaded_run(str(write_recipe({"model": {"source": "tiny"}, "data": {"sources": [{"path": str(data)}]},
                                           "rewards": [{"name": "math_accuracy"}], "template": {"name": template}})),
                         [], "rl")
    plan = make_plan(recipe, resolve_template(template), 1, data_format="prompt")
    notes = [n for n in plan.notes if "/think" in n]
    assert notes == [] if says is None else len(notes) == 1 and notes[0].startswith(says)


def instructions_of(text: str) -> str:
    """The custom instructions a smollm3 render shows."""
    return text.split("## Custom Instructions\n\n", 1)[1].split("\n\n", 1)[0]


HUB_TEMPLATE = str(REPO / "tests" / "fixtures" / "smollm3_hub_chat_template.jinja")


@pytest.mark.parametrize("template", ["smollm3", "hub"])
def test_a_rows_own_mode_keeps_the_recipes_custom_instructions(tmp_path, write_recipe, template):
    """TRL renders every rl prompt with the recipe's kwargs; the flag that switches one row's mode comes in a system
    message, which replaces the custom_instructions kwarg in a template (the hub's, here), so it must carry them.
    A row's own system message of flags only keeps the kwarg in smolalign's template; the hub's shows its default."""
    from recipe_runs import loaded_run

    from smolalign.data.prompts import recipe_prompts

    data = write_prompts(tmp_path / "prompts.jsonl", [
        {"prompt": "1+1?", "chat_template_kwargs": {}, "solution": "2"},
        {"prompt": "2+2?", "chat_template_kwargs": {"enable_thinking": False}, "solution": "4"},
        {"prompt": [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "3+3?"}],
         "chat_template_kwargs": {"enable_thinking": True}, "solution": "6"}])
    kwargs = {"enable_thinking": True, "custom_instructions": "You are a pirate."}
    name = HUB_TEMPLATE if template == "hub" else template
    recipe = loaded_run(str(write_recipe({"model": {"source": "tiny"}, "data": {"sources": [{"path": str(data)}]},
                                           "rewards": [{"name": "think_format"}],
                                           "template": {"name": name, "kwargs": kwargs}})), [], "rl").recipe
    texts = [render(resolve_template(name), row["prompt"], add_generation_prompt=True, **kwargs)[0]
             for row in recipe_prompts(recipe).train]
    assert [rendered_mode(t) for t in texts] == ["think", "no_think", "no_think"]
    own_flag_only = "You are a pirate." if template == "smollm3" else "You are a helpful AI assistant named SmolLM"
    assert [instructions_of(t)[:43] for t in texts] == ["You are a pirate."] * 2 + [own_flag_only]


@pytest.mark.parametrize("own", ["/no_think", " /no_think ", ""])
def test_the_system_prompt_fills_a_system_message_of_flags_only(tmp_path, own):
    """data.system_prompt goes before a row's system message that holds only a mode flag: the flag keeps the
    mode, and the template shows the system prompt instead of its default persona."""
    from smolalign.data.mixture import build_mixture
    from smolalign.recipe.data_schema import DataSection, SourceSection

    rows = tmp_path / "chat.jsonl"
    rows.write_text(json.dumps({"messages": [{"role": "system", "content": own}, {"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello"}]}) + "\n")
    mixture = build_mixture(DataSection(sources=[SourceSection(path=str(rows))], system_prompt="You are a pirate."))
    text, _ = render(SMOLLM3, mixture.train[0]["messages"])
    assert instructions_of(text) == "You are a pirate."
    assert ("Reasoning Mode: /no_think\n" in text) == bool(own.strip())


@pytest.mark.parametrize("kwargs, rendered, modes", [
    ({}, None, [{}, {"enable_thinking": False}]),
    ({"enable_thinking": False}, None, [{"enable_thinking": False}] * 2),
    ({"enable_thinking": False}, {}, [{"enable_thinking": False}] * 2),   # online DPO renders with no kwargs
], ids=["no-mode-stated", "recipe-no_think", "recipe-no_think-online-dpo"])
def test_a_template_without_modes_carries_only_the_modes_stated(tmp_path, write_recipe, kwargs, rendered, modes):
    """chatml renders every row alike: a row whose data and recipe state no mode keeps none, so a reward's own
    default_mode applies (it was scored as think); a stated mode reaches the rewards, and is not refused."""
    from recipe_runs import loaded_run

    from smolalign.data.prompts import recipe_prompts

    data = write_prompts(tmp_path / "prompts.jsonl", [
        {"prompt": "1+1?", "solution": "2"},
        {"prompt": [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "2+2?"}], "solution": "4"}])
    recipe = loaded_run(str(write_recipe({"model": {"source": "tiny"}, "data": {"sources": [{"path": str(data)}]},
                                           "rewards": [{"name": "think_format"}],
                                           "template": {"name": "chatml", "kwargs": kwargs}})), [], "rl").recipe
    rows = recipe_prompts(recipe, rendered_kwargs=rendered).train
    assert [row["chat_template_kwargs"] for row in rows] == modes
    think_format = resolve_reward("think_format", {"default_mode": "no_think"})
    scores = think_format([[{"role": "assistant", "content": "2"}]] * 2, prompts=[r["prompt"] for r in rows],
                          chat_template_kwargs=[r["chat_template_kwargs"] for r in rows])
    assert scores == [1.0, 1.0]   # a bare answer is right in no_think mode, the reward's default here
