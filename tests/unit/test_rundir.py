"""The run directory: nothing is written before a run's checks pass, a requeued job with no checkpoint yet starts
over, damaged checkpoints are skipped with a note (or refused by name when none is complete), a finished run without
checkpoints is not retrained behind the user's back, and state files are replaced atomically."""

import json
import time

import pytest
from checkpoint_bytes import trainer_checkpoint

from smolalign.errors import SmolalignError
from smolalign.runs.checkpoint_files import damage
from smolalign.runs.manifest import write_manifest
from smolalign.runs.rundir import check_run_dir, last_checkpoint, start_run_dir, write_recipe


def write(root, files: dict[str, bytes]):
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)


def test_resume_without_a_checkpoint_starts_fresh_and_skips_a_cut_off_save(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert check_run_dir(run_dir, resume=True, overwrite=False) is None and not run_dir.exists()
    run_dir.mkdir()
    (run_dir / "recipe.yaml").write_text("stage: sft\n")  # a run requeued before its first checkpoint
    assert check_run_dir(run_dir, resume=True, overwrite=False) is None
    assert "starting from the beginning" in capsys.readouterr().err
    write(run_dir, trainer_checkpoint(10))
    write(run_dir, {k: v for k, v in trainer_checkpoint(20).items() if not k.endswith("trainer_state.json")})
    assert check_run_dir(run_dir, resume=True, overwrite=False) == run_dir / "checkpoint-10"
    assert "skipping damaged checkpoint-20 (it has no trainer_state.json" in capsys.readouterr().err
    finished = tmp_path / "finished"
    (finished / "model").mkdir(parents=True)
    with pytest.raises(SmolalignError, match="holds a finished model"):
        check_run_dir(finished, resume=True, overwrite=False)


@pytest.mark.parametrize("name, cut", [("model.safetensors", 40), ("model.safetensors", 3), ("optimizer.pt", 100),
                                       ("trainer_state.json", 5), ("rng_state.pth", 0)])
def test_a_truncated_file_makes_a_checkpoint_incomplete(tmp_path, name, cut):
    files = trainer_checkpoint(30)
    write(tmp_path, files)
    assert damage(tmp_path / "checkpoint-30") is None
    path = tmp_path / "checkpoint-30" / name
    path.write_bytes(path.read_bytes()[:cut] if cut else b"")
    assert str(path) in damage(tmp_path / "checkpoint-30")
    write(tmp_path, trainer_checkpoint(20))
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-20"


def test_no_complete_checkpoint_is_refused_naming_each(tmp_path):
    write(tmp_path, trainer_checkpoint(10))
    (tmp_path / "checkpoint-10" / "model.safetensors").unlink()
    write(tmp_path, {"checkpoint-20/trainer_state.json": b"{\"global_st"})
    with pytest.raises(SmolalignError) as refused:
        last_checkpoint(tmp_path)
    assert "checkpoint-20" in str(refused.value) and "checkpoint-10 (it holds no model weights" in str(refused.value)


def test_a_sharded_checkpoint_needs_every_shard_its_index_lists(tmp_path):
    files = trainer_checkpoint(5)
    shard = files.pop("checkpoint-5/model.safetensors")
    files["checkpoint-5/model-00001-of-00002.safetensors"] = shard
    files["checkpoint-5/model.safetensors.index.json"] = json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()
    write(tmp_path, files)
    assert "model-00002-of-00002.safetensors, which is missing" in damage(tmp_path / "checkpoint-5")
    (tmp_path / "checkpoint-5" / "model-00002-of-00002.safetensors").write_bytes(shard)
    assert damage(tmp_path / "checkpoint-5") is None


def test_nothing_is_written_until_the_run_starts(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "old.txt").write_text("previous run")
    with pytest.raises(SmolalignError, match="is not empty"):
        check_run_dir(run_dir, resume=False, overwrite=False)
    assert check_run_dir(run_dir, resume=False, overwrite=True) is None
    assert (run_dir / "old.txt").is_file()  # --overwrite empties it only when the run starts
    start_run_dir(run_dir, overwrite=True)
    assert list(run_dir.iterdir()) == []


def test_state_files_are_replaced_whole_and_a_torn_manifest_is_refused(tmp_path):
    write_manifest(tmp_path, stage="sft")
    write_manifest(tmp_path, result={"global_step": 3})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["stage"] == "sft" and manifest["result"] == {"global_step": 3}
    write_recipe(tmp_path, {"stage": "sft"})
    assert (tmp_path / "recipe.yaml").read_text() == "stage: sft\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "recipe.yaml"]  # no temporary left
    torn = (tmp_path / "manifest.json").read_text()[:25]
    (tmp_path / "manifest.json").write_text(torn)
    with pytest.raises(SmolalignError, match="manifest.json: not valid JSON"):
        write_manifest(tmp_path, result={})
    assert (tmp_path / "manifest.json").read_text() == torn
    with pytest.raises(SmolalignError, match="manifest.json: not valid JSON"):
        check_run_dir(tmp_path, resume=True, overwrite=False)


def test_summary_skips_steps_whose_value_was_not_logged(tmp_path):
    """A step where no reward could be scored logs None: the summary reads the steps that have a value."""
    from smolalign.runs.metrics import summary

    rows = [{"step": 1, "reward": None}, {"step": 2, "reward": 0.25, "kl": None}, {"step": 3, "reward": 0.75, "kl": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert summary(tmp_path, "reward", ("kl",)) == "reward 0.25 (step 2) -> 0.75 (step 3); kl nan -> 0.5"
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": None}) + "\n")
    assert summary(tmp_path, "reward").startswith("reward: nothing logged")


def test_a_metrics_line_torn_by_a_kill_is_skipped_and_the_resumed_run_starts_a_new_line(tmp_path):
    from types import SimpleNamespace

    from smolalign.runs.metrics import metrics_callback, read_metrics

    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 2.5}) + '\n{"step": 2, "lo')
    callback = metrics_callback(tmp_path)
    before = time.time()
    callback.on_log(None, SimpleNamespace(global_step=2, is_world_process_zero=True), None, logs={"loss": 2.0})
    callback.on_log(None, SimpleNamespace(global_step=3, is_world_process_zero=True), None, logs={"loss": 1.5})
    after = time.time()
    rows = read_metrics(tmp_path)
    logged_at = [row.pop("time", None) for row in rows]
    assert rows == [{"step": 1, "loss": 2.5}, {"step": 2, "loss": 2.0}, {"step": 3, "loss": 1.5}]
    assert logged_at[0] is None and all(before - 0.001 <= t <= after + 0.001 for t in logged_at[1:]), logged_at
    lines = (tmp_path / "metrics.jsonl").read_text().split("\n")
    # the torn line stays as it was; the resumed run's entries start on lines of their own
    assert lines[1] == '{"step": 2, "lo' and lines[2].startswith('{"step": 2, "loss": 2.0') and lines[-1] == "", lines


def test_an_fsdp_checkpoint_with_sharded_weights_is_complete_until_a_distcp_file_is_cut(tmp_path):
    """FSDP's SHARDED_STATE_DICT saves the model as a DCP folder (pytorch_model_fsdp_0/) instead of safetensors."""
    import warnings

    import torch
    from torch.distributed.checkpoint import FileSystemWriter, save

    files = trainer_checkpoint(6)
    files.pop("checkpoint-6/model.safetensors")
    write(tmp_path, files)
    shards = tmp_path / "checkpoint-6" / "pytorch_model_fsdp_0"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        save({"model.embed_tokens.weight": torch.ones(64, 8)}, storage_writer=FileSystemWriter(str(shards)),
             no_dist=True)
    assert damage(tmp_path / "checkpoint-6") is None
    (distcp,) = shards.glob("*.distcp")
    distcp.write_bytes(distcp.read_bytes()[:100])
    assert str(distcp) in damage(tmp_path / "checkpoint-6")
