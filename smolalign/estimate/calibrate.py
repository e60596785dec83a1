"""A measured time per step (`launch.calibrate: true`): a few training steps of 1- and 2-layer slices of the model
(random weights, the recipe's micro-batch and sequence length, its weights' dtype, checkpointing and AdamW) on this
machine's device; their difference is the time of one layer, scaled to the model's depth. On-policy stages also
time a few decoding steps the same way. Works on CPU and GPU: `smolalign sft RECIPE --dry-run --set
launch.calibrate=true`. What it leaves out: autocast (float32 masters are timed as pure float32; on a CPU every run
is timed in float32) and the stochastic-rounding AdamW of bf16 weights (torch's AdamW is timed: on a GPU the fused
kernel's step is a small share of a 3B's, unmeasured; on a CPU it costs ~5x torch's, benchmarks/optimizer_step.py)."""

import copy
import time

from smolalign.estimate.dims import ModelDims
from smolalign.estimate.memory import Setup

STEPS = 3
DECODE_TOKENS = 8


def _slice(config, layers: int, dtype, device):
    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(config)
    config.num_hidden_layers = layers
    for key in ("layer_types", "no_rope_layers", "mlp_only_layers"):  # per-layer lists follow the depth
        value = getattr(config, key, None)
        if isinstance(value, list):
            setattr(config, key, value[:layers])
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=dtype).to(device)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _train_seconds(model, batch, length: int, checkpointing: bool, device) -> float:
    import torch
    from trl.trainer.utils import add_fused_lm_head

    if checkpointing:
        model.gradient_checkpointing_enable()
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))  # the loss head TRL's trainers use
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, model.config.vocab_size, (batch, length), device=device)
    times = []
    for _ in range(STEPS + 1):
        _sync(device)
        start = time.perf_counter()
        (-model(input_ids=ids, labels=ids, fused_lm_head=True).log_probs.mean()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        times.append(time.perf_counter() - start)
    return min(times[1:])


def _decode_seconds(model, batch: int, prompt: int, device) -> float:
    import torch

    model.eval()
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=device)
    with torch.no_grad():
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False)
        _sync(device)
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=DECODE_TOKENS, min_new_tokens=DECODE_TOKENS, do_sample=False)
        _sync(device)
    return (time.perf_counter() - start) / DECODE_TOKENS


def calibrate(config, dims: ModelDims, settings: dict, work: dict, setup: Setup) -> tuple[float, str]:
    """(seconds per optimizer step on this device, how it was measured) for a model `config` (transformers)."""
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(setup.dtype, torch.float32)
    if device.type == "cpu":
        dtype = torch.float32
    per_device = int(settings.get("per_device_train_batch_size") or 1)
    sequences = work["tokens_per_micro_batch"] // work["sequence_length"]
    micro = []
    for layers in (1, 2):
        model = _slice(config, layers, dtype, device)
        micro.append(_train_seconds(model, sequences, work["sequence_length"],
                                    bool(settings.get("gradient_checkpointing")), device))
        del model
    per_layer = max(micro[1] - micro[0], 0.0)
    fixed = max(micro[0] - per_layer, 0.0)
    accumulation = work["sequences_per_step"] // max(sequences, 1)
    seconds = (fixed + dims.layers * per_layer) * accumulation
    how = (f"{STEPS} steps of 1- and 2-layer slices on {device.type}, {sequences}×{work['sequence_length']} tokens, "
           f"scaled to {dims.layers} layers × {accumulation} micro-batches")
    if work.get("generated_sequences"):
        decode = []
        for layers in (1, 2):
            model = _slice(config, layers, dtype, device)
            decode.append(_decode_seconds(model, min(work["generated_sequences"], per_device * 8), 16, device))
            del model
        per_token = decode[0] + dims.layers * max(decode[1] - decode[0], 0.0) - max(decode[1] - decode[0], 0.0)
        generation = per_token * work["max_completion_length"]
        seconds += generation
        how += f"; generation {generation:.1f} s ({work['max_completion_length']} tokens, transformers generate)"
    return seconds, how
