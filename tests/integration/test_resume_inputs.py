"""A resume after a data file or a model folder was rewritten in place (same path, same recipe) says so: the steps
after the checkpoint train on the new content. The manifest stamps each input (path, size, mtime) when a run starts;
without the comparison the resume is silent."""

import os

import pytest
from resume_checks import cut_back
from tiny_models import build_model, pair_rows, write_jsonl


@pytest.fixture
def finished(cli, write_recipe, tiny_dir, tmp_path):
    """A 4-step DPO run against a reference that is a copy of the tiny model (a model folder of its own)."""
    import shutil

    reference = tmp_path / "reference"
    shutil.copytree(tiny_dir, reference)
    data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(16))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
                           "reference": {"source": str(reference)}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 4,
                                     "save_steps": 2, "logging_steps": 1, "gradient_checkpointing": False}})
    code, _, err = cli("po", recipe, "-o", tmp_path / "full")
    assert code == 0, err
    return {"recipe": recipe, "data": data, "reference": reference, "full": tmp_path / "full"}


def resume(cli, finished, folder):
    cut_back(finished["full"], folder)
    code, _, err = cli("po", finished["recipe"], "-o", folder, "--resume")
    assert code == 0, err
    return err


def test_a_resume_with_the_same_inputs_says_nothing(cli, finished, tmp_path):
    assert "changed since" not in resume(cli, finished, tmp_path / "same")


def test_a_data_file_rewritten_in_place_is_warned_about(cli, finished, tmp_path):
    write_jsonl(finished["data"], pair_rows(16, seed=5))
    err = resume(cli, finished, tmp_path / "data")
    assert f"warning: --resume: the files of data source {finished['data']} changed since" in err
    assert "reference.source" not in err


def test_a_reference_rebuilt_in_place_is_warned_about(cli, finished, tmp_path, tiny_tokenizer):
    build_model(finished["reference"], tiny_tokenizer, seed=7)
    weights = next(finished["reference"].glob("*.safetensors"))
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))  # a later write
    err = resume(cli, finished, tmp_path / "reference-run")
    assert "warning: --resume: the files of reference.source changed since" in err
    assert "data source" not in err
