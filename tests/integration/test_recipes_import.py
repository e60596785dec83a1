"""`smolalign recipes import` end to end: a config in each upstream layout becomes a recipe file that the stage's
dry run accepts with local data; a refused import writes nothing; `recipes cp` copies a shipped recipe with its
data so that it runs from elsewhere."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from tiny_models import chat_rows, pair_rows, write_jsonl

REPO = Path(__file__).resolve().parents[2]
CHATML = (REPO / "chat_templates" / "chatml.jinja").read_text()


def write_config(path: Path, mapping: dict) -> Path:
    path.write_text("# Model arguments\n" + yaml.safe_dump(mapping, sort_keys=False))
    return path


@pytest.fixture
def templated_model(tiny_dir, tmp_path) -> Path:
    """The tiny model with a chat template of its own, as hub models ship (upstream configs default to it)."""
    from transformers import AutoTokenizer

    folder = tmp_path / "tiny-with-template"
    shutil.copytree(tiny_dir, folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(folder)
    return folder


def test_handbook_sft_imports_and_dry_runs(cli, tiny_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    config = write_config(tmp_path / "config_sft.yaml", {
        "model_name_or_path": str(tiny_dir), "torch_dtype": "float32",
        "chat_template": CHATML,
        "dataset_mixture": {"datasets": [{"id": "chat.jsonl", "columns": ["messages"], "weight": 0.5}], "seed": 1},
        "dataset_num_proc": 2, "eos_token": "<|im_end|>",
        "assistant_only_loss": True, "learning_rate": 2.0e-5, "lr_scheduler_type": "cosine_with_min_lr",
        "lr_scheduler_kwargs": {"min_lr_rate": 0.1}, "max_length": 256, "max_steps": 2,
        "per_device_train_batch_size": 2, "warmup_ratio": 0.03, "overwrite_output_dir": True,
    })
    out = tmp_path / "recipes" / "sft.yaml"
    code, stdout, err = cli("recipes", "import", config, "-o", out)
    assert code == 0, err
    recipe = yaml.safe_load(out.read_text())
    template = out.parent / "config_sft.chat_template.jinja"
    assert template.read_text() == CHATML
    assert recipe["data"]["sources"] == [{"path": str(tmp_path / "chat.jsonl"), "split": "train",
                                          "columns": ["messages"], "weight": 0.5}]
    assert recipe["train"]["warmup_steps"] == 0.03 and "warmup_ratio" not in recipe["train"]
    assert "dropped  eos_token" in stdout
    run_dir = tmp_path / "run"
    code, _, err = cli("sft", out, "--dry-run", "--output-dir", run_dir)
    assert code == 0, err
    assert not run_dir.exists()


def test_open_r1_grpo_imports_and_dry_runs(cli, tiny_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "math.jsonl", [{"problem": f"What is {i} + {i}?", "solution": str(2 * i), "level": 1}
                                          for i in range(8)])
    config = write_config(tmp_path / "config_demo.yaml", {
        "model_name_or_path": str(tiny_dir), "model_revision": "main", "torch_dtype": "float32",
        "chat_template": CHATML,
        "dataset_name": str(tmp_path / "math.jsonl"), "dataset_prompt_column": "problem",
        "system_prompt": "Respond as <think>\n...\n</think>\n<answer>\n...\n</answer>",
        "bf16": True, "use_vllm": False, "vllm_gpu_memory_utilization": 0.7, "learning_rate": 2.0e-5,
        "max_prompt_length": 64,
        "max_completion_length": 16, "num_generations": 4, "per_device_train_batch_size": 4, "max_steps": 2,
        "reward_funcs": ["accuracy", "format", "tag_count"], "reward_weights": [1.0, 1.0, 1.0],
        "benchmarks": [], "callbacks": ["push_to_hub_revision"], "hub_model_revision": "main",
    })
    out = tmp_path / "grpo.yaml"
    code, stdout, err = cli("recipes", "import", config, "-o", out)
    assert code == 0, err
    # open-r1's vLLM memory share sizes a colocated engine; generating with transformers it is read by nothing
    assert "dropped  vllm_gpu_memory_utilization: the policy generates with transformers" in stdout + err
    recipe = yaml.safe_load(out.read_text())
    assert "vllm_gpu_memory_utilization" not in recipe["train"]
    assert [r["name"] for r in recipe["rewards"]] == ["math_accuracy", "answer_format", "tag_count"]
    assert recipe["data"]["system_prompt"].startswith("Respond as <think>\n")
    code, _, err = cli("rl", out, "--dry-run", "--output-dir", tmp_path / "run")
    assert code == 0, err

    from recipe_runs import loaded_run

    from smolalign.data.prompts import recipe_prompts

    rows = recipe_prompts(loaded_run(str(out), [], "rl").recipe).train
    assert rows[0]["prompt"][0] == {"role": "system", "content": recipe["data"]["system_prompt"]}
    assert rows[0]["prompt"][1] == {"role": "user", "content": "What is 0 + 0?"}
    assert rows[0]["solution"] == "0"


def test_trl_dpo_imports_and_dry_runs(cli, templated_model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "pairs.jsonl", pair_rows(8))
    config = write_config(tmp_path / "dpo.yaml", {
        "model_name_or_path": str(templated_model), "dtype": "float32",
        "datasets": [{"path": "json", "data_files": "pairs.jsonl"}],
        "beta": 0.1, "loss_type": "apo_zero", "max_length": 256, "max_steps": 2, "per_device_train_batch_size": 2,
        "use_peft": True, "lora_target_modules": ["q_proj", "v_proj"],
    })
    out = tmp_path / "po.yaml"
    code, _, err = cli("recipes", "import", config, "-o", out)
    assert code == 0, err
    recipe = yaml.safe_load(out.read_text())
    assert recipe["method"] == "apo_zero" and recipe["template"] == {"name": "model"}
    assert recipe["peft"]["target_modules"] == ["q_proj", "v_proj"]
    code, _, err = cli("po", out, "--dry-run", "--output-dir", tmp_path / "run")
    assert code == 0, err


@pytest.mark.parametrize("patch, fragment", [
    ({"learnin_rate": 1e-5}, "learnin_rate"),
    ({"reward_funcs": ["reasoning_steps"]}, "reasoning_steps"),
])
def test_refused_import_is_one_line_and_writes_nothing(cli, tmp_path, patch, fragment):
    config = write_config(tmp_path / "c.yaml", {"model_name_or_path": "m", "dataset_name": "d", **patch})
    out = tmp_path / "out.yaml"
    code, _, err = cli("recipes", "import", config, "-o", out)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert str(config) in lines[0] and fragment in lines[0]
    assert list(tmp_path.iterdir()) == [config]


def test_unrecognised_format_is_refused(cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("learning_rate: 1.0e-5\n")
    code, _, err = cli("recipes", "import", config, "-o", tmp_path / "out.yaml")
    assert code == 2 and "not a TRL, alignment-handbook or open-r1 config" in err
    assert not (tmp_path / "out.yaml").exists()


def test_cp_copies_a_shipped_recipe_with_its_data(cli, tmp_path, monkeypatch):
    code, _, err = cli("recipes", "cp", "quickstart/rl", tmp_path / "new" / "my_rl.yaml")
    assert code == 0, err
    assert (tmp_path / "new" / "data" / "arithmetic_three.jsonl").is_file()
    dest = tmp_path / "work"  # a folder, created
    code, _, err = cli("recipes", "cp", "quickstart/sft", dest)
    assert code == 0, err
    shipped = REPO / "recipes" / "quickstart"
    assert (dest / "sft.yaml").read_text() == (shipped / "sft.yaml").read_text()
    assert (dest / "data" / "arithmetic.jsonl").read_bytes() == (shipped / "data" / "arithmetic.jsonl").read_bytes()
    from smolalign.recipe.load import read_recipe

    assert read_recipe(dest / "sft.yaml")["data"]["sources"][0]["path"] == str(dest / "data" / "arithmetic.jsonl")
    code, _, err = cli("recipes", "cp", "quickstart/sft", dest)
    assert code == 2 and "exists" in err


def test_cp_of_a_recipe_that_extends_one_next_to_it_copies_that_one_and_its_data(cli, tmp_path, monkeypatch):
    """quickstart/po_sweep extends po.yaml by a relative path: the copy must resolve to the same recipe."""
    from smolalign.recipe.load import read_recipe

    monkeypatch.chdir(tmp_path)   # away from the checkout, whose recipes/ must not be what the copy finds
    code, out, err = cli("recipes", "cp", "quickstart/po_sweep", tmp_path / "mine")
    assert code == 0, err
    copied = read_recipe(tmp_path / "mine" / "po_sweep.yaml")
    shipped = read_recipe(REPO / "recipes" / "quickstart" / "po_sweep.yaml")
    relocated = json.loads(json.dumps(shipped).replace(str(REPO / "recipes" / "quickstart"), str(tmp_path / "mine")))
    assert copied == relocated
    assert (tmp_path / "mine" / "data" / "arithmetic_decimals.jsonl").is_file()   # po.yaml's prompts
    assert "po.yaml" in out


def test_handbook_orpo_for_a_cluster_imports_here_and_the_dry_run_names_what_is_missing(cli, templated_model,
                                                                                       tmp_path, monkeypatch):
    """A config written for GPUs (flash-attn, wandb, a hub push) imports on a machine without them: what this
    machine lacks is noted, not refused; the dry run of the same recipe here refuses it, naming the key."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token"))
    write_jsonl(tmp_path / "pairs.jsonl", pair_rows(8))
    (tmp_path / "orpo").mkdir()
    config = write_config(tmp_path / "orpo" / "config_full.yaml", {
        "model_name_or_path": str(templated_model), "use_flash_attention_2": True,
        "dataset_mixer": {str(tmp_path / "pairs.jsonl"): 0.5}, "dataset_splits": ["train", "test"],
        "beta": 0.05, "max_length": 256, "max_steps": 1, "report_to": ["wandb"],
        "push_to_hub": True, "hub_model_id": "me/orpo-test",
    })
    out = tmp_path / "orpo.yaml"
    code, stdout, err = cli("recipes", "import", config, "-o", out)
    assert code == 0, err
    recipe = yaml.safe_load(out.read_text())
    assert recipe["method"] == "orpo" and recipe["hub"] == {"repo_id": "me/orpo-test"}
    assert recipe["data"]["sources"] == [{"path": str(tmp_path / "pairs.jsonl"), "split": "train", "weight": 0.5}]
    notes = [line for line in stdout.splitlines() if line.startswith("note")]
    assert any("model.attn_implementation" in n for n in notes) or importlib_has("flash_attn")
    code, _, err = cli("po", out, "--dry-run", "--set", "model.attn_implementation=sdpa", "--set",
                       "train.report_to=[]")
    assert code == 2 and "hub.repo_id" in err  # no token here: the one check left


def importlib_has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
