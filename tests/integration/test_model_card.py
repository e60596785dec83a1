"""Every run writes a model card (README.md in the run directory and in model/) with huggingface_hub's ModelCard:
metadata the hub reads (base_model from the real source, datasets, library, pipeline, stage and method tags, the
license where known, the evaluation as model-index), a body saying what was trained, and a quick start that loads
the run's own model and chats in both think modes, which this test runs. A chain of runs names its parent run as
base_model and keeps the lineage; `smolalign eval --card RUN_DIR` puts its results into the run's card."""

import json
import re
import subprocess
import sys

import pytest
from tiny_models import chat_rows, pair_rows, write_jsonl


def card_of(path):
    from huggingface_hub import ModelCard

    return ModelCard.load(path)


@pytest.fixture
def sft_run(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    questions = write_jsonl(tmp_path / "q.jsonl", [{"prompt": "what is 2 plus 3", "solution": "5"},
                                                   {"prompt": "what is 4 plus 4", "solution": "8"}])
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                           "data": {"sources": [{"path": str(data), "weight": 0.5}]},
                           "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2,
                                     "logging_steps": 1, "save_steps": 1, "gradient_checkpointing": False},
                           "eval": {"data": [{"path": str(questions)}], "rewards": [{"name": "math_accuracy"}],
                                    "samples": 1, "max_new_tokens": 8, "modes": ["no_think"]}}, "sft.yaml")
    run_dir = tmp_path / "sft"
    code, _, err = cli("sft", recipe, "-o", run_dir)
    assert code == 0, err
    return run_dir


def test_a_run_writes_a_card_the_hub_reads(sft_run, tiny_dir, tmp_path):
    from huggingface_hub.repocard_data import model_index_to_eval_results

    card = card_of(sft_run / "README.md")
    assert (sft_run / "model" / "README.md").read_text() == (sft_run / "README.md").read_text()
    assert "fine-tuned version of [None]" not in card.text  # not TRL's stub
    data = card.data
    assert data.base_model == str(tiny_dir) and data.library_name == "transformers"
    assert data.pipeline_tag == "text-generation" and {"smolalign", "sft"} <= set(data.tags)
    assert data.datasets == [str(tmp_path / "chat.jsonl")]
    manifest = json.loads((sft_run / "manifest.json").read_text())
    assert manifest["template"]["sha256"][:16] in card.text and "| weight |" in card.text and "| 0.5 |" in card.text
    # the evaluation: the card's model-index holds eval.json's values for the run's model ("after")
    report = json.loads((sft_run / "eval.json").read_text())
    name, results = model_index_to_eval_results(data.to_dict()["model-index"])
    values = {r.metric_name: r.metric_value for r in results}
    expected = report["results"]["after"]["no_think"]
    assert values["compliance (no_think)"] == pytest.approx(expected["compliance"]["value"], abs=1e-4)
    assert values["length (no_think)"] == pytest.approx(expected["length"]["value"], abs=1e-4)
    assert "## Evaluation" in card.text and "after" in card.text


def test_the_quick_start_loads_the_model_and_chats_in_both_modes(sft_run):
    code = re.search(r"```python\n(.*?)\n```", (sft_run / "README.md").read_text(), re.S).group(1)
    code = code.replace("max_new_tokens=256", "max_new_tokens=4")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(sft_run / "model") in code


def test_a_chain_of_runs_names_its_parent_and_keeps_the_lineage(cli, write_recipe, sft_run, tmp_path):
    pairs = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(8))
    po = write_recipe({"model": {"source": str(sft_run / "model")}, "template": {"name": "chatml"}, "method": "dpo",
                       "data": {"sources": [{"path": str(pairs)}]},
                       "train": {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 1,
                                 "save_strategy": "no", "gradient_checkpointing": False}}, "po.yaml")
    code, _, err = cli("po", po, "-o", tmp_path / "po")
    assert code == 0, err
    again = write_recipe({"model": {"source": str(tmp_path / "po" / "model")}, "template": {"name": "smollm3"},
                          "data": {"sources": [{"path": str(tmp_path / "chat.jsonl")}]},
                          "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 1,
                                    "save_strategy": "no", "gradient_checkpointing": False}}, "third.yaml")
    code, _, err = cli("sft", again, "-o", tmp_path / "third")
    assert code == 0, err
    card = card_of(tmp_path / "third" / "README.md")
    assert card.data.base_model == str(tmp_path / "po" / "model")
    lineage = card.text[card.text.index("## Lineage"):].split("##")[1]
    assert str((tmp_path / "po").resolve()) in lineage and str(sft_run.resolve()) in lineage
    assert lineage.index("dpo") < lineage.index(str(sft_run.resolve()))  # nearest first
    assert {"po", "dpo"} <= set(card_of(tmp_path / "po" / "README.md").data.tags)


def test_eval_card_puts_its_results_into_the_runs_card(cli, sft_run, tmp_path):
    from huggingface_hub.repocard_data import model_index_to_eval_results

    questions = write_jsonl(tmp_path / "more.jsonl", [{"prompt": f"what is {i} plus 1", "solution": str(i + 1)}
                                                      for i in range(3)])
    code, out, err = cli("eval", f"mine={sft_run / 'model'}", "--data", questions, "--reward", "math_accuracy",
                         "--modes", "think", "--samples", "1", "--max-new-tokens", "6", "--card", sft_run)
    assert code == 0, err
    card = card_of(sft_run / "README.md")
    _, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert {r.metric_name for r in results} >= {"compliance (think)", "math_accuracy mean (think)"}
    assert results[0].dataset_name == str(questions)
    code, _, err = cli("eval", f"other={sft_run / 'model'}x", "--data", questions, "--reward", "math_accuracy",
                       "--card", sft_run)
    assert code == 2


def test_a_card_names_the_bundled_models_origin_and_license():
    from smolalign.runs.card import lineage

    assert lineage("smollm2-135m-instruct") == {"base_model": "HuggingFaceTB/SmolLM2-135M-Instruct",
                                                 "license": "apache-2.0", "parent_run": None,
                                                 "bundled": "smollm2-135m-instruct"}
    assert lineage("HuggingFaceTB/SmolLM3-3B", "v2") == {"base_model": "HuggingFaceTB/SmolLM3-3B", "license": None,
                                                          "parent_run": None, "revision": "v2"}
