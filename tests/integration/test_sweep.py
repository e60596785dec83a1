"""`smolalign sweep` end to end on a tiny model: two cells trained and evaluated from the CLI, the comparison's rows
agreeing with each cell's own evaluation, and a second call skipping the finished cell, evaluating a trained one
and resuming a cut-off one from its checkpoint."""

import json
import shutil

import pytest
import yaml
from tiny_models import chat_rows, write_jsonl


@pytest.fixture
def sweep_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": f"what is {i} plus 1", "solution": str(i + 1)}
                                                         for i in range(4)])
    return write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2, "learning_rate": 1e-3,
                  "logging_steps": 1, "save_strategy": "steps", "save_steps": 2, "gradient_checkpointing": False},
        "eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": "math_accuracy"}], "modes": ["no_think"],
                 "samples": 2, "max_new_tokens": 6, "temperature": 1.0}})


CELLS = ("train.learning_rate=0.05", "train.learning_rate=0.0")


def mtimes(folder) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_cells_run_evaluate_compare_and_resume(cli, sweep_recipe, tmp_path):
    out_dir = tmp_path / "sweep"
    code, _, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", out_dir)
    assert code == 0, err
    for name, rate in zip(CELLS, (0.05, 0.0), strict=True):
        cell = out_dir / name
        assert (cell / "model" / "config.json").is_file() and (cell / "eval.json").is_file()
        recipe = (cell / "recipe.yaml").read_text()
        assert f"learning_rate: {rate}" in recipe and "before: false" in recipe
        report = json.loads((cell / "eval.json").read_text())
        assert [m["label"] for m in report["models"]] == ["after"]

    sweep = json.loads((out_dir / "sweep.json").read_text())
    assert [row["cell"] for row in sweep["rows"]] == list(CELLS) and sweep["baseline"] == CELLS[0]
    assert sweep["rows"][0]["overrides"] == {"train.learning_rate": "0.05"}
    assert sweep["rows"][0]["difference"] is None
    own = [json.loads((out_dir / name / "eval.json").read_text())["results"]["after"]["no_think"] for name in CELLS]
    for row, evaluated in zip(sweep["rows"], own, strict=True):
        # The same prompts, samples and bootstrap seed: the sweep's numbers are the cell's own evaluation.
        assert row["metrics"]["no_think"] == evaluated
    # A difference of means over the same prompts is the mean of the paired differences.
    for metric in ("length", "math_accuracy mean", "compliance"):
        difference = sweep["rows"][1]["difference"]["no_think"][metric]["value"]
        assert difference == pytest.approx(own[1][metric]["value"] - own[0][metric]["value"])
    assert (out_dir / "sweep.md").read_text().count("|") > 10
    trained = json.loads((out_dir / CELLS[0] / "manifest.json").read_text())["result"]["global_step"]
    assert trained == 2

    # Cell 1 finished; cell 2 is cut off: its model and evaluation gone, its checkpoint kept.
    finished = mtimes(out_dir / CELLS[0])
    cut_off = out_dir / CELLS[1]
    shutil.rmtree(cut_off / "model")
    for name in ("eval.json", "eval.samples.jsonl"):
        (cut_off / name).unlink()
    manifest = json.loads((cut_off / "manifest.json").read_text())
    manifest.pop("result")
    (cut_off / "manifest.json").write_text(json.dumps(manifest))
    (out_dir / "sweep.json").unlink()

    code, _, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", out_dir)
    assert code == 0, err
    assert mtimes(out_dir / CELLS[0]) == finished
    resumed = json.loads((cut_off / "manifest.json").read_text())["result"]
    assert resumed["resumed_from"] == str(cut_off / "checkpoint-2")
    assert (cut_off / "model" / "config.json").is_file() and (cut_off / "eval.json").is_file()
    assert len(json.loads((out_dir / "sweep.json").read_text())["rows"]) == 2

    # Only the evaluation missing: the model is evaluated, not trained again (its weights and tokenizer untouched;
    # its model card written again, with the results).
    model_files = {k: v for k, v in mtimes(cut_off / "model").items() if k != "README.md"}
    (cut_off / "eval.json").unlink()
    code, _, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", out_dir)
    assert code == 0, err
    assert {k: v for k, v in mtimes(cut_off / "model").items() if k != "README.md"} == model_files
    assert (cut_off / "eval.json").is_file() and "## Evaluation" in (cut_off / "model" / "README.md").read_text()

    # The base recipe edited since: the finished cells ran the old one, so the sweep is refused before any cell
    # runs (skipped, they would be compared as if they had run the new one), naming the key; nothing is touched.
    before = {name: mtimes(out_dir / name) for name in CELLS}
    recipe = yaml.safe_load(sweep_recipe.read_text())
    recipe["train"]["warmup_steps"] = 1
    sweep_recipe.write_text(yaml.safe_dump(recipe, sort_keys=False))
    code, _, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", out_dir)
    assert code == 2 and f"sweep cell {CELLS[0]}: train.warmup_steps changed" in err, err
    assert {name: mtimes(out_dir / name) for name in CELLS} == before

    # A default the recipe does not write, changed between smolalign versions (the recipe.yaml of a cell written by
    # an older one), is not an edit: the cells are still taken as done.
    del recipe["train"]["warmup_steps"]
    sweep_recipe.write_text(yaml.safe_dump(recipe, sort_keys=False))
    for name in CELLS:
        kept = yaml.safe_load((out_dir / name / "recipe.yaml").read_text())
        kept["eval"]["max_turns"], kept["train"]["adam_beta2"] = 4, 0.98
        (out_dir / name / "recipe.yaml").write_text(yaml.safe_dump(kept, sort_keys=False))
    code, out, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", out_dir, "--dry-run")
    assert code == 0, err
    assert f"{CELLS[0]}  [sft, done]" in out, out

    # A cell started with a --set the sweep no longer passes trained with that value: an edit, refused.
    manifest = json.loads((out_dir / CELLS[0] / "manifest.json").read_text())
    manifest["command"] += ["--set", "train.weight_decay=0.5"]
    (out_dir / CELLS[0] / "manifest.json").write_text(json.dumps(manifest))
    kept = yaml.safe_load((out_dir / CELLS[0] / "recipe.yaml").read_text())
    kept["train"]["weight_decay"] = 0.5
    (out_dir / CELLS[0] / "recipe.yaml").write_text(yaml.safe_dump(kept, sort_keys=False))
    code, out, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", out_dir, "--dry-run")
    assert code == 2 and f"sweep cell {CELLS[0]}: train.weight_decay changed" in err, err


SCONTROL = """#!/bin/bash
[[ $1 == show ]] && echo localhost
"""


@pytest.mark.slow  # about a minute on 2 CPU cores: accelerate starts a real process for the array task
def test_slurm_array_task_trains_its_cell(cli, sweep_recipe, tmp_path, monkeypatch):
    import os
    import subprocess

    from test_slurm_job_on_cpu import REPO, SRUN

    from smolalign.ports import free_port

    monkeypatch.chdir(tmp_path)
    grid = ("--grid", "train.learning_rate=0.05,0.0", "-o", "sweep")
    code, _, err = cli("sweep", sweep_recipe, *grid, "--launch", "ddp", "--slurm", "gpus-per-node=1", "--slurm",
                       "script=job.sbatch", "--slurm", f"main-process-port={free_port()}")
    assert code == 0, err
    assert not (tmp_path / "sweep").exists()  # writing the job runs nothing
    fake = tmp_path / "fake"
    fake.mkdir()
    for name, text in (("scontrol", SCONTROL), ("srun", SRUN)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "FAKE_DIR": str(fake),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "SLURM_JOB_NODELIST": "node1", "SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "sweep", "SLURM_CPUS_ON_NODE": "1",
           "SLURM_ARRAY_TASK_ID": "1"}
    job = subprocess.run(["bash", "job.sbatch"], env=env, capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr + (fake / "task0.log").read_text()[-3000:]
    cell = tmp_path / "sweep" / CELLS[1]
    assert (cell / "model" / "config.json").is_file() and (cell / "eval.json").is_file()
    assert "--array-task" in json.loads((cell / "manifest.json").read_text())["command"]
    assert not (tmp_path / "sweep" / CELLS[0]).exists()  # task 1 ran cell 1 only

    finished = mtimes(cell)
    code, _, err = cli("sweep", sweep_recipe, *grid)  # after the job: the comparison, cell 1 not run again
    assert code == 0, err
    assert mtimes(cell) == finished
    assert [row["cell"] for row in json.loads((tmp_path / "sweep" / "sweep.json").read_text())["rows"]] == list(CELLS)


def test_the_dry_run_prints_each_cells_command_as_a_user_would_type_it(cli, sweep_recipe, tmp_path):
    code, out, err = cli("sweep", sweep_recipe, "--grid", "train.learning_rate=0.05,0.0", "-o", tmp_path / "s",
                         "--dry-run")
    assert code == 0, err
    commands = [line.strip() for line in out.splitlines() if line.strip().startswith("smolalign ")]
    assert len(commands) == 2 and all(c.startswith(f"smolalign sft {sweep_recipe} --set ") for c in commands), out
