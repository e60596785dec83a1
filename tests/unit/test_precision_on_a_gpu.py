"""The precision a run trains in on a stubbed GPU, for every `model.dtype` and launch preset: the flags of the TRL
config the stage builds (TRL's own config classes, their checks run), the plan's dtype row, the memory estimate's
parts. Expectations written out by hand from smolalign/hardware.py's table; the optimizer a real trainer is handed
and the loss it reaches are tests/integration/test_update_precision.py's."""

import pytest
from tiny_models import chat_rows, pair_rows, write_jsonl

from smolalign.hardware import Hardware, compensates_updates
from smolalign.resolve import load_run
from smolalign.stages.trainer_config import trl_config

H100 = Hardware("cuda", 1, "H100", True, 1, 16)
V100 = Hardware("cuda", 1, "V100", False, 1, 16)
LAUNCHER_VARIABLES = ("SMOLALIGN_LAUNCHED", "SMOLALIGN_DEEPSPEED_CONFIG", "ACCELERATE_USE_DEEPSPEED",
                      "ACCELERATE_USE_FSDP", "ACCELERATE_DEEPSPEED_CONFIG_FILE", "ACCELERATE_DEEPSPEED_ZERO_STAGE",
                      "WORLD_SIZE", "LOCAL_WORLD_SIZE")


@pytest.fixture
def stubbed_gpu(monkeypatch):
    """transformers checks bf16 against the real device; here the device is the stubbed one."""
    monkeypatch.setattr("transformers.training_args.is_torch_bf16_gpu_available", lambda: True)
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def recipes(write_recipe, tiny_dir, tmp_path):
    chats = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    pairs = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(8))
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "1 plus 1", "solution": "2"}])
    model = {"source": str(tiny_dir)}
    return {
        "sft": write_recipe({"model": model, "data": {"sources": [{"path": str(chats)}]}}, "sft.yaml"),
        "po": write_recipe({"stage": "po", "method": "dpo", "model": model,
                            "data": {"sources": [{"path": str(pairs)}]}}, "po.yaml"),
        "rl": write_recipe({"stage": "rl", "method": "grpo", "model": model, "rewards": [{"name": "math_accuracy"}],
                            "data": {"sources": [{"path": str(prompts)}]},
                            "train": {"num_generations": 2, "per_device_train_batch_size": 2}}, "rl.yaml"),
    }


# (GPU, model.dtype, train overrides) -> (TrainingArguments bf16, fp16)
FLAGS = [
    pytest.param(H100, "auto", [], True, False, id="H100-auto"),  # bf16 weights (AdamW keeps the lost bits)
    pytest.param(H100, "bfloat16", [], True, False, id="H100-bfloat16"),
    pytest.param(H100, "float32", [], True, False, id="H100-float32"),  # float32 masters under bf16 autocast
    pytest.param(H100, "float32", ["train.bf16=false"], False, False, id="H100-float32-asked-pure"),
    pytest.param(V100, "auto", [], False, True, id="V100-auto"),  # float32 masters under fp16 autocast
    pytest.param(V100, "float32", [], False, True, id="V100-float32"),
    # float16 weights cannot train (torch's loss scaler refuses their gradients): float32 masters under fp16 autocast
    pytest.param(H100, "float16", [], False, True, id="H100-float16"),
    pytest.param(V100, "float16", [], False, True, id="V100-float16"),
]


@pytest.mark.parametrize("stage", ["sft", "po", "rl"])
@pytest.mark.parametrize(("hardware", "dtype", "overrides", "bf16", "fp16"), FLAGS)
def test_the_trainer_config_on_a_gpu_carries_the_intended_precision(stubbed_gpu, recipes, tmp_path, stage, hardware,
                                                                     dtype, overrides, bf16, fp16):
    run = load_run(str(recipes[stage]), [f"model.dtype={dtype}", *overrides], stage, hardware=hardware)
    config = trl_config(run, hardware, tmp_path / "run", check=True)
    assert (config.bf16, config.fp16) == (bf16, fp16)


# (model.dtype, preset, LoRA) -> what the plan's dtype row says about the updates
ROWS = [
    ("auto", None, False, "bfloat16 weights, bf16 compute; AdamW rounds each update into them stochastically"),
    ("auto", "ddp", False, "AdamW rounds each update into them stochastically"),
    ("auto", "zero2", False, "the launcher keeps float32 master weights (DeepSpeed/FSDP)"),
    ("auto", "zero3", False, "the launcher keeps float32 master weights (DeepSpeed/FSDP)"),
    ("auto", "fsdp2", False, "the launcher keeps float32 master weights (DeepSpeed/FSDP)"),
    ("auto", None, True, "bfloat16 base weights, float32 LoRA adapters (peft), bf16 compute"),
    ("float32", None, False, "float32 master weights, bf16 autocast"),
    ("float32", "zero3", False, "float32 master weights, bf16 autocast"),
    ("float16", None, False, "float32 master weights, fp16 autocast, generation float16"),
]


def test_a_float16_recipe_trains_float32_masters_and_keeps_frozen_weights_float16(stubbed_gpu, recipes):
    """Only trained weights need float32 masters: the policy trained in full loads float32, LoRA's frozen base and a
    preference method's reference load float16, and the policy generates in float16 (the run's OpenRun dtype, the
    reference's load dtype, the engines' dtype)."""
    from smolalign.hardware import frozen_dtype
    from smolalign.stages.generating import policy_generation_dtype
    from smolalign.stages.lifecycle import policy_dtype

    run = load_run(str(recipes["rl"]), ["model.dtype=float16"], "rl", hardware=H100)
    assert policy_dtype(run) == "float32" and policy_generation_dtype(run) == "float16"
    lora = load_run(str(recipes["sft"]), ["model.dtype=float16", "peft.r=8"], "sft", hardware=H100)
    assert policy_dtype(lora) == "float16"
    assert frozen_dtype(run.recipe.model.dtype, H100) == "float16"


@pytest.mark.parametrize(("dtype", "preset", "lora", "row"), ROWS)
def test_the_plan_says_how_updates_keep_their_precision(stubbed_gpu, recipes, dtype, preset, lora, row):
    from smolalign.plan import make_plan

    overrides = [f"model.dtype={dtype}"] + ([f"launch.preset={preset}"] if preset else [])
    overrides += ["peft.r=8"] if lora else []
    run = load_run(str(recipes["sft"]), overrides, "sft", hardware=H100)
    assert row in make_plan(run, None, 8).rows["dtype"]


def test_the_memory_estimate_counts_float32_moments_where_they_are_kept():
    from transformers import LlamaConfig

    from smolalign.estimate.dims import dims_from_config
    from smolalign.estimate.memory import Setup, model_states

    dims = dims_from_config(LlamaConfig(vocab_size=49152, hidden_size=2048, intermediate_size=11008,
                                        num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=4,
                                        tie_word_embeddings=True))

    def states(sharding, dtype="bfloat16", optim="adamw_torch_fused", processes=1):
        return model_states(dims, {"optim": optim}, Setup(sharding=sharding, processes=processes, dtype=dtype,
                                                          gpu=True)).parts["optimizer states"]

    p = dims.params
    assert states("none") == states("ddp", processes=8) == 8 * p  # float32 moments beside bf16 weights
    assert states("none", optim="adamw_torch") == 8 * p
    assert states("none", dtype="float16") == 4 * p  # plain torch AdamW: moments in the weights' dtype
    assert states("none", optim="adamw_8bit") == 2 * p  # another optimizer, as asked


def test_the_rule_is_one_function():
    assert compensates_updates("bfloat16", False) and compensates_updates("bfloat16", False, "adamw_torch_fused")
    assert not compensates_updates("bfloat16", True) and not compensates_updates("float32", False)
    assert not compensates_updates("bfloat16", False, "adamw_8bit") and not compensates_updates("float16", False)


@pytest.mark.parametrize(("overrides", "refused"), [
    (["model.dtype=float32"], True),  # float32 masters: cast to bf16 in place, then trained with plain AdamW
    (["peft.r=8"], True),  # LoRA's float32 adapters: the same
    (["model.dtype=float32", "train.bf16=false"], False),  # pure float32: TRL casts nothing
    (["model.dtype=float32", "launch.preset=zero3"], False),  # DeepSpeed's engine holds bf16 parameters anyway
    (["launch.preset=fsdp2"], True),  # FSDP's float32 masters (accelerate upcasts the bf16 weights)
    (["model.dtype=float32", "generation.backend=vllm_colocate"], False),  # TRL ignores the key where vLLM generates
    ([], False),  # bf16 weights: the cast changes nothing
])
def test_grpo_refuses_continuous_batching_where_it_would_cast_float32_trained_parameters(stubbed_gpu, recipes,
                                                                                         overrides, refused):
    """TRL's GRPOTrainer casts the whole training model to bf16 in place before it generates with continuous batching
    (trl/trainer/grpo_trainer.py, `unwrapped_model.to(torch.bfloat16)`)."""
    from smolalign.errors import SmolalignError
    from smolalign.stages.low_precision_updates import check_continuous_batching

    run = load_run(str(recipes["rl"]), ["train.use_transformers_continuous_batching=true", *overrides], "rl",
                   hardware=H100)
    if refused:
        with pytest.raises(SmolalignError, match="train.use_transformers_continuous_batching: TRL casts the training "
                                                 "model to bf16 in place"):
            check_continuous_batching(run)
    else:
        check_continuous_batching(run)


CPU = Hardware("cpu", 0, "cpu", True, 1, 2)  # a CPU that computes in bf16 (AMX or AVX512-BF16)


@pytest.mark.parametrize(("dtype", "row"), [
    ("auto", "bfloat16 weights, bf16 compute; AdamW rounds each update into them stochastically (float32 moments)"),
    ("float32", "float32 master weights, bf16 autocast"),
])
def test_a_plan_for_a_gpu_made_on_a_cpu_states_the_gpus_precision(recipes, dtype, row):
    """The memory rows of `--set launch.gpu=H100` are the GPU's: so is the dtype row, not the planning machine's."""
    from smolalign.plan import make_plan

    run = load_run(str(recipes["sft"]), [f"model.dtype={dtype}", "launch.gpu=H100"], "sft", hardware=CPU)
    assert make_plan(run, None, 8).rows["dtype"] == f"{row} (on the H100 of launch.gpu)"


def test_deepspeed_on_a_cpu_is_planned_without_autocast(recipes, monkeypatch):
    """stages/trainer_config.py turns bf16 off under DeepSpeed on a CPU: the plan must not promise bf16 autocast."""
    from smolalign.plan import make_plan

    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SMOLALIGN_CPU_BF16", "1")  # bf16 autocast at the tiny model's width, but for DeepSpeed
    run = load_run(str(recipes["sft"]), ["launch.preset=zero2"], "sft", hardware=CPU)
    row = make_plan(run, None, 8).rows["dtype"]
    assert row.startswith("float32 weights, no autocast") and "bf16 autocast" not in row


def test_bf16_false_on_a_gpu_without_bf16_is_planned_as_the_fp16_autocast_it_runs(stubbed_gpu, recipes, tmp_path):
    from smolalign.plan import make_plan

    run = load_run(str(recipes["sft"]), ["train.bf16=false"], "sft", hardware=V100)
    assert trl_config(run, V100, tmp_path / "run").fp16  # what the trainer gets
    assert make_plan(run, None, 8).rows["dtype"] == "float32 master weights, fp16 autocast"


def test_a_plan_for_a_gpu_made_on_a_cpu_sizes_the_reference_in_the_gpus_dtype(recipes):
    from smolalign.stages.po import reference_description

    on_gpu = load_run(str(recipes["po"]), ["launch.gpu=H100"], "po", hardware=CPU)
    here = load_run(str(recipes["po"]), [], "po", hardware=CPU)
    assert reference_description(on_gpu).endswith("parameters in bfloat16)")
    assert reference_description(here).endswith("parameters in float32)")
