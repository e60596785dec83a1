"""Graded pairs: the pick of chosen and rejected candidates from hand-chosen scores, and every bad graded recipe
refused with exit 2 and one line naming its key before anything is generated (harness: tests/badinput.py)."""

import json
import random

import pytest
from badinput import Case, run_refused

from smolalign.pairs.scorer import pick


@pytest.mark.parametrize("scores, margin, expected", [
    ([0.2, 1.0, None, -0.5, 1.0], 0.0, (1, 3)),   # first best, the worst; None is never picked
    ([None, 0.0, 3.0], 0.0, (2, 1)),
    ([1.0, 1.0, 1.0], 0.0, "tie"),               # ties teach nothing
    ([0.5, 0.9], 0.5, "tie"),                     # a gap under the margin
    ([0.5, 0.9], 0.4, (1, 0)),
    ([1.0, None, None], 0.0, "unscored"),
    ([None, None], 0.0, "unscored"),
])
def test_best_worst(scores, margin, expected):
    assert pick(scores, "best_worst", margin, random.Random(0)) == expected


def test_best_random_rejects_only_answers_at_least_the_margin_below_the_best():
    scores = [3.0, 0.0, 2.5, 1.0, None, 3.0]
    seen = {pick(scores, "best_random", 1.0, random.Random(seed)) for seed in range(50)}
    assert seen == {(0, 1), (0, 3)}
    assert pick([2.0, 1.5], "best_random", 1.0, random.Random(0)) == "tie"


_PROMPTS = "".join(json.dumps({"prompt": f"what is {i} plus 1", "solution": str(i + 1)}) + "\n" for i in range(3))
_BAD_GOLD = _PROMPTS + json.dumps({"prompt": "what is a moose plus 1", "solution": "a moose?"}) + "\n"
_NO_SOLUTION = "".join(json.dumps({"prompt": f"what is {i} plus 1"}) + "\n" for i in range(3))


def _recipe(graded=None, method="apo_zero", **pairs) -> str:
    section = {"n": 4, "scorer": [{"name": "math_accuracy"}], "sampler": {"temperature": 0.8}, **(graded or {})}
    return json.dumps({"model": {"source": "{tiny}"}, "template": {"name": "chatml"}, "method": method,
                       "pairs": {"prompts": [{"path": "{dir}/prompts.jsonl"}], "output": "{dir}/out/pairs.jsonl",
                                 "graded": section, **pairs},
                       "train": {"max_length": 64, "max_steps": 1, "per_device_train_batch_size": 2}})


def _case(id_, culprit, files_recipe, argv=("po", "pairs", "{dir}/r.yaml"), prompts=_PROMPTS):
    return Case(id_, argv, culprit, {"r.yaml": files_recipe, "prompts.jsonl": prompts})


CASES = [
    _case("graded-n-below-2", ("pairs.graded", "n must be at least 2"), _recipe({"n": 1})),
    _case("graded-negative-margin", ("pairs.graded", "margin"), _recipe({"margin": -0.5})),
    _case("graded-unknown-scorer", ("pairs.graded.scorer.0", "math_acuracy", "math_accuracy"),
          _recipe({"scorer": [{"name": "math_acuracy"}]})),
    _case("graded-reward-model-without-head", ("pairs.graded.scorer.0", "no classification head"),
          _recipe({"scorer": [{"name": "model:{tiny}"}]})),
    _case("graded-reward-model-missing", ("pairs.graded.scorer.0", "{dir}/rm", "no such directory"),
          _recipe({"scorer": [{"name": "model:{dir}/rm"}]})),
    _case("graded-judge-not-answering", ("pairs.graded.scorer.0", "127.0.0.1:9", "does not answer"),
          _recipe({"scorer": [{"name": "judge", "params": {"base_url": "http://127.0.0.1:9/v1", "model": "j",
                                                            "rubric": "{prompt} {completion} Score?"}}]})),
    _case("graded-threshold-on-pairs", ("pairs.graded", "threshold 0.8", "unpaired"), _recipe({"threshold": 0.8})),
    _case("graded-margin-on-unpaired", ("pairs.graded", "margin 0.5", "unpaired"),
          _recipe({"unpaired": True, "margin": 0.5})),
    _case("graded-greedy-sampler", ("pairs.graded.sampler.temperature",), _recipe({"sampler": {"temperature": 0}})),
    _case("graded-and-strong", ("pairs", "either strong and weak"),
          _recipe(strong={"source": "{tiny}"}, weak={"source": "{tiny}"})),
    _case("graded-scorer-column-missing", ("pairs.graded.scorer", "solution"), _recipe(), prompts=_NO_SOLUTION),
    _case("graded-scorer-column-missing-dry-run", ("pairs.graded.scorer", "solution"), _recipe(),
          argv=("po", "{dir}/r.yaml", "--dry-run"), prompts=_NO_SOLUTION),
    _case("graded-scorer-gold-does-not-parse", ("pairs.graded.scorer", "{dir}/prompts.jsonl#3", "math-verify"),
          _recipe(), prompts=_BAD_GOLD),
    _case("graded-scorer-gold-does-not-parse-dry-run", ("pairs.graded.scorer", "{dir}/prompts.jsonl#3", "math-verify"),
          _recipe(), argv=("po", "{dir}/r.yaml", "--dry-run"), prompts=_BAD_GOLD),
    _case("graded-unpaired-for-a-pairs-method", ("unpaired", "kto"), _recipe({"unpaired": True}),
          argv=("po", "{dir}/r.yaml", "--dry-run")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)
