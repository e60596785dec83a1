"""`--resume` of a run whose newest checkpoint holds its last step (train.max_steps). transformers' Trainer, resumed
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


@pytest.fixture
def finished(cli, tiny_dir, tmp_path):
    """A 2-step SFT run that saved checkpoint-2 and its model."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(32))
    recipe = tmp_path / "sft.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2, "max_steps": 2,
                  "save_steps": 2, "save_total_limit": 1, "logging_steps": 1, "seed": 0}}))
    run = tmp_path / "run"
    assert cli("sft", str(recipe), "-o", str(run))[0] == 0
    return recipe, run


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
