"""Rewards against hand-written expectations: math equivalence and answer extraction, format per mode, the DAPO
overlong punishment at and around its thresholds, cosine scaling, repetition, and the registry's errors."""

import math

import pytest

from rewards import resolve_reward
from rewards.errors import RewardError
from rewards.length import soft_overlong


def msg(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize(("completion", "gold", "expected"), [
    (r"The answer is \frac{1}{2}.", "0.5", 1.0),
    ("The answer is 0.5", r"\frac{1}{2}", 1.0),
    (r"So we get \boxed{42}.", "42", 1.0),
    ("It is 42.", "42", 1.0),
    ("It is 41.", "42", 0.0),
    ("<think>\n7 + 3 = 10, or maybe 11?\n</think>\nThe answer is 10.", "10", 1.0),
    ("<think>\nthe answer is 10\n</think>\nThe answer is 11.", "10", 0.0),   # reasoning is not scored
    ("First 3 + 4 = 7, then 7 × 6 = 42.", "42", 1.0),                      # the last expression counts
    ("We get 42. No wait: 41.", "42", 0.0),
    ("<think>\nit is 42, but I keep thinking", "42", 0.0),                 # never answered
    ("", "42", 0.0),
    ("It is 42.", "a moose?", None),                                       # gold does not parse: skipped
    # A stated answer is read to the end of its sentence, asides in parentheses left out; without one, the last
    # expression counts (docs/math-answers.md; tests/unit/test_math_answers.py has the full table).
    ("The answer is 5 (since 2 + 2 = 4)", "4", 0.0),
    ("The answer is 5 (since 2 + 2 = 4)", "5", 1.0),
    ("The sum is 42. (12 + 30)", "42", 1.0),
    (r"\boxed{42}. Check: 41", "42", 1.0),
    (r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 1.0),                 # open-r1's tests/test_rewards.py cases
    (r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 0.0),
    (r"The answer is $\boxed{\frac{63}{400}}$", r"\frac{63}{400}", 1.0),
    ("Final answer: 7. Because 3 + 4 = 7 and 7 + 1 = 8", "7", 1.0),
    ("x = 3\ny = 4", "4", 1.0),                                             # the last expression
])
def test_math_accuracy(completion, gold, expected):
    reward = resolve_reward("math_accuracy")
    assert reward([msg(completion)], solution=[gold]) == [expected]
    assert reward([completion], solution=[gold]) == [expected]


def test_math_accuracy_reads_the_named_gold_column():
    reward = resolve_reward("math_accuracy", {"gold_column": "answer"})
    assert reward.required_columns == ("answer",)
    assert reward(["3"], answer=["3"]) == [1.0]


NO_THINK_PROMPT = [{"role": "system", "content": "Be brief. /no_think"}, {"role": "user", "content": "2+2?"}]
THINK_PROMPT = [{"role": "system", "content": "Be brief. /think"}, {"role": "user", "content": "2+2?"}]


@pytest.mark.parametrize(("completion", "prompt", "expected"), [
    ("4", NO_THINK_PROMPT, 1.0),
    ("<think>\n\n</think>\n4", NO_THINK_PROMPT, 1.0),
    ("<think>\n2 and 2\n</think>\n4", NO_THINK_PROMPT, 0.0),     # reasoning in no_think mode
    ("<think>\n</think>\n", NO_THINK_PROMPT, 0.0),               # no answer
    ("<think>\n2 and 2 make 4\n</think>\n4", THINK_PROMPT, 1.0),
    ("4", THINK_PROMPT, 0.0),                                      # no reasoning in think mode
    ("<think>\n\n</think>\n4", THINK_PROMPT, 0.0),                # empty reasoning
    ("<think>\n2 and 2 make 4\n4", THINK_PROMPT, 0.0),            # never closed
    ("<think>a</think><think>b</think>4", THINK_PROMPT, 0.0),      # two blocks
    ("<think>\n2 and 2\n</think>\n", THINK_PROMPT, 0.0),           # nothing after the reasoning
])
def test_think_format_per_mode(completion, prompt, expected):
    assert resolve_reward("think_format")([msg(completion)], prompts=[prompt]) == [expected]


def test_think_format_mode_from_row_kwargs_and_default():
    reward = resolve_reward("think_format")
    user = [{"role": "user", "content": "2+2?"}]
    assert reward(["4", "4"], prompts=[user, user],
                  chat_template_kwargs=[{"enable_thinking": False}, {"enable_thinking": True}]) == [1.0, 0.0]
    assert resolve_reward("think_format", {"default_mode": "no_think"})(["4"], prompts=[user]) == [1.0]


def test_tag_count_partial_credit():
    reward = resolve_reward("tag_count")
    assert reward(["<think>\nx\n</think>\ny", "<think>\nx", "no tags", "<think>\n<think>\n\n</think>\n"]) == \
        [1.0, 0.5, 0.0, 0.5]


@pytest.mark.parametrize(("length", "expected"), [
    (0, 0.0), (2500, 0.0),          # up to max - cache: no punishment
    (2501, -1 / 500), (2750, -0.5),  # linear inside the cache window
    (3000, -1.0),                    # at max_length
    (3001, -1.0), (9000, -1.0),      # beyond
])
def test_soft_overlong_at_and_around_thresholds(length, expected):
    assert soft_overlong(length, 3000, 500) == pytest.approx(expected)


def test_soft_overlong_uses_the_row_mode_limits():
    reward = resolve_reward("soft_overlong", {"max_length": 3000, "cache": 500, "think_max_length": 16000,
                                              "think_cache": 2000})
    ids = [[0] * 2750, [0] * 2750, [0] * 15000]
    prompts = [NO_THINK_PROMPT, THINK_PROMPT, THINK_PROMPT]
    assert reward(["a", "b", "c"], completion_ids=ids, prompts=prompts) == pytest.approx([-0.5, 0.0, -0.5])


def test_cosine_length_scales_right_and_wrong_answers():
    reward = resolve_reward("cosine_length", {"max_length": 100})
    got = reward(["42", "42", "41", "41"], completion_ids=[[0] * 0, [0] * 100, [0] * 0, [0] * 50],
                 solution=["42"] * 4)
    # right: 1.0 when short, 0.5 at max length; wrong: -1.0 when short (a quick wrong guess is punished most),
    # -0.75 at half length
    assert got == pytest.approx([1.0, 0.5, -1.0, -0.75])
    assert math.isclose(got[3], -0.5 + 0.5 * (-1.0 + 0.5) * (1 + math.cos(math.pi * 0.5)))


def test_repetition_penalty():
    reward = resolve_reward("repetition", {"ngram_size": 2, "max_penalty": -1.0})
    assert reward(["a b c d", "a b a b a b", "short"]) == pytest.approx([0.0, -(1 - 2 / 5), 0.0])


@pytest.mark.parametrize(("name", "params", "message"), [
    ("math_acuracy", {}, "did you mean math_accuracy"),
    ("soft_overlong", {"max_length": 10}, "parameter 'cache' is required"),
    ("soft_overlong", {"max_len": 10, "cache": 2}, "did you mean max_length"),
    ("soft_overlong", {"max_length": 10, "cache": 20}, r"cache \(20\) must not exceed max_length \(10\)"),
    ("soft_overlong", {"max_length": 10, "cache": 2, "mode": "nothink"}, "mode must be auto, think or no_think"),
    ("soft_overlong", {"max_length": 10, "cache": 5, "think_max_length": 3}, r"think_cache \(5\) must not exceed"),
    ("soft_overlong", {"max_length": 10, "cache": 2, "think_cache": 0}, "think_cache must be a positive"),
    ("cosine_length", {"max_length": 0}, "max_length must be a positive"),
])
def test_registry_errors(name, params, message):
    with pytest.raises(RewardError, match=message):
        resolve_reward(name, params)


def test_reward_from_a_file(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("def shout(completions, **kw):\n    return [1.0 if '!' in c else 0.0 for c in completions]\n"
                    "def scaled(factor):\n    def reward(completions, **kw):\n"
                    "        return [factor * len(c) for c in completions]\n    return reward\n")
    assert resolve_reward(f"{path}:shout")(["hi!", "hi"]) == [1.0, 0.0]
    assert resolve_reward(f"{path}:scaled", {"factor": 2})(["abc"]) == [6]
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(RewardError, match="does not import"):
        resolve_reward(f"{broken}:f")
    with pytest.raises(RewardError, match="no function 'nope'"):
        resolve_reward(f"{path}:nope")


def test_rewards_read_the_whole_answer_where_the_template_opens_the_think_block(tmp_path, tiny_tokenizer):
    """Reasoning models' templates end the generation prompt with `<think>\\n`, so the model generates only
    `reasoning</think>answer`: the rewards must read it with the opener in front, or the reasoning is the answer and
    a reasoning cut off by the budget scores as one. smollm3's rewards are left as they are."""
    from paths import REPO

    from smolalign.stages.rl import rewards_of_whole_answers
    from smolalign.templates.registry import resolve_template

    chatml = (REPO / "chat_templates" / "chatml.jinja").read_text()
    opened = tmp_path / "opened.jinja"
    opened.write_text(chatml.replace('{{- "<|im_start|>assistant\\n" -}}{%- endif -%}',
                                     '{{- "<|im_start|>assistant\\n<think>\\n" -}}{%- endif -%}'))
    assert opened.read_text() != chatml
    built = [resolve_reward("math_accuracy"), resolve_reward("think_format")]
    rewards = rewards_of_whole_answers(built, resolve_template(str(opened)), {}, tiny_tokenizer)
    answered, cut_off = "3 plus 4 is 7.\n</think>\n\nThe answer is 7.", "Let me add 3 and 4. So the answer is 7. Hmm, wait"
    accuracy, think_format = rewards
    assert accuracy([answered, cut_off], solution=["7", "7"]) == [1.0, 0.0]
    assert think_format([answered], prompts=[[{"role": "user", "content": "3+4?"}]],
                        chat_template_kwargs=[{"enable_thinking": True}]) == [1.0]
    assert accuracy.__name__ == "math_accuracy" and accuracy.required_columns == ("solution",)
    assert built[0]([cut_off], solution=["7"]) == [1.0]   # unwrapped: the cut-off reasoning scores as an answer
    smollm3 = rewards_of_whole_answers(built, resolve_template("smollm3"), {"enable_thinking": False}, tiny_tokenizer)
    assert smollm3 == built
