"""What a DeepSpeed preset from recipes/accelerate/ runs with: the DeepSpeed JSON config it stands for, one config
on GPUs (handed to accelerate as its `deepspeed_config_file`) and on the CPU (handed to the trainer), with the batch
sizes, clipping, precision and bucket sizes left to the trainer ("auto")."""

import json
from pathlib import Path

ZERO_BUCKETS = {1: ("reduce_bucket_size",), 2: ("reduce_bucket_size",),
                3: ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold")}
"""The bucket settings of each ZeRO stage that smolalign's DeepSpeed config leaves to the trainer ("auto")."""


def accelerate_settings(settings: dict, num_processes: int, deepspeed_file: Path | None) -> dict:
    """The accelerate config a preset launches with on GPUs. A DeepSpeed preset names the JSON `deepspeed_config`
    makes of it (accelerate's own DeepSpeed settings cannot state bucket sizes), so GPUs and the CPU run one
    DeepSpeed config; accelerate refuses its stage, offload and precision settings beside a config file."""
    out = {**settings, "num_processes": num_processes}
    if deepspeed_file is not None:
        section = settings.get("deepspeed_config") or {}
        out["deepspeed_config"] = {"deepspeed_config_file": str(deepspeed_file),
                                   **{k: section[k] for k in ("deepspeed_multinode_launcher", "zero3_init_flag")
                                      if k in section}}
        out.pop("mixed_precision", None)  # the JSON leaves it to the trainer's bf16/fp16 ("auto")
    return out


def deepspeed_config(settings: dict, on_gpu: bool = False) -> dict:
    """The DeepSpeed JSON config an accelerate DeepSpeed preset (its parsed `settings`) stands for, with the batch
    sizes, clipping and precision left to the trainer ("auto"), so the recipe's `train:` stays the one source of
    them. `on_gpu`: communication overlapped with computation (DeepSpeed's GPU default, on CUDA streams); a CPU
    over gloo has no streams to overlap on."""
    section = settings.get("deepspeed_config") or {}
    if section.get("deepspeed_config_file"):
        return json.loads(Path(section["deepspeed_config_file"]).expanduser().read_text())
    stage = int(section.get("zero_stage", 2))
    zero: dict = {"stage": stage, "overlap_comm": on_gpu, "contiguous_gradients": True}
    for kind in ("param", "optimizer"):
        device = section.get(f"offload_{kind}_device", "none")
        if device not in (None, "none") and (kind == "optimizer" or stage == 3):
            zero[f"offload_{kind}"] = {"device": device, "pin_memory": False}
    # "auto" sizes the buckets from the model's hidden size (the trainer fills them in: ZERO_BUCKETS); DeepSpeed's
    # fixed defaults hold hundreds of MB per bucket whatever the model, and keep every tensor under 100k elements
    # whole on every rank, which for small models means no sharding.
    zero.update(dict.fromkeys(ZERO_BUCKETS.get(stage, ()), "auto"))
    if stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = bool(section.get("zero3_save_16bit_model", True))
    config = {"zero_optimization": zero, "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
              "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
              "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}
    if "offload_optimizer" in zero:
        # DeepSpeed's CPUAdam is a C++ extension compiled at first use; torch's AdamW needs no build.
        config["zero_force_ds_cpu_optimizer"] = False
    return config
