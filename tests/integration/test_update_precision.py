"""Training bf16 weights learns at float32's pace: AdamW's updates, which rounding to the nearest bf16 would lose,
reach the weights by stochastic rounding (stages/low_precision_updates.py), observed in real runs. The CPU stands in for a GPU: `model.dtype:
bfloat16` trains bf16 weights on a CPU that computes bf16 (SMOLALIGN_CPU_BF16=1; torch emulates it where the CPU
lacks it), the same weights a GPU's `auto` trains. The reference is float32, which float32 master weights under bf16
autocast (a bf16 CPU's `auto`) track to 1e-4 at step 30 (benchmarks/update_precision.py, RESULTS.md)."""

import json

import pytest
import torch
from tiny_models import addition_prompts, chat_rows, grpo_recipe, pair_rows, write_jsonl

from smolalign.hardware import CPU_BF16_VARIABLE
from smolalign.stages.low_precision_updates import keep_low_precision_updates, low_precision_trainable
from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW

STEPS = 30


@pytest.fixture(scope="module")
def wide_dir(tiny_dir, tmp_path_factory):
    """tests/tiny_models.py's Llama at 384 wide, random: the issue's model for this comparison."""
    from tiny_models import build_model
    from transformers import AutoTokenizer

    directory = tmp_path_factory.mktemp("wide")
    build_model(directory, AutoTokenizer.from_pretrained(tiny_dir), hidden=384, heads=6, kv_heads=2)
    return directory


def sft_losses(cli, write_recipe, folder, source, dtype: str) -> list[float]:
    data = write_jsonl(folder / "chat.jsonl", chat_rows(128))
    recipe = write_recipe({"model": {"source": str(source), "dtype": dtype}, "template": {"name": "smollm3"},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "packing": "bfd", "per_device_train_batch_size": 2,
                                     "max_steps": STEPS, "learning_rate": 1e-5, "lr_scheduler_type": "constant",
                                     "logging_steps": 1, "save_steps": STEPS, "gradient_checkpointing": False,
                                     "seed": 0}}, f"{dtype}.yaml")
    code, _, err = cli("sft", recipe, "-o", folder / dtype)
    assert code == 0, err
    rows = [json.loads(line) for line in (folder / dtype / "metrics.jsonl").read_text().splitlines()]
    return [row["loss"] for row in rows if "loss" in row]


def test_bf16_weights_learn_at_the_pace_of_float32(cli, write_recipe, wide_dir, tmp_path, monkeypatch):
    """30 SFT steps at lr 1e-5 of the 384-wide model: bf16 weights end within 2% of float32's loss (plain AdamW on
    them ended 14% above it: 5.93 against 5.20), and the optimizer that ran kept float32 moments for every bf16
    weight (its checkpointed state), the weights saved bf16."""
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    full = sft_losses(cli, write_recipe, tmp_path, wide_dir, "float32")
    bf16 = sft_losses(cli, write_recipe, tmp_path, wide_dir, "bfloat16")
    assert len(full) == len(bf16) == STEPS
    assert full[0] - full[-1] > 1.0  # the reference learns: the comparison can tell
    assert bf16[-1] <= 1.02 * full[-1], (bf16[-1], full[-1])
    state = torch.load(tmp_path / "bfloat16" / f"checkpoint-{STEPS}" / "optimizer.pt", weights_only=False)["state"]
    assert state and all(s["exp_avg_sq"].dtype == torch.float32 and s["exp_avg_sq"].sum() > 0 for s in state.values())


def tiny_trainer(tiny_dir, tmp_path, dtype, **args):
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=dtype)
    return Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True,
                                                       report_to="none", **args))


@pytest.fixture
def unlaunched(monkeypatch):
    for name in ("SMOLALIGN_DEEPSPEED_CONFIG", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(name, raising=False)


def test_bf16_weights_get_stochastic_rounding_adamw_with_the_runs_settings(unlaunched, tiny_dir, tmp_path):
    trainer = tiny_trainer(tiny_dir, tmp_path, torch.bfloat16, learning_rate=3e-5, adam_beta2=0.95,
                           adam_epsilon=1e-7, weight_decay=0.1, seed=3)
    assert keep_low_precision_updates(trainer)
    trainer.create_optimizer()
    optimizer = trainer.optimizer
    assert isinstance(optimizer, StochasticRoundingAdamW) and optimizer.seed == 3
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]  # the trainer's decay groups
    group = optimizer.param_groups[0]
    assert (group["lr"], group["betas"], group["eps"]) == (3e-5, (0.9, 0.95), 1e-7)
    ids = torch.tensor([[1, 2, 3, 4]])
    trainer.model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    assert all(p.dtype == torch.bfloat16 and optimizer.state[p]["exp_avg"].dtype == torch.float32
               for p in trainer.model.parameters())


def test_an_update_far_below_bf16s_spacing_reaches_the_weights_on_average():
    """A weight of 1.0 (bf16 spacing 2^-7) updated by 1e-4 a step: rounded to the nearest it never moves; rounded
    stochastically, 100,000 weights move by the float32 amount on average (within 5 standard errors), each to one of
    its two neighbours, and the optimizer's step is torch's AdamW's in expectation (same moments, same update)."""
    from smolalign.rounding import round_stochastically

    exact = torch.full((100_000,), 1.0 + 1e-4 * 10)  # ten steps of 1e-4 in float32
    rounded = round_stochastically(exact, torch.Generator().manual_seed(0)).float()
    assert set(rounded.unique().tolist()) == {1.0, 1.0 + 2 ** -7}
    assert rounded.mean().item() == pytest.approx(exact[0].item(), abs=2e-5)
    assert exact.to(torch.bfloat16).float().unique().tolist() == [1.0]  # to the nearest: nothing moved

    weights = torch.nn.Parameter(torch.ones(100_000, dtype=torch.bfloat16))
    reference = torch.nn.Parameter(torch.ones(100_000))
    ours = StochasticRoundingAdamW([weights], lr=1e-4, seed=0)
    theirs = torch.optim.AdamW([reference], lr=1e-4, weight_decay=0.0)
    for _ in range(10):
        weights.grad = torch.full_like(weights, -0.5)
        reference.grad = torch.full_like(reference, -0.5)
        ours.step()
        theirs.step()
    assert reference[0].item() == pytest.approx(1.001, abs=1e-6)  # ten steps of lr × 1 in float32
    assert weights.float().mean().item() == pytest.approx(reference.mean().item(), abs=5e-5)
    assert torch.equal(ours.state[weights]["exp_avg"], theirs.state[reference]["exp_avg"])


def test_float32_weights_lora_and_launchers_masters_keep_torchs_adamw(unlaunched, tiny_dir, tmp_path, monkeypatch,
                                                                      capsys):
    from peft import LoraConfig, get_peft_model

    assert not keep_low_precision_updates(tiny_trainer(tiny_dir, tmp_path, torch.float32))
    lora = tiny_trainer(tiny_dir, tmp_path, torch.bfloat16)
    lora.model = get_peft_model(lora.model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    assert low_precision_trainable(lora.model) == []  # peft keeps adapters in float32 over a bf16 base
    assert not keep_low_precision_updates(lora)
    for launcher in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):  # float32 masters of their own
        with monkeypatch.context() as launched:
            launched.setenv(launcher, "true")
            assert not keep_low_precision_updates(tiny_trainer(tiny_dir, tmp_path, torch.bfloat16))
    assert not keep_low_precision_updates(tiny_trainer(tiny_dir, tmp_path, torch.bfloat16, optim="adafactor"))
    assert "train.optim adafactor updates" in capsys.readouterr().err


def test_qloras_bf16_adapters_get_stochastic_rounding_alone_and_float32_masters_under_fsdp(unlaunched, tiny_dir,
                                                                                            tmp_path, monkeypatch):
    """TRL casts QLoRA's adapters to bf16 (trl/trainer/sft_trainer.py): in one process (or under DDP) they train with
    the stochastic-rounding AdamW; under FSDP, whose float32 upcast accelerate skips for a model that holds 4-bit
    weights (accelerate.utils.fsdp_utils), they become float32 master weights before training starts."""
    pytest.importorskip("bitsandbytes")
    import datasets
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
    from trl import SFTConfig, SFTTrainer

    def qlora_trainer():
        quantized = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(tiny_dir, quantization_config=quantized)
        return SFTTrainer(model=model, args=SFTConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none"),
                          train_dataset=datasets.Dataset.from_list([{"text": "one two three"}]),
                          processing_class=AutoTokenizer.from_pretrained(tiny_dir),
                          peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))

    alone = qlora_trainer()
    adapters = low_precision_trainable(alone.model)
    assert adapters and all("lora_" in name for name in adapters)  # TRL's cast
    assert keep_low_precision_updates(alone)
    sharded = qlora_trainer()
    with monkeypatch.context() as launched:
        launched.setenv("ACCELERATE_USE_FSDP", "true")
        launched.setenv("FSDP_VERSION", "2")
        assert not keep_low_precision_updates(sharded)
    trained = {name: p.dtype for name, p in sharded.model.named_parameters() if p.requires_grad}
    assert trained.keys() == set(adapters) and set(trained.values()) == {torch.float32}


@pytest.mark.parametrize("stage", ["po", "rl"])
def test_preference_and_grpo_runs_train_bf16_weights_with_it_too(cli, write_recipe, tiny_dir, tmp_path, monkeypatch,
                                                                 stage):
    """APO-zero (po) and GRPO (rl) from the CLI with bf16 weights: the checkpointed optimizer state is this AdamW's
    (float32 moments beside bf16 weights; torch's AdamW keeps them in the weights' dtype)."""
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    if stage == "po":
        data = write_jsonl(tmp_path / "pairs.jsonl", pair_rows(8))
        recipe = {"stage": "po", "method": "apo_zero", "model": {"source": str(tiny_dir)},
                  "template": {"name": "chatml"}, "data": {"sources": [{"path": str(data)}]},
                  "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 2,
                            "logging_steps": 1, "gradient_checkpointing": False}}
    else:
        data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(8))
        recipe = {"stage": "rl", **grpo_recipe(tiny_dir, data, "chatml", max_completion_length=8)}
    recipe["model"]["dtype"] = "bfloat16"
    recipe["train"]["save_steps"] = 2
    code, _, err = cli(stage, write_recipe(recipe), "-o", tmp_path / "run")
    assert code == 0, err
    state = torch.load(tmp_path / "run" / "checkpoint-2" / "optimizer.pt", weights_only=False)["state"]
    assert state and all(s["exp_avg"].dtype == torch.float32 for s in state.values())


def test_grpo_with_continuous_batching_over_float32_masters_is_refused_before_loading(cli, write_recipe, tiny_dir,
                                                                                       tmp_path, monkeypatch):
    """Float32 masters under bf16 autocast (a bf16 CPU's `auto`, as a GPU's `model.dtype: float32`): TRL's continuous
    batching would cast them to bf16 (the test below), so the dry run stops with exit 2 naming the key; over bf16
    weights, which the cast leaves as they are, the key is kept."""
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(8))
    recipe = {"stage": "rl", **grpo_recipe(tiny_dir, data, "chatml", max_completion_length=8,
                                           use_transformers_continuous_batching=True)}
    code, _, err = cli("rl", write_recipe(recipe), "--dry-run")
    assert code == 2 and "train.use_transformers_continuous_batching: TRL casts the training model to bf16" in err
    recipe["model"]["dtype"] = "bfloat16"
    code, _, err = cli("rl", write_recipe(recipe, "bf16.yaml"), "--dry-run")
    assert code == 0, err


def test_trls_continuous_batching_turns_float32_masters_into_bf16_weights_with_bf16_moments(tiny_dir, tmp_path):
    """Why the refusal above, on the real trainer: one GRPO step with `use_transformers_continuous_batching` under bf16
    autocast leaves float32 master weights bf16, and AdamW's moments bf16 with them (TRL 1.16 casts the training model
    in place before it generates). When TRL stops casting, this fails and the refusal can go."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    prompts = datasets.Dataset.from_list([{"prompt": f"{i} plus {i}"} for i in range(2)])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=True, num_generations=2,
                      per_device_train_batch_size=2, max_steps=1, max_completion_length=2, report_to="none",
                      save_strategy="no", use_transformers_continuous_batching=True,
                      # a small paged cache: filling the default one takes ~16 s on a CPU
                      transformers_continuous_batching_config={"num_blocks": 8, "max_batch_tokens": 64})
    trainer = GRPOTrainer(model=model, args=args, train_dataset=prompts, processing_class=AutoTokenizer.from_pretrained(
        tiny_dir), reward_funcs=lambda completions, **_: [float(len(c)) for c in completions])
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    trainer.train()
    assert {p.dtype for p in trainer.model.parameters()} == {torch.bfloat16}
    assert {s["exp_avg"].dtype for s in trainer.optimizer.state.values()} == {torch.bfloat16}


def test_a_bf16_run_resumes_with_float32_moments_to_the_uninterrupted_weights(cli, write_recipe, tiny_dir, tmp_path,
                                                                               monkeypatch):
    """A bf16-weights SFT run cut back to checkpoint-2 and resumed: the resumed optimizer keeps float32 moments (torch
    casts loaded state to the weights' dtype, and the next step refused bf16 moments) and ends on the uninterrupted
    run's weights and losses bit for bit (the rounding noise follows the step, not the process)."""
    from resume_checks import assert_resumed, cut_back

    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(32))
    recipe = write_recipe({"model": {"source": str(tiny_dir), "dtype": "bfloat16"}, "template": {"name": "smollm3"},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "packing": "bfd", "per_device_train_batch_size": 2,
                                     "max_steps": 4, "save_steps": 2, "learning_rate": 1e-3, "logging_steps": 1,
                                     "gradient_checkpointing": False, "seed": 0}}, "bf16.yaml")
    code, _, err = cli("sft", recipe, "-o", tmp_path / "full")
    assert code == 0, err
    cut = cut_back(tmp_path / "full", tmp_path / "resumed")
    code, _, err = cli("sft", recipe, "-o", tmp_path / "resumed", "--resume")
    assert code == 0, err
    assert_resumed(tmp_path / "full", tmp_path / "resumed", cut)
    state = torch.load(tmp_path / "resumed" / "checkpoint-4" / "optimizer.pt", weights_only=False)["state"]
    assert state and all(s["exp_avg"].dtype == torch.float32 for s in state.values())
