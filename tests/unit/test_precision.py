"""The precision of each part of a run, on the two kinds of CPU (the capability read stubbed) and on GPUs, for models
wide enough for bf16 to pay on a CPU and narrower ones: the table in smolalign/hardware.py's docstring, written out
here by hand."""

import pytest
import torch

from smolalign.hardware import (
    CPU_BF16_MIN_WIDTH,
    CPU_BF16_VARIABLE,
    Hardware,
    cpu_computes_bf16,
    detect_hardware,
    generation_dtype,
    precision_description,
    precision_flags,
    resolve_dtype,
)

BF16_CPU = Hardware("cpu", 0, "Xeon with AMX", True, 1, 2)
PLAIN_CPU = Hardware("cpu", 0, "Zen 3", False, 1, 2)
BF16_GPU = Hardware("cuda", 1, "H100", True, 1, 16)
OLD_GPU = Hardware("cuda", 1, "V100", False, 1, 16)
WIDE = 576  # SmolLM2-135M's hidden size


@pytest.fixture(autouse=True)
def unforced(monkeypatch):
    """SMOLALIGN_CPU_BF16=1 in the caller's environment would ask for bf16 at every width."""
    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)


@pytest.fixture
def capability(monkeypatch):
    """Stub torch's reading of the CPU: (AMX tiles, AVX512-BF16)."""
    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)

    def stub(amx: bool, avx512_bf16: bool) -> None:
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)

    return stub


@pytest.mark.parametrize(("amx", "avx512_bf16", "expected"), [
    (True, True, True), (True, False, True), (False, True, True), (False, False, False)])
def test_the_cpu_computes_bf16_with_amx_or_avx512_bf16(capability, amx, avx512_bf16, expected):
    capability(amx, avx512_bf16)
    assert cpu_computes_bf16() is expected
    if not torch.cuda.is_available():
        assert detect_hardware().bf16 is expected


def test_the_variable_overrides_the_reading_both_ways(capability, monkeypatch):
    capability(True, True)
    monkeypatch.setenv(CPU_BF16_VARIABLE, "0")
    assert cpu_computes_bf16() is False
    capability(False, False)
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    assert cpu_computes_bf16() is True
    monkeypatch.setenv(CPU_BF16_VARIABLE, "")  # empty: the reading decides
    assert cpu_computes_bf16() is False


# (hardware, model.dtype) -> (trained weights, generation, TrainingArguments bf16, fp16)
TABLE = [
    (BF16_CPU, "auto", "float32", "bfloat16", True, False),
    (BF16_CPU, "float32", "float32", "float32", False, False),
    (BF16_CPU, "bfloat16", "bfloat16", "bfloat16", False, False),
    (BF16_CPU, "float16", "float32", "float32", False, False),
    (PLAIN_CPU, "auto", "float32", "float32", False, False),
    (PLAIN_CPU, "float32", "float32", "float32", False, False),
    (PLAIN_CPU, "bfloat16", "float32", "float32", False, False),
    (PLAIN_CPU, "float16", "float32", "float32", False, False),
    (BF16_GPU, "auto", "bfloat16", "bfloat16", True, False),
    (BF16_GPU, "float32", "float32", "float32", True, False),  # float32 masters under bf16 autocast
    (OLD_GPU, "auto", "float32", "float16", False, True),  # float32 masters under fp16 autocast
    # float16 weights cannot train (torch's loss scaler refuses their gradients): float32 masters under fp16 autocast,
    # generation in float16, on a GPU with bf16 or without
    (BF16_GPU, "float16", "float32", "float16", False, True),
    (OLD_GPU, "float16", "float32", "float16", False, True),
]


@pytest.mark.parametrize(("hardware", "requested", "weights", "generation", "bf16", "fp16"), TABLE)
def test_each_part_gets_the_precision_of_the_table(hardware, requested, weights, generation, bf16, fp16):
    assert resolve_dtype(requested, hardware) == weights
    assert generation_dtype(requested, hardware, WIDE) == generation
    flags = precision_flags(requested, hardware, WIDE)
    assert (flags["bf16"], flags["fp16"]) == (bf16, fp16)
    assert flags.get("use_cpu", False) is (not hardware.on_gpu)


# (hardware, model.dtype, width) -> (generation, TrainingArguments bf16): below 384 wide float32 is the faster
# precision on a bf16 CPU (benchmarks/precision_width.py); a width not read counts as wide; GPUs and explicit
# requests do not look at the width.
BY_WIDTH = [
    (BF16_CPU, "auto", 64, "float32", False),
    (BF16_CPU, "auto", 383, "float32", False),
    (BF16_CPU, "auto", 384, "bfloat16", True),
    (BF16_CPU, "auto", None, "bfloat16", True),
    (BF16_CPU, "bfloat16", 64, "bfloat16", False),
    (PLAIN_CPU, "auto", 1024, "float32", False),
    (BF16_GPU, "auto", 64, "bfloat16", True),
]


@pytest.mark.parametrize(("hardware", "requested", "width", "generation", "bf16"), BY_WIDTH)
def test_a_narrow_model_computes_in_float32_on_a_bf16_cpu(hardware, requested, width, generation, bf16):
    assert CPU_BF16_MIN_WIDTH == 384
    assert generation_dtype(requested, hardware, width) == generation
    assert precision_flags(requested, hardware, width)["bf16"] is bf16


def test_the_variable_set_to_1_asks_for_bf16_at_any_width(monkeypatch):
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    assert generation_dtype("auto", BF16_CPU, 64) == "bfloat16" and precision_flags("auto", BF16_CPU, 64)["bf16"]
    assert generation_dtype("float32", BF16_CPU, 64) == "float32"  # an explicit float32 stays float32


def test_the_plan_says_which_precision_each_part_uses_and_why():
    assert precision_description("auto", BF16_CPU, WIDE) == (
        "float32 weights, bf16 autocast; generation bfloat16 (the CPU computes in bf16: AMX or AVX512-BF16)")
    assert precision_description("auto", BF16_CPU, 64) == (
        "float32 for training and generation (the model is 64 wide: below 384, float32 is faster than bf16 on this "
        "CPU)")
    assert precision_description("auto", PLAIN_CPU, WIDE) == (
        "float32 for training and generation (the CPU has no native bf16)")
    assert precision_description("float32", BF16_CPU, WIDE) == (
        "float32 for training and generation (model.dtype float32)")
    assert precision_description("float16", BF16_CPU, WIDE) == (
        "float32 for training and generation (float16 is never used on a CPU)")
    assert precision_description("auto", BF16_GPU, 64) == (
        "bfloat16 weights, bf16 compute; AdamW rounds each update into them stochastically (float32 moments)")
    assert precision_description("auto", OLD_GPU, 64) == "float32 master weights, fp16 autocast"
    assert precision_description("float32", BF16_GPU, 64, autocast=False) == (
        "float32 weights and compute (train.bf16/fp16 false: pure float32, as asked)")
    assert precision_description("bfloat16", BF16_CPU, WIDE) == (
        "bfloat16 weights and generation (model.dtype bfloat16 on a bf16 CPU); AdamW rounds each update into them "
        "stochastically (float32 moments)")
    assert precision_description("float16", BF16_GPU, 64) == (
        "float32 master weights, fp16 autocast, generation float16 (model.dtype float16: float16 weights cannot "
        "train, torch's loss scaler refuses their gradients)")


def test_the_plan_names_the_optimizer_that_updates_bf16_weights():
    """train.optim other than AdamW is kept as asked (stages/low_precision_updates.py): the plan says its updates
    round to the nearest instead of claiming stochastic rounding."""
    assert precision_description("auto", BF16_GPU, 64, optim="adamw_torch_fused").endswith(
        "AdamW rounds each update into them stochastically (float32 moments)")
    assert precision_description("auto", BF16_GPU, 64, optim="adafactor") == (
        "bfloat16 weights, bf16 compute; train.optim adafactor rounds each update into them to the nearest: updates "
        "below bf16's spacing are lost")
    assert precision_description("bfloat16", BF16_CPU, WIDE, optim="adamw_8bit").endswith(
        "train.optim adamw_8bit rounds each update into them to the nearest: updates below bf16's spacing are lost")


def test_the_plan_says_qloras_adapters_are_bf16_and_how_they_keep_their_updates():
    """TRL's trainers cast the adapters over a quantized base to bf16 (the QLoRA paper's choice), on every device."""
    assert precision_description("auto", BF16_GPU, 64, adapters=True, quantized="4bit") == (
        "4bit quantized base weights, bfloat16 LoRA adapters (TRL casts QLoRA's so), bf16 compute; AdamW rounds each "
        "update into them stochastically (float32 moments)")
    assert precision_description("auto", BF16_GPU, 64, adapters=True, quantized="4bit", sharded=True).endswith(
        "; the launcher keeps float32 master weights (DeepSpeed/FSDP)")
    assert precision_description("auto", BF16_GPU, 64, adapters=True) == (
        "bfloat16 base weights, float32 LoRA adapters (peft), bf16 compute")
    assert precision_description("auto", PLAIN_CPU, WIDE, adapters=True, quantized="4bit") == (
        "4bit quantized base weights, bfloat16 LoRA adapters (TRL casts QLoRA's so); AdamW rounds each update into "
        "them stochastically (float32 moments)")


def test_smolaligns_attention_only_for_float32_weights_under_cpu_autocast():
    from smolalign.hardware import CPU_AUTOCAST_ATTENTION, autocast_attention

    # training: float32 weights, bf16 autocast (eager for short sequences, SDPA for long: test_cpu_attention.py)
    assert autocast_attention("auto", BF16_CPU, "float32", WIDE) == CPU_AUTOCAST_ATTENTION
    assert autocast_attention("auto", BF16_CPU, "bfloat16", WIDE) is None  # generation loads bfloat16 weights
    assert autocast_attention("auto", BF16_CPU, "float32", 64) is None  # too narrow: no autocast
    assert autocast_attention("float32", BF16_CPU, "float32", WIDE) is None
    assert autocast_attention("auto", PLAIN_CPU, "float32", WIDE) is None
    assert autocast_attention("auto", BF16_GPU, "bfloat16", WIDE) is None

