"""The CLI: fast help, exit codes and one-line messages for bad input, recipes, template rendering, dry runs."""

import json
import subprocess
import sys

import pytest
from tiny_models import chat_rows, write_jsonl


def test_help_does_not_import_heavy_libraries():
    code = ("import sys\nfrom smolalign.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'transformers', 'trl', 'datasets', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"



EXIT_PROBE = """
import atexit, gc, runpy
gc.disable()  # no automatic collection: what the command drops stays for the program's own to find


class Dropped:
    def __del__(self):
        print("dropped cycle destroyed")


cycle = Dropped()
cycle.self = cycle
del cycle
atexit.register(lambda: print("frozen", gc.get_freeze_count()))  # runs after the program's own code
runpy.run_module("smolalign", run_name="__main__")
"""


@pytest.mark.parametrize(("args", "code"), [(["recipes", "list"], 0), (["sft", "no-such-recipe.yaml"], 2)])
def test_the_program_leaves_the_last_collection_nothing_to_walk(args, code):
    """`python -m smolalign` and the console script collect what the command dropped (a launched rank's closed
    process group must be destroyed before the process ends) and freeze the rest (benchmarks/cli_exit.py: 2.2 s of
    exit after a training command on 2 cores, 0.9 s), keeping the exit code."""
    from importlib.metadata import entry_points

    done = subprocess.run([sys.executable, "-c", EXIT_PROBE, *args], capture_output=True, text=True)
    assert done.returncode == code, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "dropped cycle destroyed" in lines  # collected before the freeze: the last collection skips frozen ones
    frozen = int(lines[-1].removeprefix("frozen "))
    assert frozen > 10_000  # every object alive when the command returned
    (script,) = [entry for entry in entry_points(group="console_scripts") if entry.name == "smolalign"]
    assert script.value == "smolalign.cli:run"

@pytest.fixture
def recipe_factory(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))

    def make(**patch) -> str:
        recipe = {"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                  "data": {"sources": [{"path": str(data)}]},
                  "train": {"max_length": 256, "max_steps": 2, "per_device_train_batch_size": 2}}
        for key, value in patch.items():
            section, _, field = key.partition("__")
            if field:
                recipe.setdefault(section, {})[field] = value
            else:
                recipe[section] = value
        return str(write_recipe(recipe))

    return make


def assert_one_line_error(code, err, *fragments):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_unknown_key_is_exit_2_with_suggestion(cli, recipe_factory):
    code, _, err = cli("sft", recipe_factory(train__learnin_rate=1e-5), "--dry-run")
    assert_one_line_error(code, err, "train.learnin_rate", "did you mean learning_rate?")


def test_wrong_type_is_exit_2(cli, recipe_factory):
    code, _, err = cli("sft", recipe_factory(train__num_train_epochs="three"), "--dry-run")
    assert_one_line_error(code, err, "train.num_train_epochs must be a number", "'three'")


def test_missing_data_file_is_exit_2(cli, recipe_factory, tmp_path):
    missing = str(tmp_path / "missing.jsonl")
    code, _, err = cli("sft", recipe_factory(data={"sources": [{"path": missing}]}), "--dry-run")
    assert_one_line_error(code, err, missing, "no such file")


def test_missing_column_is_exit_2(cli, recipe_factory, tmp_path):
    data = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a"}])
    code, _, err = cli("sft", recipe_factory(data={"sources": [{"path": str(data), "columns": ["prompt", "answer"]}]}),
                       "--dry-run")
    assert_one_line_error(code, err, "qa.jsonl", "no column 'prompt'")
    code, _, err = cli("sft", recipe_factory(data={"sources": [{"path": str(data)}], "format": "messages"}), "--dry-run")
    assert_one_line_error(code, err, "qa.jsonl", "no column 'messages'")


def test_template_without_markers_under_assistant_only_loss_is_exit_2(cli, recipe_factory, tmp_path):
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    code, _, err = cli("sft", recipe_factory(template={"name": str(template)}), "--dry-run")
    assert_one_line_error(code, err, "template plain", "generation")


def test_unknown_recipe_and_offline_hub_model_are_exit_2(cli, recipe_factory):
    code, _, err = cli("sft", "quickstart/sfft", "--dry-run")
    assert_one_line_error(code, err, "quickstart/sfft", "did you mean quickstart/sft?")
    code, _, err = cli("data", "preview", recipe_factory(model={"source": "no-such-org/no-such-model"}))
    assert_one_line_error(code, err, "no-such-org/no-such-model", "HF_HUB_OFFLINE")


def test_an_sft_recipe_is_not_an_rl_recipe(cli, recipe_factory):
    code, _, err = cli("rl", recipe_factory())
    assert code == 2 and "needs a list of rewards" in err


def test_an_sft_recipe_is_not_a_po_recipe(cli, recipe_factory):
    code, _, err = cli("po", recipe_factory())
    assert code == 2 and "method is required" in err


def test_dry_run_prints_plan_and_writes_nothing(cli, recipe_factory, tmp_path):
    out_dir = tmp_path / "run"
    code, out, err = cli("sft", recipe_factory(train__packing="bfd", train__gradient_accumulation_steps=4),
                         "--dry-run", "--output-dir", out_dir)
    assert code == 0, err
    for line in ("world size             1", "per-device batch       2", "gradient accumulation  4",
                 "global batch           8", "steps                  2 (train.max_steps)",
                 "tokens per step        2,048 (8 × max_length 256)", "packing                bfd",
                 "loss                   assistant tokens only", "dtype                  float32"):
        assert line in out
    assert "template               smollm3 (sha256 " in out and "resolved recipe:" in out
    # the 8 rows of the one source, each within the first 32 the data check renders
    assert "data check             8 row(s) of 1 source(s) rendered and tokenized (first 32 + 32 seeded" in out
    assert not out_dir.exists()


def test_recipes_list_show_validate(cli, recipe_factory):
    code, out, _ = cli("recipes", "list")
    assert code == 0 and "quickstart/sft" in out and "smollm3/sft" in out
    code, out, _ = cli("recipes", "show", "quickstart/sft", "--set", "train.max_steps=3")
    assert code == 0 and "max_steps: 3" in out
    code, out, _ = cli("recipes", "validate", recipe_factory())
    assert code == 0 and out.strip().endswith(": ok")
    code, _, err = cli("recipes", "validate", recipe_factory(train__max_lenght=5))
    assert_one_line_error(code, err, "did you mean max_length?")


def test_template_render_command(cli, tmp_path):
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps([{"role": "system", "content": "/no_think"}, {"role": "user", "content": "hi"}]))
    code, out, _ = cli("template", "render", "smollm3", "--messages", messages, "--generation-prompt")
    assert code == 0 and out.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n")
    code, out, _ = cli("template", "render", "chatml", "--messages", messages)
    assert code == 0 and out == "<|im_start|>system\n/no_think<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    code, _, err = cli("template", "render", "chatml", "--messages", messages, "--kwargs", '{"x": 1}')
    assert_one_line_error(code, err, "--kwargs.x", "never reads")
    code, _, err = cli("template", "render", "chatml", "--messages", tmp_path / "none.json")
    assert_one_line_error(code, err, "none.json", "no such file")
    code, _, err = cli("template", "render", "chatml", "--messages", messages, "--kwargs", "{bad")
    assert_one_line_error(code, err, "--kwargs", "invalid JSON")


def test_rewards_test_prints_each_score_and_its_time(cli, tmp_path):
    rows = [{"completion": r"The answer is \frac{1}{2}.", "solution": "0.5"},
            {"completion": [{"role": "assistant", "content": "<think>\nmaybe 3\n</think>\nIt is 4."}], "solution": "3"},
            {"completion": "It is 5.", "solution": "a moose"}]
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = cli("rewards", "test", "math_accuracy", "--completions", path)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["#0", "1"] and lines[1].split()[:2] == ["#1", "0"]
    assert "None (skipped)" in lines[2] and " ms " in lines[0]
    assert "mean 0.5 over 2 scored, 1 None" in lines[3]
    code, out, err = cli("rewards", "test", "math_accuracy", "--completions", path, "--params", '{"gold_column": "x"}')
    assert code == 2 and "reads the column 'x'" in err


def test_a_key_written_twice_is_refused_naming_its_line(cli, tmp_path):
    recipe = tmp_path / "twice.yaml"
    recipe.write_text("extends: quickstart/sft\ntrain:\n  learning_rate: 1.0e-5\n  max_steps: 4\n  learning_rate: 1.0\n")
    code, _, err = cli("sft", recipe, "--dry-run")
    assert code == 2 and "Traceback" not in err
    assert "twice.yaml line 5" in err and "duplicate key 'learning_rate'" in err


def test_a_merge_key_override_is_not_a_duplicate():
    from smolalign.recipe.yamlio import load_yaml

    assert load_yaml("base: &b {lr: 1, steps: 2}\ntrain:\n  <<: *b\n  lr: 3\n")["train"] == {"lr": 3, "steps": 2}


@pytest.mark.parametrize("weight", [".nan", ".inf", "-.inf", "0"])
def test_a_source_weight_must_be_positive_and_finite(cli, tmp_path, weight):
    recipe = tmp_path / "weight.yaml"
    recipe.write_text(f"extends: quickstart/sft\ndata:\n  sources:\n    - path: data.jsonl\n      weight: {weight}\n")
    (tmp_path / "data.jsonl").write_text('{"messages": [{"role": "user", "content": "1+1?"}, '
                                         '{"role": "assistant", "content": "2"}]}\n')
    code, _, err = cli("sft", recipe, "--dry-run")
    assert code == 2 and "weight must be a positive finite number" in err and "Traceback" not in err


def test_eval_data_may_name_a_file_shipped_with_the_recipes(tmp_path, monkeypatch):
    """The documented `--data quickstart/data/arithmetic_eval.jsonl` runs from any folder; a file there wins."""
    from paths import REPO

    from smolalign.cli.evaluate import data_source

    monkeypatch.chdir(tmp_path)
    name = "quickstart/data/arithmetic_eval.jsonl"
    assert data_source(name, "train").path == str(REPO / "recipes" / name)
    assert data_source("quickstart/data/nothing.jsonl", "train").path == "quickstart/data/nothing.jsonl"
    (tmp_path / "quickstart" / "data").mkdir(parents=True)
    (tmp_path / name).write_text('{"prompt": "1+1?", "solution": "2"}\n')
    assert data_source(name, "train").path == name
