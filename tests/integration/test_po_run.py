"""`smolalign po` end to end on a tiny model: every method trains from the CLI, the DPO and APO-zero reward margin
rises, each kind of reference works, and bad input exits 2 with one clear line."""

import json

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import pair_rows, write_jsonl

from smolalign.runs.metrics import LOGGED_AT, read_metrics


@pytest.fixture
def po_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(32))

    def make(method="dpo", **extra) -> str:
        train = {"max_length": 160, "per_device_train_batch_size": 4, "max_steps": 24, "learning_rate": 5e-3,
                 "logging_steps": 4, "save_strategy": "no", "gradient_checkpointing": False, "beta": 0.1,
                 **extra.pop("train", {})}
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                 "method": method, "data": {"sources": [{"path": str(data)}]}, "train": train,
                                 **extra}))

    return make


def margins(run_dir) -> list[float]:
    return [m["rewards/margins"] for m in read_metrics(run_dir) if "rewards/margins" in m]


@pytest.mark.parametrize("method", ["dpo", "apo_zero"])
def test_reward_margin_rises(cli, po_recipe, tmp_path, method):
    run_dir = tmp_path / "run"
    code, out, err = cli("po", po_recipe(method), "-o", run_dir)
    assert code == 0, err
    logged = margins(run_dir)
    assert len(logged) == 6
    assert logged[-1] > logged[0] + 1.0 and logged[-1] > 1.0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["method"]["losses"] == [{"dpo": "sigmoid"}.get(method, method)]
    assert (run_dir / "model" / "config.json").is_file() and "rewards/margins" in out


@pytest.mark.parametrize(("method", "extra"), [
    ("apo_down", {}),
    ("ipo", {}),
    ({"sigmoid": 1.0, "sft": 0.5}, {}),
    ("kto", {}),
    ("apo_zero_unpaired", {}),
    ("orpo", {}),
    ("apo_zero", {"reference": "precomputed"}),
    ("dpo", {"peft": {"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}}),
])
def test_every_method_trains_from_the_cli(cli, po_recipe, tmp_path, method, extra):
    run_dir = tmp_path / "run"
    code, out, err = cli("po", po_recipe(method, **extra), "-o", run_dir)
    assert code == 0, err
    losses = [m["loss"] for m in read_metrics(run_dir) if "loss" in m]
    assert len(losses) == 6 and losses[-1] < losses[0]


def test_explicit_reference_source(cli, po_recipe, tmp_path, tiny_dir):
    code, out, err = cli("po", po_recipe("dpo", reference={"source": str(tiny_dir)}), "--dry-run")
    assert code == 0, err
    assert f"reference              {tiny_dir}: " in out and "more (" in out


@pytest.mark.parametrize(("method", "extra", "reference"), [
    ("dpo", {}, "a frozen copy of the policy's source:"),
    ("dpo", {"reference": "precomputed"}, "no reference weights held"),
    ("dpo", {"peft": {"r": 4}}, "adapter disabled: no extra memory"),
    ("orpo", {}, "reference-free"),
])
def test_plan_says_which_reference_and_its_memory(cli, po_recipe, method, extra, reference):
    code, out, err = cli("po", po_recipe(method, **extra), "--dry-run")
    assert code == 0, err
    assert reference in out


def test_kto_with_a_batch_of_one_is_refused(cli, po_recipe):
    code, out, err = cli("po", po_recipe("kto", train={"per_device_train_batch_size": 1}), "--dry-run")
    assert code == 2 and "kto needs at least 2" in err and "Traceback" not in err


def test_an_eval_section_on_a_reward_model_is_refused(cli, po_recipe, write_recipe, tiny_dir, tmp_path):
    """A reward model writes no answers: an `eval:` would load it as a causal LM (its head left out) and score the
    backbone's generations as the run's "after"."""
    data = write_jsonl(tmp_path / "eval.jsonl", [{"prompt": "what is 2 plus 2", "solution": "4"}])
    evaluation = {"data": [{"path": str(data)}], "rewards": [{"name": "math_accuracy"}], "max_new_tokens": 4}
    pairs = write_jsonl(tmp_path / "reward_pairs.jsonl", pair_rows(8))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "reward",
                           "data": {"sources": [{"path": str(pairs)}]}, "train": {"max_length": 160},
                           "eval": evaluation}, "reward.yaml")
    code, _, err = cli("po", recipe, "--dry-run")
    assert code == 2 and "error: eval: a reward model scores answers, it writes none" in err, err
    code, _, err = cli("po", po_recipe("dpo", eval=evaluation), "--dry-run")
    assert code == 0, err


def test_pairs_missing_chosen_are_refused(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "broken.jsonl", [{"prompt": "q", "rejected": "a"}])
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "method": "dpo", "data": {"sources": [{"path": str(data)}]}})
    code, out, err = cli("po", recipe, "--dry-run")
    assert code == 2 and "no 'chosen' column" in err and "Traceback" not in err


def test_a_pair_whose_prompts_differ_is_refused(cli, write_recipe, tiny_dir, tmp_path):
    rows = [{"chosen": [{"role": "user", "content": "what is 1 plus 1"}, {"role": "assistant", "content": "2"}],
             "rejected": [{"role": "user", "content": "what is 2 plus 2"}, {"role": "assistant", "content": "5"}]}]
    data = write_jsonl(tmp_path / "mismatch.jsonl", rows)
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
                           "data": {"sources": [{"path": str(data)}]}, "train": {"max_steps": 1}})
    code, out, err = cli("po", recipe, "-o", tmp_path / "run")
    assert code == 2 and "mismatch.jsonl#0" in err and "different prompts" in err and "Traceback" not in err


@pytest.mark.parametrize(("extra", "message"), [
    ({"method": "dpx"}, "unknown method 'dpx' (did you mean dpo?)"),
    ({"method": ["sigmoid", "kto"]}, "cannot be combined"),
    ({"train": {"loss_type": "ipo"}}, "set the loss with method:"),
    ({"reference": "adapter"}, "needs a peft: section"),
    ({"method": "orpo", "reference": "policy"}, "reference-free"),
])
def test_recipe_mistakes_are_named(cli, po_recipe, extra, message):
    method = extra.pop("method", "dpo")
    code, out, err = cli("po", po_recipe(method, **extra), "--dry-run")
    assert code == 2 and message in err, err


def test_the_run_directory_recipe_reruns_as_written(cli, po_recipe, tmp_path, tiny_dir):
    run_dir = tmp_path / "run"
    code, out, err = cli("po", po_recipe("apo_zero", reference={"source": str(tiny_dir)},
                                         train={"max_steps": 2, "logging_steps": 1}), "-o", run_dir)
    assert code == 0, err
    code, out2, err = cli("po", run_dir / "recipe.yaml", "-o", tmp_path / "rerun")
    assert code == 0, err
    # The same training again: every logged loss, margin and rate, and the same weights to the bit.
    assert any("loss" in m for m in read_metrics(run_dir)) and _same_training(tmp_path / "rerun", run_dir)
    first = load_file(run_dir / "model" / "model.safetensors")
    again = load_file(tmp_path / "rerun" / "model" / "model.safetensors")
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)


def _same_training(a, b) -> bool:
    """The same logged training values, ignoring timings."""
    def values(run):
        return [{k: v for k, v in m.items()
                 if "runtime" not in k and "per_second" not in k and k not in ("step_time", LOGGED_AT)}
                for m in read_metrics(run)]

    return values(a) == values(b)
