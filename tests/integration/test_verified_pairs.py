"""`smolalign po pairs` with `pairs.verifier:` on a tiny model, end to end from the CLI: every pair's chosen answer
is one the verifier scored right and its rejected answer one it scored wrong, by the test's own reward (which
records every answer it is shown); the strong side only answers prompts whose weak answer was wrong, up to
`strong_samples` times; and `smolalign po` trains on the verified pairs."""

import json
import re

import pytest
from test_pairs import read_jsonl, talker_dir  # noqa: F401 - the session's tiny talker model
from tiny_models import write_jsonl

VERIFIER = '''
import json
import re


def same_parity(record):
    """1 when the answer's last integer has the solution's parity (the tiny talker is right about half the time
    by that measure, and almost never by the exact sum); every call is recorded for the test to check against."""
    def score(completions, prompts, solution, **columns):
        values = []
        for completion, gold in zip(completions, solution):
            numbers = re.findall(r"[0-9]+", completion)
            values.append(1.0 if numbers and int(numbers[-1]) % 2 == int(gold) % 2 else 0.0)
        with open(record, "a") as out:
            out.write(json.dumps([{"prompt": p[-1]["content"], "completion": c, "score": v}
                                  for p, c, v in zip(prompts, completions, values)]) + "\\n")
        return values
    return score
'''
PROMPTS = 16
SAMPLES = 4


@pytest.fixture
def verified_recipe(write_recipe, talker_dir, tmp_path):  # noqa: F811
    (tmp_path / "verifier.py").write_text(VERIFIER)

    def make(**extra):
        prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}",
                                                            "solution": str(2 * i + 1)} for i in range(PROMPTS)])
        generator = {"source": str(talker_dir), "max_new_tokens": 24, "batch_size": 4}
        pairs = {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "out" / "pairs.jsonl"),
                 "weak": {**generator, "temperature": 1.5}, "strong": {**generator, "temperature": 0.8},
                 "verifier": {"rewards": [{"name": f"{tmp_path / 'verifier.py'}:same_parity",
                                           "params": {"record": str(tmp_path / "calls.jsonl")}}],
                              "strong_samples": SAMPLES}}
        return str(write_recipe({"model": {"source": str(talker_dir)}, "template": {"name": "chatml"},
                                 "method": "apo_zero", "pairs": pairs,
                                 "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 2,
                                           "logging_steps": 1, "save_strategy": "no",
                                           "gradient_checkpointing": False}, **extra}))

    return make


def verifier_calls(tmp_path) -> list[list[dict]]:
    """The verifier's calls in order, less the one-answer check made of it before anything generates."""
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    return [call for call in calls if not (len(call) == 1 and call[0]["completion"] == "")]


def parity_matches(text: str, solution: int) -> bool:
    numbers = re.findall(r"[0-9]+", text)
    return bool(numbers) and int(numbers[-1]) % 2 == solution % 2


def test_chosen_are_verified_right_and_rejected_wrong(cli, verified_recipe, tmp_path):
    code, out, err = cli("po", "pairs", verified_recipe())
    assert code == 0, err
    rows = read_jsonl(tmp_path / "out" / "pairs.jsonl")
    assert rows, "no verified pair: the talker should be right about half the time"
    for row in rows:
        a = int(re.search(r"what is (\d+) plus", row["prompt"][-1]["content"]).group(1))
        assert parity_matches(row["chosen"][0]["content"], 2 * a + 1), row
        assert not parity_matches(row["rejected"][0]["content"], 2 * a + 1), row
        verifier = row["provenance"]["verifier"]
        assert verifier["chosen"]["score"] == 1.0 and verifier["rejected"]["score"] == 0.0
        assert row["provenance"]["strong"]["samples"] == SAMPLES
        assert 0 <= row["provenance"]["strong"]["sample"] < SAMPLES
    report = json.loads((tmp_path / "out" / "pairs.jsonl.report.json").read_text())
    assert report["pairs"] == len(rows) == PROMPTS - sum(report["filtered"].values())
    assert "verifier:" in out


def test_the_strong_side_answers_only_what_the_weak_side_got_wrong(cli, verified_recipe, tmp_path):
    code, out, err = cli("po", "pairs", verified_recipe())
    assert code == 0, err
    weak, strong = verifier_calls(tmp_path)
    report = json.loads((tmp_path / "out" / "pairs.jsonl.report.json").read_text())
    unusable = report["filtered"]["cut_off"] + report["filtered"]["empty_answer"]
    assert len(weak) == PROMPTS - unusable  # one weak answer per prompt, less those cut off or empty
    wrong = {answer["prompt"] for answer in weak if answer["score"] == 0.0}
    right = {answer["prompt"] for answer in weak if answer["score"] == 1.0}
    assert wrong and right, "the weak side should be right about half the time"
    assert {answer["prompt"] for answer in strong} == wrong
    assert len(strong) <= SAMPLES * len(wrong) and len(strong) > len(wrong)
    rows = read_jsonl(tmp_path / "out" / "pairs.jsonl")
    scored = {(a["prompt"], a["completion"]): a["score"] for a in weak}
    assert all(scored[(row["prompt"][-1]["content"], row["rejected"][0]["content"])] == 0.0 for row in rows)
    answered = {(a["prompt"], a["completion"]): a["score"] for a in strong}
    assert all(answered[(row["prompt"][-1]["content"], row["chosen"][0]["content"])] == 1.0 for row in rows)


def test_po_trains_on_verified_pairs(cli, verified_recipe, tmp_path):
    code, out, err = cli("po", verified_recipe(), "--output-dir", str(tmp_path / "run"))
    assert code == 0, err
    assert (tmp_path / "run" / "model" / "config.json").is_file()


@pytest.mark.parametrize(("verifier", "message"), [
    ({"rewards": []}, "rewards must list at least one reward"),
    ({"rewards": [{"name": "math_accuracy"}], "strong_samples": 0}, "strong_samples must be at least 1"),
    ({"rewards": [{"name": "no_such_reward"}]}, "no_such_reward"),
])
def test_a_bad_verifier_is_refused_before_anything_loads(cli, write_recipe, tmp_path, verifier, message):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "what is 1 plus 2", "solution": "3"}])
    side = {"source": "/nonexistent/model"}
    code, out, err = cli("po", "pairs", str(write_recipe({
        "model": {"source": "/nonexistent/model"}, "method": "apo_zero",
        "pairs": {"prompts": [{"path": str(prompts)}], "strong": side, "weak": side, "verifier": verifier}})))
    assert code == 2 and message in err, err


def test_greedy_strong_answers_are_not_a_sampling_budget(cli, write_recipe, tmp_path):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "what is 1 plus 2", "solution": "3"}])
    side = {"source": "/nonexistent/model"}
    code, out, err = cli("po", "pairs", str(write_recipe({
        "model": {"source": "/nonexistent/model"}, "method": "apo_zero",
        "pairs": {"prompts": [{"path": str(prompts)}], "strong": {**side, "temperature": 0}, "weak": side,
                  "verifier": {"rewards": [{"name": "math_accuracy"}], "strong_samples": 4}}})))
    assert code == 2 and "one answer repeated" in err, err
