"""`--resume` of a run whose newest checkpoint holds its last step (train.max_steps, or its epochs'). transformers' Trainer, resumed
from it, trains one step past the end and saves over the model (a step 3 for a 2-step run, its checkpoint-2 then
deleted by save_total_limit). A finished run (model saved, result recorded) is refused before anything is written;
a run cut off in its final save gets its model saved from the checkpoint's weights with no step trained; raising
train.max_steps resumes from the last checkpoint."""

import hashlib
import json
import shutil

import pytest
import yaml
from resume_checks import weights
from tiny_models import chat_rows, write_jsonl


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def steps_logged(run):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return sorted({row["step"] for row in rows if "loss" in row})


def train(cli, tiny_dir, tmp_path, **length):
    """An SFT run of the tiny model that saves a checkpoint at its last step and keeps only that one."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(32))
    recipe = tmp_path / "sft.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2, "save_total_limit": 1,
                  "logging_steps": 1, "seed": 0, **length}}))
    run = tmp_path / "run"
    code, _, err = cli("sft", str(recipe), "-o", str(run))
    assert code == 0, err
    return recipe, run


@pytest.fixture
def finished(cli, tiny_dir, tmp_path):
    """A 2-step SFT run that saved checkpoint-2 and its model."""
    return train(cli, tiny_dir, tmp_path, max_steps=2, save_steps=2)


def test_a_finished_run_is_refused_and_left_as_it_was(cli, finished):
    recipe, run = finished
    before = {name: digest(run / name) for name in ("model", "checkpoint-2")}
    manifest = (run / "manifest.json").read_text()
    code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume")
    assert code == 2
    assert "checkpoint-2 already reached train.max_steps 2" in err
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    assert {name: digest(run / name) for name in ("model", "checkpoint-2")} == before
    assert (run / "manifest.json").read_text() == manifest


def test_a_run_cut_off_in_its_final_save_saves_the_checkpoints_weights_without_a_step(cli, finished):
    recipe, run = finished
    shutil.rmtree(run / "model")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.pop("result")
    (run / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume")
    assert code == 0, err
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    assert steps_logged(run) == [1, 2]
    result = json.loads((run / "manifest.json").read_text())["result"]
    assert result["global_step"] == 2 and result["resumed_from"] == str(run / "checkpoint-2")
    saved, held = weights(run / "model"), weights(run / "checkpoint-2")
    assert saved.keys() == held.keys() and all(saved[k].equal(held[k]) for k in saved)


def test_a_raised_max_steps_resumes_from_the_last_checkpoint(cli, finished):
    recipe, run = finished
    before = digest(run / "model")
    code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume", "--set", "train.max_steps=3", "--set",
                       "train.save_steps=3")
    assert code == 0, err
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-3"]
    assert steps_logged(run) == [1, 2, 3]
    assert digest(run / "model") != before


@pytest.mark.parametrize("epochs", [1, 1.5], ids=["at-an-epochs-end", "inside-an-epoch"])
def test_a_run_that_ends_by_epochs_trains_no_step_past_its_end(cli, tiny_dir, tmp_path, epochs):
    """train.max_steps unset: the epochs decide the last step, at an epoch's end (where the trainer would finalize
    the run again and record a loss of 0) or inside one (where it would train a step more). Finished, the same recipe
    is refused (it re-saved the model and evaluated again); cut off in its final save, the model is saved from the
    checkpoint with no step."""
    recipe, run = train(cli, tiny_dir, tmp_path, num_train_epochs=epochs, save_strategy="epoch" if epochs == 1 else
                        "steps", save_steps=1)
    (last,) = run.glob("checkpoint-*")
    logged, result = steps_logged(run), json.loads((run / "manifest.json").read_text())["result"]
    before = {name: digest(run / name) for name in ("model", last.name)}
    for dry in ([], ["--dry-run"]):
        code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume", *dry)
        assert code == 2 and f"{last.name} already reached the last step of its train.num_train_epochs" in err, err
    assert {name: digest(run / name) for name in ("model", last.name)} == before

    shutil.rmtree(run / "model")  # cut off in its final save
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.pop("result")
    (run / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume")
    assert code == 0, err
    assert f"{last.name} is at step {result['global_step']} of the run's {result['global_step']}" in err
    assert list(run.glob("checkpoint-*")) == [last] and steps_logged(run) == logged
    after = json.loads((run / "manifest.json").read_text())["result"]
    assert after["global_step"] == result["global_step"] and after["resumed_from"] == str(last)
    saved, held = weights(run / "model"), weights(last)
    assert all(saved[k].equal(held[k]) for k in saved)


@pytest.mark.parametrize("change", ["peft.r=8", "train.optim=sgd"], ids=["lora-added", "another-optimizer"])
def test_a_resume_whose_checkpoint_cannot_load_is_refused_before_loading(cli, finished, change):
    """LoRA added to a full fine-tune's run loaded the model, reported every checkpoint key missing and died on the
    optimizer state's shapes (SGD on AdamW's state: a KeyError); the dry run with --resume said nothing. Both now
    refuse, naming the key."""
    recipe, run = finished
    overrides = ["--set", change]
    before = {name: digest(run / name) for name in ("model", "checkpoint-2")}
    for dry in ([], ["--dry-run"]):
        code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume", "--set", "train.max_steps=4", *overrides, *dry)
        assert code == 2, err
        key = change.split("=")[0].removesuffix(".r")
        assert f"error: --resume: {key} changed since {run} started" in err, err
    assert {name: digest(run / name) for name in ("model", "checkpoint-2")} == before
    assert not (run / "recipe.yaml.previous").exists()
    code, out, err = cli("sft", str(recipe), "-o", str(run), "--resume", "--set", "train.max_steps=4", "--dry-run")
    assert code == 0 and f"resume: from {run / 'checkpoint-2'}" in out, err
