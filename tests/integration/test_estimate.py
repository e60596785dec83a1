"""Memory and time estimates: sizes and GPU names, model dims against the real model and PEFT, model states
against hand-computed byte counts and DeepSpeed's own formulas, FLOPs against the 6·N·tokens rule."""

import pytest

from smolalign.errors import SmolalignError
from smolalign.estimate.memory import Setup, estimate_memory, model_states, optimizer_state_bytes
from smolalign.gpus import GIB, GPUS, find_gpu, gpu_named, parse_size


def test_sizes_and_units():
    assert parse_size("80GB") == 80 * 10**9
    assert parse_size("70 GiB") == 70 * GIB
    assert parse_size("512MiB") == 512 * 1024**2
    assert parse_size(24) == 24 * 10**9


@pytest.mark.parametrize("bad", ["lots", "80 GBs", "-3GB", "0", True])
def test_a_budget_that_is_not_a_size_names_the_key(bad):
    with pytest.raises(SmolalignError, match="launch.gpu_memory"):
        parse_size(bad)


def test_gpu_names_as_users_and_torch_write_them():
    assert find_gpu("h100") is GPUS["H100"]
    assert find_gpu("NVIDIA H100 80GB HBM3") is GPUS["H100"]
    assert find_gpu("NVIDIA A100-SXM4-40GB") is GPUS["A100-40GB"]
    assert find_gpu("NVIDIA A100-SXM4-80GB") is GPUS["A100-80GB"]
    assert find_gpu("NVIDIA H200") is GPUS["H200"]
    assert find_gpu("NVIDIA H100 PCIe") is GPUS["H100-PCIe"]
    assert find_gpu("H1000") is None and find_gpu("A1000") is None
    with pytest.raises(SmolalignError, match="launch.gpu: unknown GPU type 'H1OO'"):
        gpu_named("H1OO")


@pytest.fixture(scope="module")
def tiny():
    """A real (small, random) Llama and its dims read from the config on the meta device."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from smolalign.estimate.dims import dims_from_config

    config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=176, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    return LlamaForCausalLM(config), dims_from_config(config)


def test_dims_match_the_real_model(tiny):
    model, dims = tiny
    assert dims.params == sum(p.numel() for p in model.parameters())
    assert dims.largest_layer == 1000 * 64  # the (tied) embedding
    assert (dims.layers, dims.hidden, dims.kv_heads, dims.head_dim) == (3, 64, 2, 16)
    assert dims.linears["k_proj"] == (64, 32, 3)


@pytest.mark.parametrize("targets", [None, "all-linear", ["q_proj", "down_proj"]])
def test_lora_parameters_match_peft(tiny, targets):
    import copy

    from peft import LoraConfig, get_peft_model

    model, dims = tiny
    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, target_modules=targets, task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert dims.lora_params(4, targets) == trainable


def test_plain_and_ddp_states_in_bf16(tiny):
    """bf16 weights train with AdamW that rounds stochastically, its moments float32: counted here from the real
    optimizer's state after a step."""
    import copy

    import torch

    from smolalign.stages.stochastic_rounding import StochasticRoundingAdamW

    model, dims = tiny
    p = dims.params
    one = model_states(dims, {"optim": "adamw_torch_fused"}, Setup(dtype="bfloat16")).parts
    assert one == {"weights": 2 * p, "gradients": 2 * p, "optimizer states": 8 * p}
    model = copy.deepcopy(model).to(torch.bfloat16)  # the module's model stays as other tests read it
    optimizer = StochasticRoundingAdamW(model.parameters(), lr=1e-5)
    ids = torch.tensor([[1, 2, 3]])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    held = sum(s[name].numel() * s[name].element_size() for s in optimizer.state.values()
               for name in ("exp_avg", "exp_avg_sq"))
    assert held == one["optimizer states"]
    plain = model_states(dims, {"optim": "adamw_torch_fused"}, Setup(dtype="float16")).parts
    assert plain["optimizer states"] == 4 * p  # torch keeps moments in the weights' dtype
    ddp = model_states(dims, {"optim": "adamw_torch"}, Setup(processes=4, sharding="ddp", dtype="bfloat16")).parts
    assert ddp["DDP gradient buckets"] == 2 * p
    sgd = model_states(dims, {"optim": "sgd"}, Setup(dtype="float32")).parts
    assert sgd["optimizer states"] == 0 and sgd["weights"] == 4 * p


def test_zero_states_follow_deepspeed(tiny):
    _, dims = tiny
    p, n = dims.params, 8

    def states(estimate):  # the buckets beside them: tests/unit/test_deepspeed_buckets.py
        return sum(size for part, size in estimate.parts.items() if part != "ZeRO buckets")

    zero2 = model_states(dims, {"optim": "adamw_torch"}, Setup(processes=n, sharding="zero2"))
    # DeepSpeed: 2 bytes of 16-bit weights everywhere, 2+4+4+8 bytes per parameter sharded over the ranks
    assert states(zero2) == 2 * p + int(18 * p / n)
    zero3 = model_states(dims, {"optim": "adamw_torch"}, Setup(processes=n, sharding="zero3"))
    assert states(zero3) == 4 * dims.largest_layer + int(18 * p / n)
    offloaded = model_states(dims, {"optim": "adamw_torch"}, Setup(processes=n, sharding="zero3",
                                                                     offload_optimizer=True, offload_params=True))
    assert states(offloaded) == 4 * dims.largest_layer
    assert offloaded.cpu == 18 * p  # one node holds every rank's states
    lion = model_states(dims, {"optim": "lion_32bit"}, Setup(processes=n, sharding="zero2"))
    assert states(lion) == 2 * p + int(18 * p / n) - int(4 * p / n)  # one fp32 moment, not two


def test_optimizer_states_per_parameter():
    assert optimizer_state_bytes("adamw_torch_fused", 4) == 8
    assert optimizer_state_bytes("adamw_bnb_8bit", 2) == 2
    assert optimizer_state_bytes("adafactor", 4) == 0


def test_lora_and_qlora_keep_the_base_frozen(tiny):
    _, dims = tiny
    lora = dims.lora_params(8, "all-linear")
    linear = sum(i * o * n for i, o, n in dims.linears.values())
    parts = model_states(dims, {"optim": "adamw_torch"}, Setup(dtype="bfloat16", peft={"r": 8, "target_modules":
                                                                                         "all-linear"})).parts
    assert parts == {"weights": 2 * dims.params + 4 * lora, "gradients": 4 * lora, "optimizer states": 8 * lora}
    qlora = model_states(dims, {"optim": "adamw_torch"}, Setup(dtype="bfloat16", quantization="4bit",
                                                               peft={"r": 8, "target_modules": "all-linear"})).parts
    # TRL casts QLoRA's adapters to bf16; AdamW keeps float32 moments for them (stochastic rounding)
    assert qlora["weights"] == pytest.approx(linear * 0.508 + 2 * (dims.params - linear) + 2 * lora, rel=1e-3)
    assert (qlora["gradients"], qlora["optimizer states"]) == (2 * lora, 8 * lora)
    under_fsdp = model_states(dims, {"optim": "adamw_torch"}, Setup(dtype="bfloat16", quantization="4bit", sharding="fsdp",
                                                                    peft={"r": 8, "target_modules": "all-linear"})).parts
    assert (under_fsdp["gradients"], under_fsdp["optimizer states"]) == (4 * lora, 8 * lora)  # float32 masters


def test_gradient_checkpointing_and_accumulation_change_the_peak(tiny):
    _, dims = tiny
    settings = {"optim": "adamw_torch", "tokens_per_micro_batch": 4096, "gradient_accumulation_steps": 1}
    full = estimate_memory(dims, {**settings, "gradient_checkpointing": False}, Setup(gpu=False, dtype="float32"))
    saved = estimate_memory(dims, {**settings, "gradient_checkpointing": True}, Setup(gpu=False, dtype="float32"))
    assert saved.parts["activations"] < full.parts["activations"]
    # checkpointing keeps one 4-byte hidden state per token and layer, plus one layer recomputed at a time
    per_layer = (full.parts["activations"] - 4096 * 8 * 64) // 3
    assert saved.parts["activations"] == 4096 * 3 * 4 * 64 + per_layer + 4096 * 8 * 64
    accumulating = estimate_memory(dims, {**settings, "gradient_accumulation_steps": 4}, Setup(gpu=False,
                                                                                               dtype="float32"))
    assert accumulating.peak - full.peak == full.parts["gradients"]


def test_step_time_is_six_n_per_token_at_the_stated_utilisation(tiny):
    from smolalign.estimate.time import matmul_params, step_time

    _, dims = tiny
    work = {"sequences_per_step": 16, "sequence_length": 1, "gradient_checkpointing": False}
    seconds = step_time(dims, work, GPUS["H100"], 0.5).total
    attention = 2 * dims.layers * dims.heads * dims.head_dim * 1
    assert seconds == pytest.approx(16 * 3 * (2 * matmul_params(dims) + attention) / (989e12 * 0.5))
    with_checkpointing = step_time(dims, {**work, "gradient_checkpointing": True}, GPUS["H100"], 0.5).total
    assert with_checkpointing == pytest.approx(seconds * 4 / 3)
