"""`--resume` of a run that already reached train.max_steps: transformers' Trainer would train one step past it and
save over the finished model (a step 3 for a 2-step run, its checkpoint-2 then deleted by save_total_limit). It is
refused before anything is written, and raising train.max_steps still resumes from the last checkpoint."""

import hashlib

import yaml
from tiny_models import chat_rows, write_jsonl


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_finished_run_is_not_trained_past_its_last_step(cli, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(32))
    recipe = tmp_path / "sft.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2, "max_steps": 2,
                  "save_steps": 2, "save_total_limit": 1, "logging_steps": 1, "seed": 0}}))
    run = tmp_path / "run"
    assert cli("sft", str(recipe), "-o", str(run))[0] == 0
    before = {name: digest(run / name) for name in ("model", "checkpoint-2")}
    manifest = (run / "manifest.json").read_text()

    code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume")
    assert code == 2
    assert "checkpoint-2 already reached train.max_steps 2" in err
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    assert {name: digest(run / name) for name in ("model", "checkpoint-2")} == before
    assert (run / "manifest.json").read_text() == manifest

    code, _, err = cli("sft", str(recipe), "-o", str(run), "--resume", "--set", "train.max_steps=3", "--set",
                       "train.save_steps=3")
    assert code == 0, err
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-3"]
    assert digest(run / "model") != before["model"]
