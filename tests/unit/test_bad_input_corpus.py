"""The bad-input corpus: malformed recipes and command-line arguments as users write them, each refused with exit 2
and one line naming the culprit, before anything is written (harness: tests/badinput.py). Data, templates, pairs,
rewards and eval are in the other tests/unit/test_bad_input_*.py files."""

import pytest
from badinput import GOOD_CHAT, GOOD_PROMPT, Case, jsonl, run_refused, sft_recipe, yaml_text

_CHAT = jsonl(GOOD_CHAT)
DRY = ("sft", "{dir}/r.yaml", "--dry-run")


def _train(case_id: str, key: str, value) -> Case:
    """A `train:` value out of its range (or not finite): refused naming the key, before any weight loads."""
    return Case(f"train-{case_id}", DRY, (f"train.{key}",), {"r.yaml": sft_recipe(train={key: value}), "chat.jsonl": _CHAT})


TRAIN_RANGES = [
    _train("lr-negative", "learning_rate", -1e-5),
    _train("lr-nan", "learning_rate", "@@.nan@@"),
    _train("lr-inf", "learning_rate", "@@.inf@@"),
    _train("lr-minus-inf", "learning_rate", "@@-.inf@@"),
    _train("batch-zero", "per_device_train_batch_size", 0),
    _train("batch-negative", "per_device_train_batch_size", -2),
    _train("accumulation-zero", "gradient_accumulation_steps", 0),
    _train("accumulation-negative", "gradient_accumulation_steps", -1),
    _train("save-steps-negative", "save_steps", -1),
    _train("save-steps-zero", "save_steps", 0),
    _train("logging-steps-zero", "logging_steps", 0),
    _train("max-steps-zero", "max_steps", 0),
    _train("max-steps-negative", "max_steps", -5),
    _train("epochs-zero", "num_train_epochs", 0),
    _train("epochs-nan", "num_train_epochs", "@@.nan@@"),
    _train("warmup-negative", "warmup_steps", -1),
    _train("weight-decay-negative", "weight_decay", -0.1),
    _train("grad-norm-negative", "max_grad_norm", -1.0),
    _train("grad-norm-inf", "max_grad_norm", "@@.inf@@"),
    _train("max-length-zero", "max_length", 0),
    _train("adam-beta1-one", "adam_beta1", 1.0),
    _train("adam-beta2-negative", "adam_beta2", -0.1),
    _train("adam-epsilon-zero", "adam_epsilon", 0),
    _train("seed-negative", "seed", -1),
    _train("workers-negative", "dataloader_num_workers", -1),
    _train("save-limit-negative", "save_total_limit", -1),
    _train("num-proc-zero", "dataset_num_proc", 0),
    Case("train-set-lr-negative", (*DRY, "--set", "train.learning_rate=-1"), ("train.learning_rate",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("train-set-batch-zero", (*DRY, "--set", "train.per_device_train_batch_size=0"),
         ("train.per_device_train_batch_size",), {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("train-trl-refuses", DRY, ("train.load_best_model_at_end",),
         {"r.yaml": sft_recipe(train={"eval_strategy": "steps", "load_best_model_at_end": True,
                                      "save_strategy": "epoch"}), "chat.jsonl": _CHAT}),
]

RECIPE_FILES = [
    Case("recipe-unknown-train-key", DRY, ("train.learnin_rate",),
         {"r.yaml": sft_recipe(train={"learnin_rate": 1e-5}), "chat.jsonl": _CHAT}),
    Case("recipe-duplicate-key", DRY, ("r.yaml", "max_steps"),
         {"r.yaml": "model: {source: '{tiny}'}\ntrain:\n  max_steps: 1\n  max_steps: 2\n", "chat.jsonl": _CHAT}),
    Case("recipe-binary", DRY, ("r.yaml", "UTF-8"), {"r.yaml": b"\x00\xff\xfe\x01model\x89PNG"}),
    Case("recipe-latin1", DRY, ("r.yaml", "UTF-8"), {"r.yaml": "description: caf\xe9\n".encode("latin-1")}),
    Case("recipe-utf16", DRY, ("r.yaml",), {"r.yaml": "model: {source: x}\n".encode("utf-16")}),
    Case("recipe-nul-byte", DRY, ("r.yaml",), {"r.yaml": "model:\x00 {source: x}\n"}),
    Case("recipe-bad-yaml", DRY, ("r.yaml", "line"), {"r.yaml": "model: {source: x\ntrain: [\n"}),
    Case("recipe-tab-indent", DRY, ("r.yaml",), {"r.yaml": "model:\n\tsource: x\n"}),
    Case("recipe-list", DRY, ("r.yaml", "mapping"), {"r.yaml": "- model\n- data\n"}),
    Case("recipe-scalar", DRY, ("r.yaml", "mapping"), {"r.yaml": "just words\n"}),
    Case("recipe-unknown-section", DRY, ("trainer",), {"r.yaml": sft_recipe(trainer={"x": 1}), "chat.jsonl": _CHAT}),
    Case("recipe-train-not-mapping", DRY, ("train",), {"r.yaml": sft_recipe(train=5), "chat.jsonl": _CHAT}),
    Case("recipe-no-model", DRY, ("model",), {"r.yaml": sft_recipe(model=None), "chat.jsonl": _CHAT}),
    Case("recipe-no-data", DRY, ("data",), {"r.yaml": sft_recipe(data=None)}),
    Case("recipe-model-missing-dir", DRY, ("{dir}/nowhere",),
         {"r.yaml": sft_recipe(model={"source": "{dir}/nowhere"}), "chat.jsonl": _CHAT}),
    Case("recipe-wrong-stage", DRY, ("smolalign po",), {"r.yaml": sft_recipe(stage="po"), "chat.jsonl": _CHAT}),
    Case("recipe-extends-missing", DRY, ("no_such_parent",),
         {"r.yaml": "extends: no_such_parent.yaml\n", "chat.jsonl": _CHAT}),
    Case("recipe-extends-cycle", DRY, ("extends itself",),
         {"r.yaml": "extends: s.yaml\n", "s.yaml": "extends: r.yaml\n"}),
    Case("recipe-extends-number", DRY, ("extends",), {"r.yaml": "extends: 5\n"}),
    Case("recipe-weight-nan", DRY, ("weight",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.jsonl", "weight": "@@.nan@@"}]}),
          "chat.jsonl": _CHAT}),
    Case("recipe-weight-inf", DRY, ("weight",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.jsonl", "weight": "@@.inf@@"}]}),
          "chat.jsonl": _CHAT}),
    Case("recipe-weight-negative", DRY, ("weight",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.jsonl", "weight": -1}]}), "chat.jsonl": _CHAT}),
    Case("recipe-sources-not-list", DRY, ("data.sources",),
         {"r.yaml": sft_recipe(data={"sources": "{dir}/chat.jsonl"}), "chat.jsonl": _CHAT}),
    Case("recipe-eval-split-too-large", DRY, ("data.eval_split",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/chat.jsonl"}], "eval_split": 5}),
          "chat.jsonl": _CHAT}),
    Case("recipe-packing-unknown", DRY, ("train.packing",),
         {"r.yaml": sft_recipe(train={"packing": "tight"}), "chat.jsonl": _CHAT}),
    Case("recipe-packing-no-length", DRY, ("train.max_length",),
         {"r.yaml": sft_recipe(train={"packing": "bfd", "max_length": None}), "chat.jsonl": _CHAT}),
    Case("recipe-owned-template-key", DRY, ("train.chat_template_path",),
         {"r.yaml": sft_recipe(train={"chat_template_path": "t.jinja"}), "chat.jsonl": _CHAT}),
    Case("recipe-learning-rate-string", DRY, ("train.learning_rate",),
         {"r.yaml": sft_recipe(train={"learning_rate": "fast"}), "chat.jsonl": _CHAT}),
    Case("recipe-quantization-without-peft", DRY, ("model.quantization",),
         {"r.yaml": sft_recipe(model={"source": "{tiny}", "quantization": "4bit"}), "chat.jsonl": _CHAT}),
    Case("recipe-unknown-peft-key", DRY, ("peft.rank",),
         {"r.yaml": sft_recipe(peft={"rank": 8}), "chat.jsonl": _CHAT}),
    Case("recipe-global-batch-indivisible", DRY, ("launch.global_batch_size",),
         {"r.yaml": sft_recipe(launch={"global_batch_size": 3}), "chat.jsonl": _CHAT}),
    Case("data-missing-file", DRY, ("{dir}/missing.jsonl",),
         {"r.yaml": sft_recipe(data={"sources": [{"path": "{dir}/missing.jsonl"}]})}),
    Case("recipe-hub-id-offline", DRY, ("models/not_here", "HF_HUB_OFFLINE"),
         {"r.yaml": sft_recipe(model={"source": "models/not_here"}), "chat.jsonl": _CHAT}),
]

CLI_ARGUMENTS = [
    Case("set-double-dot", (*DRY, "--set", "a..b=1"), ("a..b",), {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-leading-dot", (*DRY, "--set", ".train=1"), (".train",), {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-trailing-dot", (*DRY, "--set", "train.=1"), ("train.",), {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-no-key", (*DRY, "--set", "=1"), ("--set",), {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-no-equals", (*DRY, "--set", "train.max_steps"), ("train.max_steps",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-bad-index", (*DRY, "--set", "data.sources.7.weight=2"), ("data.sources.7",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-through-scalar", (*DRY, "--set", "train.max_steps.x=2"), ("train.max_steps",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("set-bad-yaml-value", (*DRY, "--set", "train.max_steps=[1"), ("--set value",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("sft-missing-recipe", ("sft",), ("recipe",)),
    Case("sft-unknown-option", ("sft", "{dir}/r.yaml", "--bogus"), ("--bogus",)),
    Case("sft-no-such-recipe", ("sft", "{dir}/none.yaml", "--dry-run"), ("none.yaml",)),
    Case("sft-num-processes-text", ("sft", "{dir}/r.yaml", "--num-processes", "two"), ("--num-processes",)),
    Case("unknown-command", ("trian", "x"), ("trian",)),
    *(Case(f"{verb}-resume-and-overwrite{'-dry-run' if dry else ''}",
           (verb, "{dir}/r.yaml", *(("--dry-run",) if dry else ()), "--resume", "--overwrite"),
           ("--resume", "--overwrite"), {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT})
      for verb in ("sft", "po", "rl") for dry in (True, False)),
    Case("sweep-resume-and-overwrite", ("sweep", "{dir}/r.yaml", "--grid", "train.learning_rate=1e-4,2e-4",
                                        "--dry-run", "--resume", "--overwrite"), ("--resume", "--overwrite"),
         {"r.yaml": sft_recipe(eval={"data": [{"path": "{dir}/eval.jsonl"}], "rewards": [{"name": "math_accuracy"}]}),
          "chat.jsonl": _CHAT, "eval.jsonl": jsonl(GOOD_PROMPT)}),
    Case("preview-negative", ("data", "preview", "{dir}/r.yaml", "-n", "-1"), ("-n",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("preview-zero", ("data", "preview", "{dir}/r.yaml", "-n", "0"), ("-n",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("preview-not-a-number", ("data", "preview", "{dir}/r.yaml", "-n", "lots"), ("-n",)),
    Case("template-render-no-messages", ("template", "render", "smollm3"), ("--messages",)),
    Case("po-pairs-no-recipe", ("po", "pairs"), ("po pairs RECIPE",)),
    Case("po-extra-argument", ("po", "{dir}/r.yaml", "extra"), ("extra",)),
    Case("slurm-no-nodes", ("launch", "slurm", "{dir}/r.yaml"), ("--nodes",)),
    Case("slurm-sbatch-bare-qos", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "2", "--sbatch", "qos",
                                   "--skip-data", "--script", "{dir}/job.sbatch"), ("--sbatch qos",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("slurm-sbatch-bare-mem", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "2", "--sbatch", "mem",
                                   "--skip-data", "--script", "{dir}/job.sbatch"), ("--sbatch mem",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("slurm-sbatch-space", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "2", "--sbatch", "qos=a b",
                                "--skip-data", "--script", "{dir}/job.sbatch"), ("qos=a b",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("slurm-sbatch-no-value", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "2", "--sbatch"), ("--sbatch",)),
    Case("slurm-bad-rows", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "1", "--script", "{dir}/job.sbatch"),
         ("{dir}/chat.jsonl#0", "messages.0.content"),
         {"r.yaml": sft_recipe(), "chat.jsonl": jsonl({"messages": [{"role": "user", "content": 5},
                                                                    {"role": "assistant", "content": "x"}]})}),
    Case("template-render-not-utf8", ("template", "render", "smollm3", "--messages", "{dir}/bin.json"),
         ("--messages", "not UTF-8"), {"bin.json": b"\xff\xfe"}),
    Case("template-render-folder", ("template", "render", "smollm3", "--messages", "{dir}/d"),
         ("--messages", "a folder"), {"d/x.json": "[]"}),
    Case("chat-max-new-tokens-zero", ("chat", "{tiny}", "--message", "hi", "--max-new-tokens", "0"),
         ("--max-new-tokens",)),
    Case("plot-unwritable-suffix", ("plot", "{dir}/run", "-o", "{dir}/p.txt"), ("-o", "p.txt", ".png"),
         {"run/metrics.jsonl": '{"step": 1, "loss": 1.0}\n'}),
    Case("plot-onto-a-folder", ("plot", "{dir}/run", "-o", "{dir}/run"), ("-o", "is a folder"),
         {"run/metrics.jsonl": '{"step": 1, "loss": 1.0}\n'}),
    Case("eval-json-onto-a-folder", ("eval", "{tiny}", "--data", "{dir}/eval.jsonl", "--reward", "math_accuracy",
                                     "--json", "{dir}/out"), ("--json", "is a folder"),
         {"eval.jsonl": jsonl(GOOD_PROMPT), "out/keep.txt": ""}),
    Case("eval-chart-unwritable-suffix", ("eval", "{tiny}", "--data", "{dir}/eval.jsonl", "--reward",
                                          "math_accuracy", "--chart", "{dir}/c.txt"), ("--chart", ".txt"),
         {"eval.jsonl": jsonl(GOOD_PROMPT)}),
    Case("recipes-cp-under-a-file", ("recipes", "cp", "quickstart/sft", "{dir}/f.txt/x.yaml"), ("f.txt",),
         {"f.txt": "x"}),
    Case("slurm-log-dir-is-a-file", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "1", "--skip-data", "--script",
                                     "{dir}/job.sbatch", "--log-dir", "{dir}/chat.jsonl"), ("--log-dir",),
         {"r.yaml": sft_recipe(), "chat.jsonl": _CHAT}),
    Case("slurm-lr-negative", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "1", "--script", "{dir}/job.sbatch"),
         ("train.learning_rate",), {"r.yaml": sft_recipe(train={"learning_rate": -1}), "chat.jsonl": _CHAT}),
]

CASES = TRAIN_RANGES + RECIPE_FILES + CLI_ARGUMENTS


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)


def test_yaml_text_writes_bare_specials():
    assert yaml_text({"a": "@@.nan@@"}) == '{"a": .nan}'
