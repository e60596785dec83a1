"""`smolalign convert` end to end, and a nanotron run folder as a recipe's model.source: validated (a tokenizer is
required), converted once into the cache, reused while unchanged, converted again once rewritten."""

import json
from pathlib import Path

import pytest
import torch
from nanotron_writer import write_nanotron
from tiny_models import chat_rows, write_jsonl


@pytest.fixture(scope="module")
def nanotron_run(tiny_dir, tmp_path_factory):
    """The tiny Llama saved by nanotron with TP 2 (vocabulary padded), and the model itself."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    run = tmp_path_factory.mktemp("pretrain") / "tiny-run"
    write_nanotron(model, run, tp=2, step=500, pad_vocab_to=48)
    return run, model


def test_convert_command(cli, nanotron_run, tiny_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    run, model = nanotron_run
    code, out, err = cli("convert", run, tmp_path / "hf", "--tokenizer", tiny_dir)
    assert code == 0, err
    assert f"format: nanotron ({run / '500'})" in out
    assert "layout: nanotron 1.5, TP 2, PP 1" in out
    assert "model: LlamaForCausalLM, 20 tensors" in out and "note: latest.txt -> step 500" in out
    assert "vocabulary trimmed from 576 padded rows to the tokenizer's 512" in out and "wrote " in out
    converted = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    ids = torch.arange(12).reshape(1, 12)
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, converted(input_ids=ids).logits)
    code, _, err = cli("convert", run, tmp_path / "hf", "--tokenizer", tiny_dir)
    assert code == 2 and "exists and is not empty; pass --overwrite" in err
    code, _, err = cli("convert", run, tmp_path / "hf", "--tokenizer", tiny_dir, "--overwrite", "--dtype", "bfloat16")
    assert code == 0, err
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["dtype"] == "bfloat16"
    code, _, err = cli("convert", run, tmp_path / "x", "--dtype", "int4")
    assert code == 2 and "--dtype must be one of float32, bfloat16, float16" in err
    (tmp_path / "megatron").mkdir()
    (tmp_path / "megatron" / "latest_checkpointed_iteration.txt").write_text("1000")
    code, _, err = cli("convert", tmp_path / "megatron", tmp_path / "y")
    assert code == 2 and "Megatron-Bridge" in err and "Traceback" not in err
    code, _, err = cli("convert", tiny_dir, tmp_path / "z")
    assert code == 2 and "already a transformers directory" in err


def sft_recipe(write_recipe, tmp_path, model: dict) -> str:
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    return str(write_recipe({
        "model": model, "template": {"name": "chatml"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 128, "max_steps": 1, "per_device_train_batch_size": 2, "save_strategy": "no",
                  "gradient_checkpointing": False}}))


def test_a_converted_model_is_readable_as_created(cli, nanotron_run, tiny_dir, tmp_path, umask):
    """Built in a private staging folder (mkdtemp: 0700) and written by safetensors (0600), the converted model gets
    the modes `mkdir` and `open` give under the umask, so teammates can use it."""
    code, _, err = cli("convert", nanotron_run[0], tmp_path / "hf", "--tokenizer", tiny_dir)
    assert code == 0, err
    assert (tmp_path / "hf").stat().st_mode & 0o777 == 0o777 & ~umask
    files = [p for p in (tmp_path / "hf").iterdir() if p.is_file()]
    assert files and {p.name: p.stat().st_mode & 0o777 for p in files} == dict.fromkeys((p.name for p in files),
                                                                                        0o666 & ~umask)


def test_checkpoint_as_model_source(cli, write_recipe, nanotron_run, tiny_dir, tmp_path, monkeypatch):
    from smolalign.models.sources import cache_root

    # a cache of its own: another test of this module may have converted the same checkpoint into the session's
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "cache"))
    run, _ = nanotron_run
    code, _, err = cli("sft", sft_recipe(write_recipe, tmp_path, {"source": str(run)}), "--dry-run")
    assert code == 2 and "is a nanotron checkpoint with no tokenizer of its own: set model.tokenizer" in err
    code, _, err = cli("sft", sft_recipe(write_recipe, tmp_path, {"source": str(tiny_dir), "tokenizer": str(tiny_dir)}),
                       "--dry-run")
    assert code == 2 and "model.tokenizer is for pretraining checkpoints" in err

    recipe = sft_recipe(write_recipe, tmp_path, {"source": str(run), "tokenizer": str(tiny_dir)})
    code, out, err = cli("sft", recipe, "-o", tmp_path / "a")
    assert code == 0, err
    assert out.count("converting ") == 1 and "(once)" in out
    converted = sorted((cache_root() / "models").glob("tiny-run-500-*"))
    assert len(converted) == 1 and (converted[0] / "tokenizer.json").is_file()
    code, out, err = cli("sft", recipe, "-o", tmp_path / "b")
    assert code == 0, err
    assert "converting " not in out and (tmp_path / "b" / "model" / "config.json").is_file()


def test_data_preview_json_holds_the_rows_alone_when_the_model_is_converted(cli, write_recipe, nanotron_run, tiny_dir,
                                                                           tmp_path, monkeypatch):
    """`data preview --json` is read by programs: the one-off conversion's words go to standard error."""
    monkeypatch.setenv("SMOLALIGN_CACHE", str(tmp_path / "cache"))
    recipe = sft_recipe(write_recipe, tmp_path, {"source": str(nanotron_run[0]), "tokenizer": str(tiny_dir)})
    code, out, err = cli("data", "preview", recipe, "--json", "-n", "2")
    assert code == 0, err
    assert "converting " in err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and all(row["input_ids"] for row in rows)


def test_rewritten_checkpoint_is_converted_again(tiny_dir, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    from smolalign.models.load import local_dir
    from smolalign.models.sources import resolve_source

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    run = tmp_path / "run"
    write_nanotron(model, run, tp=1, step=7)
    source = resolve_source(str(run), tokenizer=str(tiny_dir))
    first = local_dir(source)
    assert local_dir(source) == first and capsys.readouterr().out.count("converting") == 1
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    write_nanotron(model, run, tp=1, step=7)  # the same step saved again, other weights
    second = local_dir(source)
    assert second != first and "converting" in capsys.readouterr().out
    reloaded = AutoModelForCausalLM.from_pretrained(second)
    assert torch.equal(reloaded.model.norm.weight, model.model.norm.weight)


def test_a_slurm_vllm_node_serves_the_converted_checkpoint(write_recipe, nanotron_run, tiny_dir, tmp_path):
    """vLLM cannot read nanotron shards: the server node is given the converted directory the stage trains from."""
    import dataclasses

    from recipe_runs import loaded_run

    from smolalign.generation.server_command import serve_options
    from smolalign.models.load import local_dir
    from smolalign.models.sources import resolve_model
    from smolalign.recipe.generation_schema import GenerationSection

    run, _ = nanotron_run
    loaded = loaded_run(sft_recipe(write_recipe, tmp_path, {"source": str(run), "tokenizer": str(tiny_dir)}), [], "sft")
    loaded = dataclasses.replace(loaded, recipe=dataclasses.replace(loaded.recipe,
                                                                    generation=GenerationSection(backend="vllm_server")))
    served = serve_options(loaded, host="0.0.0.0", port=8000)["model"]
    assert served == local_dir(resolve_model(loaded.recipe.model))  # the cache entry the stage trains from
    assert (Path(served) / "config.json").is_file() and not (Path(served) / "checkpoint_metadata.json").exists()


def test_a_lora_adapter_is_merged_by_convert_and_refused_as_a_model(cli, write_recipe, tiny_dir, tmp_path):
    """A QLoRA run's model/ is its adapter: as a model.source it was read as the base with the adapter injected, and
    TRL's new adapter of the same name then started from zero (the SFT adapter thrown away). It is refused, naming
    the command that merges it; `smolalign convert` merges it into its base, and the result trains."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    adapter = tmp_path / "adapter"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_dir), LoraConfig(r=4, target_modules=["q_proj"]))
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "lora_B") and "default" in getattr(module, "lora_B", {}):
                module.lora_B["default"].weight.normal_(0, 0.5)
    model.save_pretrained(adapter)
    words = AutoTokenizer.from_pretrained(tiny_dir)
    words.eos_token = "<|im_start|>"  # a run's tokenizer may end turns with another token than its base's config
    words.save_pretrained(adapter)

    code, _, err = cli("sft", sft_recipe(write_recipe, tmp_path, {"source": str(adapter)}), "--dry-run")
    assert code == 2 and f"model.source {adapter} is a LoRA adapter (over {tiny_dir}), not a whole model: merge it " \
                          f"into its base once with `smolalign convert {adapter} DIR`" in err, err

    code, out, err = cli("convert", adapter, tmp_path / "merged")
    assert code == 0, err
    assert f"format: LoRA adapter ({adapter}) over {tiny_dir}" in out
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    with torch.no_grad():
        trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), adapter).eval()(ids).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()(ids).logits
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()(ids).logits
    assert (trained - base).abs().max() > 0.03  # the adapter changes the model
    assert torch.allclose(merged, trained, atol=1e-4)
    eos = words.convert_tokens_to_ids("<|im_start|>")
    saved = {name: json.loads((tmp_path / "merged" / name).read_text())["eos_token_id"]
             for name in ("config.json", "generation_config.json")}
    assert saved == {"config.json": eos, "generation_config.json": eos}  # generation stops at the tokenizer's EOS
    code, _, err = cli("sft", sft_recipe(write_recipe, tmp_path, {"source": str(tmp_path / "merged")}), "--dry-run")
    assert code == 0, err


def test_a_reward_models_adapter_is_merged_with_its_one_score_head(cli, tiny_dir, tmp_path):
    """A LoRA reward model's adapter (SEQ_CLS: the score head saved whole beside the adapters) merges into a
    classifier with one label, scoring as the adapted model does."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    words = AutoTokenizer.from_pretrained(tiny_dir)

    def classifier():
        return AutoModelForSequenceClassification.from_pretrained(tiny_dir, num_labels=1,
                                                                  pad_token_id=words.pad_token_id)

    model = get_peft_model(classifier(), LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["q_proj"]))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name or "modules_to_save" in name:
                parameter.normal_(0, 0.5)
    adapter = tmp_path / "reward-adapter"
    model.save_pretrained(adapter)
    words.save_pretrained(adapter)
    code, out, err = cli("convert", adapter, tmp_path / "merged")
    assert code == 0, err
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    with torch.no_grad():
        adapted = PeftModel.from_pretrained(classifier(), adapter).eval()(ids).logits
        merged = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged").eval()(ids).logits
    assert merged.shape == (1, 1) and torch.allclose(merged, adapted, atol=1e-4)
