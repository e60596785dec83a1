"""`smolalign sft` end to end on a tiny model: the run directory, the saved model, resume and overwrite, adapters."""

import json
import shutil

import pytest
import torch
from tiny_models import chat_rows, write_jsonl

from smolalign.runs.curves import figure
from smolalign.runs.metrics import read_metrics


@pytest.fixture
def sft_recipe(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))

    def make(**train) -> str:
        settings = {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2, "max_steps": 4,
                    "learning_rate": 5e-3, "logging_steps": 1, "save_steps": 2, "gradient_checkpointing": False,
                    **train}
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                                 "data": {"sources": [{"path": str(data)}], "eval_split": 2}, "train": settings}))

    return make


def test_sft_writes_a_complete_run_directory(cli, sft_recipe, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    run_dir = tmp_path / "run"
    code, out, err = cli("sft", sft_recipe(max_steps=12), "--output-dir", run_dir)
    assert code == 0, err
    assert (run_dir / "recipe.yaml").is_file() and "checkpoint-12" in {p.name for p in run_dir.iterdir()}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["versions"]["trl"] and manifest["versions"]["transformers"]
    assert manifest["hardware"]["accelerator"] == "cpu"
    assert len(manifest["template"]["sha256"]) == 64 and manifest["template"]["name"] == "smollm3"
    assert manifest["data"]["fingerprint"] and manifest["data"]["stats"]["train"]["rows"] == 14
    assert manifest["result"]["global_step"] == 12
    losses = [m["loss"] for m in read_metrics(run_dir) if "loss" in m]
    assert len(losses) == 12 and sum(losses[-3:]) < sum(losses[:3])
    assert "loss " in out and "saved" in out
    # curves.png is a real image, and the figure it was drawn from holds the logged values.
    assert (run_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = {axes.get_title(): {line.get_label(): list(line.get_ydata()) for line in axes.get_lines()}
             for axes in figure([("run", read_metrics(run_dir))]).axes}
    assert drawn["loss"]["loss"] == losses
    assert drawn["learning rate"]["learning_rate"] == [m["learning_rate"] for m in read_metrics(run_dir) if "loss" in m]
    assert len(drawn["grad norm"]["grad_norm"]) == 12

    model_dir = run_dir / "model"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token == "<|im_end|>"
    assert GenerationConfig.from_pretrained(model_dir).eos_token_id in (end_of_turn, [end_of_turn])
    assert tokenizer.chat_template and "{% generation" in tokenizer.chat_template.replace("{%-", "{%")
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "what is 1 plus 2"}], add_generation_prompt=True,
                                           enable_thinking=False, return_tensors="pt", return_dict=True)
    assert tokenizer.decode(prompt["input_ids"][0]).endswith("<|im_start|>assistant\n<think>\n\n</think>\n")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        output = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    assert output.shape[1] > prompt["input_ids"].shape[1]


def test_a_model_whose_eos_is_not_the_end_of_turn_gets_it(cli, write_recipe, tiny_dir, tmp_path):
    """As the bundled SmolLM2's GGUF tokenizer (EOS <|im_start|>): the saved model's tokenizer, config and generation
    config all stop at the template's end of turn, so that the model it serves stops after its answer."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    source = tmp_path / "other-eos"
    shutil.copytree(tiny_dir, source)
    config = json.loads((source / "tokenizer_config.json").read_text())
    (source / "tokenizer_config.json").write_text(json.dumps({**config, "eos_token": "<|endoftext|>"}))
    assert AutoTokenizer.from_pretrained(source).eos_token == "<|endoftext|>"  # control: the source's EOS differs
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    recipe = write_recipe({"model": {"source": str(source)}, "template": {"name": "smollm3"},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 256, "max_steps": 1, "per_device_train_batch_size": 2,
                                     "save_strategy": "no", "gradient_checkpointing": False}})
    code, _, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    model_dir = tmp_path / "run" / "model"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token == "<|im_end|>"
    assert AutoConfig.from_pretrained(model_dir).eos_token_id in (end_of_turn, [end_of_turn])
    assert GenerationConfig.from_pretrained(model_dir).eos_token_id in (end_of_turn, [end_of_turn])


def test_without_matplotlib_the_run_ends_and_says_how_to_get_its_curves(cli, sft_recipe, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    run_dir = tmp_path / "run"
    code, _, err = cli("sft", sft_recipe(max_steps=2), "-o", run_dir)
    assert code == 0, err
    assert (run_dir / "model" / "config.json").is_file() and not (run_dir / "curves.png").exists()
    assert "pip install 'smolalign[plot]'" in err and f"smolalign plot {run_dir}" in err


def test_non_empty_run_dir_needs_resume_or_overwrite(cli, sft_recipe, tmp_path):
    run_dir = tmp_path / "run"
    recipe = sft_recipe()
    assert cli("sft", recipe, "-o", run_dir)[0] == 0
    code, _, err = cli("sft", recipe, "-o", run_dir)
    assert code == 2 and "is not empty: pass --resume" in err
    code, out, err = cli("sft", recipe, "-o", run_dir, "--resume", "--set", "train.max_steps=6")
    assert code == 0, err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["result"]["global_step"] == 6 and manifest["result"]["resumed_from"].endswith("checkpoint-4")
    assert (run_dir / "recipe.yaml.previous").is_file()
    steps = [m["step"] for m in read_metrics(run_dir) if "loss" in m]
    assert steps == [1, 2, 3, 4, 5, 6]  # steps 5 and 6 continue the run, nothing is repeated
    code, _, err = cli("sft", recipe, "-o", run_dir, "--overwrite")
    assert code == 0, err
    assert not (run_dir / "recipe.yaml.previous").exists()
    # A requeued cluster job passes --resume before its first checkpoint too: it starts from the beginning.
    code, _, err = cli("sft", recipe, "-o", tmp_path / "fresh", "--resume")
    assert code == 0 and "no checkpoint in" in err and "starting from the beginning" in err
    assert json.loads((tmp_path / "fresh" / "manifest.json").read_text())["result"]["resumed_from"] is None


def test_lora_run_saves_a_merged_model(cli, sft_recipe, tmp_path, write_recipe, tiny_dir):
    from transformers import AutoModelForCausalLM

    recipe = sft_recipe(learning_rate=1e-2)
    raw = __import__("yaml").safe_load(open(recipe))
    raw["peft"] = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    recipe = write_recipe(raw, "lora.yaml")
    code, _, err = cli("sft", recipe, "-o", tmp_path / "lora")
    assert code == 0, err
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora" / "model")
    base = AutoModelForCausalLM.from_pretrained(tiny_dir)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not any("lora" in k for k in merged.state_dict())
    assert not torch.equal(merged.state_dict()[name], base.state_dict()[name])
    assert torch.equal(merged.state_dict()["model.layers.0.mlp.up_proj.weight"],
                       base.state_dict()["model.layers.0.mlp.up_proj.weight"])


def test_qlora_run_on_cpu(cli, sft_recipe, tmp_path, write_recipe):
    pytest.importorskip("bitsandbytes")
    raw = __import__("yaml").safe_load(open(sft_recipe(max_steps=2)))
    raw["model"]["quantization"] = "4bit"
    raw["peft"] = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    code, _, err = cli("sft", write_recipe(raw, "qlora.yaml"), "-o", tmp_path / "qlora")
    assert code == 0, err
    assert (tmp_path / "qlora" / "model" / "adapter_config.json").is_file()


def test_same_recipe_and_seed_give_the_same_losses(cli, sft_recipe, tmp_path):
    recipe = sft_recipe(max_steps=3)
    for name in ("a", "b"):
        code, _, err = cli("sft", recipe, "-o", tmp_path / name)
        assert code == 0, err
    losses = [[m["loss"] for m in read_metrics(tmp_path / name) if "loss" in m] for name in ("a", "b")]
    assert losses[0] == losses[1] and len(losses[0]) == 3


def test_a_gpu_recipe_with_flex_attention_trains_on_a_cpu(cli, write_recipe, tiny_dir, tmp_path):
    """The shipped GPU recipes name flex attention, which torch cannot train on a CPU ("FlexAttention does not support
    backward on CPU"): smoke-tested on a CPU, the run trains with the CPU's attention and says so."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"model": {"source": str(tiny_dir), "attn_implementation": "flex_attention"},
                           "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2,
                                     "max_steps": 2, "logging_steps": 1, "gradient_checkpointing": False}})
    code, _, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert "flex_attention runs on a GPU; on this CPU: sdpa" in err
    assert len([m for m in read_metrics(tmp_path / "run") if "loss" in m]) == 2
