"""DeepSpeed ZeRO-3 on two CPU processes (gloo), from the CLI: `--launch zero3 --num-processes 2` shards the model as
it loads, trains to the weights of plain data parallel within 1e-5 (both moved by more than 1e-3), resumes from its
own checkpoint (the checkpoint untouched, only the later steps logged) to weights bit-identical to an uninterrupted
run, and writes a model directory that loads and equals DeepSpeed's own consolidation of the checkpoint. The same for
DPO, whose frozen reference is sharded too. GRPO and distillation, and the perturbed optimizer shards, are in the slow
tier (tests/slow/test_zero3_resume.py).

The recipes pin `model.dtype: float32`: these comparisons are exact to float32 rounding, and on a CPU with bf16 the default
would compute in bf16 (differences of ~2e-3 per token)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from resume_checks import assert_resumed, cut_back
from tiny_models import chat_rows, deepspeed_skip_reason, pair_rows, write_jsonl

pytestmark = [
    pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path (on GPUs accelerate launches DeepSpeed)"),
    pytest.mark.skipif(deepspeed_skip_reason() is not None, reason=str(deepspeed_skip_reason())),
]


def smolalign(*args) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "smolalign", *map(str, args)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def weights(directory: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(directory.glob("*.safetensors"))
    return {k: v for f in files for k, v in load_file(f).items()}


def assert_same(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst <= atol, worst


@pytest.fixture(scope="module")
def recipes(tiny_dir, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("zero3")
    common = {"per_device_train_batch_size": 2, "max_steps": 4, "learning_rate": 5e-3, "logging_steps": 1,
              "save_steps": 2, "gradient_checkpointing": False}
    sft = {"model": {"source": str(tiny_dir), "dtype": "float32"}, "template": {"name": "smollm3"},
           "data": {"sources": [{"path": str(write_jsonl(folder / "chat.jsonl", chat_rows(32)))}]},
           "train": {"max_length": 256, "packing": "bfd", **common}}
    dpo = {"model": {"source": str(tiny_dir), "dtype": "float32"}, "template": {"name": "chatml"}, "method": "dpo",
           "data": {"sources": [{"path": str(write_jsonl(folder / "pairs.jsonl", pair_rows(32)))}]},
           "train": {"max_length": 160, "beta": 0.1, **common}}
    for name, recipe in (("sft", sft), ("dpo", dpo)):
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(recipe))
    return {"sft": folder / "sft.yaml", "dpo": folder / "dpo.yaml", "folder": folder}


@pytest.fixture(scope="module")
def sft_runs(recipes) -> dict:
    folder = recipes["folder"]
    zero3 = smolalign("sft", recipes["sft"], "-o", folder / "sft-zero3", "--launch", "zero3", "--num-processes", 2)
    smolalign("sft", recipes["sft"], "-o", folder / "sft-ddp", "--launch", "ddp", "--num-processes", 2)
    cut = cut_back(folder / "sft-zero3", folder / "sft-resumed")
    smolalign("sft", recipes["sft"], "-o", folder / "sft-resumed", "--resume", "--launch", "zero3",
              "--num-processes", 2)
    return {"log": zero3.stdout, "dir": folder, "cut": cut}


@pytest.fixture(scope="module")
def dpo_runs(recipes) -> dict:
    folder = recipes["folder"]
    done = smolalign("po", recipes["dpo"], "-o", folder / "dpo-zero3", "--launch", "zero3", "--num-processes", 2)
    cut = cut_back(folder / "dpo-zero3", folder / "dpo-resumed")
    smolalign("po", recipes["dpo"], "-o", folder / "dpo-resumed", "--resume", "--launch", "zero3",
              "--num-processes", 2)
    return {"log": done.stdout, "dir": folder, "cut": cut}


def test_zero3_shards_the_model_as_it_loads(sft_runs):
    log = sft_runs["log"]
    assert log.count("sharding               DeepSpeed ZeRO-3") == 2  # both ranks planned it
    for rank in (0, 1):  # 2-layer tiny Llama: 106,816 parameters, half on each process, none whole anywhere
        assert f"rank {rank}: llama sharded as it loaded (ZeRO-3): this process holds 53,408 of 106,816" in log


def largest_change(a: dict, b: dict) -> float:
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def test_zero3_trains_to_the_weights_of_plain_data_parallel(sft_runs, tiny_dir):
    folder = sft_runs["dir"]
    assert json.loads((folder / "sft-zero3" / "manifest.json").read_text())["result"]["global_step"] == 4
    zero3, ddp, start = weights(folder / "sft-zero3" / "model"), weights(folder / "sft-ddp" / "model"), weights(tiny_dir)
    # Both trained: two runs that train nothing would agree too.
    assert largest_change(zero3, start) > 1e-3 and largest_change(ddp, start) > 1e-3
    # Same global batch, same data order: sharded optimizer steps must land where replicated ones do.
    # Not bit-identical: ZeRO-3 reduces gradients in another order (3.8e-6 measured).
    assert_same(zero3, ddp, atol=1e-5)


def test_zero3_resumes_from_its_checkpoint(sft_runs):
    """The checkpoint untouched, only steps 3-4 logged (with the uninterrupted run's losses), its final weights
    bit for bit (tests/resume_checks.py; the slow tier also perturbs the saved optimizer shards)."""
    folder = sft_runs["dir"]
    assert_resumed(folder / "sft-zero3", folder / "sft-resumed", sft_runs["cut"])


def test_zero3_model_directory_loads_and_equals_deepspeeds_consolidation(sft_runs):
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    from transformers import AutoModelForCausalLM

    run = sft_runs["dir"] / "sft-zero3"
    exported = weights(run / "model")
    consolidated = get_fp32_state_dict_from_zero_checkpoint(str(run / "checkpoint-4"))
    if "lm_head.weight" not in exported:  # tied embeddings: DeepSpeed rebuilds the shared lm_head, HF omits it
        consolidated.pop("lm_head.weight", None)
    assert_same(exported, dict(consolidated), atol=0.0)
    model = AutoModelForCausalLM.from_pretrained(run / "model")
    assert model.model.embed_tokens.weight.shape == (512, 64)
    assert torch.equal(model.model.embed_tokens.weight, exported["model.embed_tokens.weight"])


def test_zero3_dpo_trains_resumes_and_exports(dpo_runs):
    from transformers import AutoModelForCausalLM

    from smolalign.runs.metrics import read_metrics

    folder, log = dpo_runs["dir"], dpo_runs["log"]
    # Policy and frozen reference both sharded at load.
    assert log.count("sharded as it loaded (ZeRO-3): this process holds 53,408 of 106,816") == 4
    logged = [m for m in read_metrics(folder / "dpo-zero3") if "rewards/margins" in m]
    # Step 1: policy == reference, so the loss is exactly log 2 only if the sharded reference was gathered right.
    assert logged[0]["loss"] == pytest.approx(0.6931, abs=1e-4)
    assert logged[-1]["rewards/margins"] > logged[0]["rewards/margins"] + 0.5
    assert_resumed(folder / "dpo-zero3", folder / "dpo-resumed", dpo_runs["cut"])
    AutoModelForCausalLM.from_pretrained(folder / "dpo-zero3" / "model")


def test_convert_exports_a_zero3_checkpoint_from_its_shards(sft_runs, tmp_path):
    """`smolalign convert` on the run's last checkpoint with its gathered weights removed: only the two ranks'
    ZeRO shards remain, and they consolidate to the run's final model."""
    from transformers import AutoModelForCausalLM

    checkpoint = tmp_path / "checkpoint-4"
    shutil.copytree(sft_runs["dir"] / "sft-zero3" / "checkpoint-4", checkpoint)
    (checkpoint / "model.safetensors").unlink()
    done = smolalign("convert", checkpoint, tmp_path / "hf")
    assert "deepspeed" in done.stdout
    assert_same(weights(tmp_path / "hf"), weights(sft_runs["dir"] / "sft-zero3" / "model"), atol=0.0)
    AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
