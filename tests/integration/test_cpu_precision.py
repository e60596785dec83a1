"""Precision chosen from the CPU, observed in real runs (the capability read forced with SMOLALIGN_CPU_BF16; bf16 is
emulated where the CPU lacks it, so both kinds run here): on a bf16 CPU, training computes under bf16 autocast over
float32 weights, saved in float32, and generation (eval, chat) loads bfloat16 weights; on a CPU without bf16, and
with `model.dtype: float32` anywhere, every part computes in float32."""

import json
import shutil

import pytest
import torch
from paths import REPO
from safetensors import safe_open
from tiny_models import chat_rows, write_jsonl

from smolalign.hardware import CPU_AUTOCAST_ATTENTION, CPU_BF16_VARIABLE


@pytest.fixture
def forward_dtypes(monkeypatch):
    """The dtype of the first attention projection's output at every forward of a model smolalign loads to train or
    to generate, and the dtype its weights were loaded in."""
    import smolalign.chat
    import smolalign.pairs.backends
    import smolalign.stages.sft

    seen = {"outputs": set(), "weights": set(), "attention": set()}

    def recording(original):
        def load(*args, **kwargs):
            model = original(*args, **kwargs)
            projection = model.model.layers[0].self_attn.q_proj
            seen["weights"].add(projection.weight.dtype)
            seen["attention"].add(model.config._attn_implementation)
            projection.register_forward_hook(lambda module, inputs, output: seen["outputs"].add(output.dtype))
            return model
        return load

    for module in (smolalign.stages.sft, smolalign.chat, smolalign.pairs.backends):
        monkeypatch.setattr(module, "load_model", recording(module.load_model))
    return seen


def two_step_sft(write_recipe, folder, model: dict):
    """A recipe of two SFT steps of `model` (a model section) on eight chats, a checkpoint at the second."""
    data = write_jsonl(folder / "chat.jsonl", chat_rows(8))
    return write_recipe({"model": model, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
                         "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2,
                                   "learning_rate": 1e-3, "logging_steps": 1, "save_steps": 2,
                                   "gradient_checkpointing": False}})


def saved_dtypes(model_dir) -> set:
    with safe_open(str(model_dir / "model.safetensors"), "pt") as weights:
        return {weights.get_slice(name).get_dtype() for name in weights.keys()}


@pytest.mark.parametrize(("cpu_bf16", "dtype", "computes"), [
    ("1", "auto", torch.bfloat16), ("0", "auto", torch.float32), ("1", "float32", torch.float32)])
def test_sft_computes_in_the_precision_the_cpu_decides_and_saves_float32(
        cli, write_recipe, tiny_dir, tmp_path, monkeypatch, forward_dtypes, cpu_bf16, dtype, computes):
    monkeypatch.setenv(CPU_BF16_VARIABLE, cpu_bf16)
    recipe = two_step_sft(write_recipe, tmp_path, {"source": str(tiny_dir), "dtype": dtype})
    code, out, err = cli("sft", recipe, "--dry-run")
    assert code == 0, err
    expected_row = ("float32 weights, bf16 autocast" if computes == torch.bfloat16 else "float32 for training")
    assert expected_row in out
    code, _, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert forward_dtypes["weights"] == {torch.float32}  # master weights: AdamW's small updates are not rounded away
    assert forward_dtypes["outputs"] == {computes}
    # Under CPU autocast smolalign's attention (eager for short sequences, SDPA for long); transformers' default otherwise.
    assert forward_dtypes["attention"] == {CPU_AUTOCAST_ATTENTION if computes == torch.bfloat16 else "sdpa"}
    assert saved_dtypes(tmp_path / "run" / "model") == {"F32"}
    losses = [json.loads(line)["loss"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
              if "loss" in json.loads(line)]
    assert len(losses) == 2 and all(loss == loss for loss in losses)  # finite: not NaN


@pytest.mark.parametrize(("cpu_bf16", "generates"), [("1", torch.bfloat16), ("0", torch.float32)])
def test_eval_and_chat_generate_in_the_precision_the_cpu_decides(cli, tiny_dir, tmp_path, monkeypatch, forward_dtypes,
                                                                  cpu_bf16, generates):
    monkeypatch.setenv(CPU_BF16_VARIABLE, cpu_bf16)
    data = write_jsonl(tmp_path / "q.jsonl", [{"prompt": f"what is {i} plus {i}", "solution": str(2 * i)}
                                              for i in range(2)])
    code, _, err = cli("eval", tiny_dir, "--data", data, "--reward", "math_accuracy", "--max-new-tokens", "4",
                       "--template", "smollm3",
                       "--modes", "no_think", "--json", tmp_path / "eval.json")
    assert code == 0, err
    assert forward_dtypes["weights"] == {generates} and forward_dtypes["outputs"] == {generates}
    rows = (tmp_path / "eval.samples.jsonl").read_text().splitlines()
    assert len(rows) == 2 and all(json.loads(r)["tokens"] >= 1 for r in rows)
    forward_dtypes["weights"].clear(), forward_dtypes["outputs"].clear()
    hybrid = tmp_path / "hybrid"  # chat uses the model's own template
    shutil.copytree(tiny_dir, hybrid)
    shutil.copy(REPO / "chat_templates" / "smollm3.jinja", hybrid / "chat_template.jinja")
    code, _, err = cli("chat", hybrid, "--message", "hello", "--no-think", "--max-new-tokens", "4")
    assert code == 0, err
    assert forward_dtypes["weights"] == {generates} and forward_dtypes["outputs"] == {generates}


@pytest.mark.parametrize(("cpu_bf16", "computes"), [("1", torch.bfloat16), ("0", torch.float32)])
def test_distillation_trains_the_student_in_the_precision_the_cpu_decides(cli, write_recipe, tiny_dir, tmp_path,
                                                                          monkeypatch, cpu_bf16, computes):
    """TRL's DistillationTrainer computes its loss through a forward redirection that sets aside the forward accelerate
    wrapped in autocast: the student's trained forward (the one with gradients) must still compute in bf16."""
    import smolalign.stages.distill

    monkeypatch.setenv(CPU_BF16_VARIABLE, cpu_bf16)
    loaded, original = [], smolalign.stages.distill.load_model
    trained_outputs = set()

    def record(module, inputs, output):
        if torch.is_grad_enabled():  # the loss's forward; generation and the teacher run without gradients
            trained_outputs.add(output.dtype)

    def load(*args, **kwargs):
        model = original(*args, **kwargs)
        if not loaded:  # the student loads first, then the teacher
            model.model.layers[0].self_attn.q_proj.register_forward_hook(record)
        loaded.append(model)
        return model

    monkeypatch.setattr(smolalign.stages.distill, "load_model", load)
    data = write_jsonl(tmp_path / "distill.jsonl", [{"prompt": f"what is {i} plus {i + 1}", "completion": "yes."}
                                                    for i in range(8)])
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "distill",
                           "teacher": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"per_device_train_batch_size": 4, "max_completion_length": 8, "max_steps": 2,
                                     "learning_rate": 1e-3, "logging_steps": 1, "save_steps": 2,
                                     "gradient_checkpointing": False}})
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert len(loaded) == 2 and trained_outputs == {computes}
    assert saved_dtypes(tmp_path / "run" / "model") == {"F32"}


@pytest.fixture(scope="module")
def wide_dir(tiny_dir, tmp_path_factory):
    """The tiny model's tokenizer and shape at 384 wide: the narrowest width bf16 pays at on a CPU."""
    from tiny_models import build_model
    from transformers import AutoTokenizer

    directory = tmp_path_factory.mktemp("wide")
    build_model(directory, AutoTokenizer.from_pretrained(tiny_dir), hidden=384, heads=6, kv_heads=2)
    return directory


@pytest.fixture
def bf16_cpu(monkeypatch):
    """A CPU that computes bf16 as torch reads it (AMX), SMOLALIGN_CPU_BF16 unset: the width decides."""
    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)


@pytest.mark.parametrize("wide", [False, True], ids=["64 wide", "384 wide"])
def test_on_a_bf16_cpu_a_model_narrower_than_384_trains_and_generates_in_float32(
        cli, write_recipe, tiny_dir, wide_dir, tmp_path, forward_dtypes, bf16_cpu, wide):
    source, computes = (wide_dir, torch.bfloat16) if wide else (tiny_dir, torch.float32)
    recipe = two_step_sft(write_recipe, tmp_path, {"source": str(source)})
    code, out, err = cli("sft", recipe, "--dry-run")
    assert code == 0, err
    assert ("float32 weights, bf16 autocast" if wide else "the model is 64 wide: below 384, float32") in out
    code, _, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert forward_dtypes["weights"] == {torch.float32} and forward_dtypes["outputs"] == {computes}
    assert forward_dtypes["attention"] == {CPU_AUTOCAST_ATTENTION if wide else "sdpa"}
    for seen in forward_dtypes.values():
        seen.clear()
    code, _, err = cli("chat", tmp_path / "run" / "model", "--message", "hello", "--no-think", "--max-new-tokens", "4")
    assert code == 0, err
    assert forward_dtypes["weights"] == {computes} and forward_dtypes["outputs"] == {computes}
