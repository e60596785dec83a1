"""Write a real DeepSpeed ZeRO-3 checkpoint of a saved transformers model, in one CPU process (gloo):
`python tests/deepspeed_zero_writer.py MODEL_DIR OUT_DIR` leaves OUT_DIR/{latest, global_step1/...} (one
optimizer step with lr 0, so the consolidated weights must equal MODEL_DIR's exactly)."""

import sys


def main(model_dir: str, out_dir: str) -> None:
    import deepspeed
    import torch
    from transformers import AutoModelForCausalLM

    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
              "optimizer": {"type": "AdamW", "params": {"lr": 0.0, "torch_adam": True}}}
    deepspeed.init_distributed(dist_backend="gloo")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    ids = torch.arange(8).reshape(1, 8)
    loss = engine(input_ids=ids, labels=ids).loss
    engine.backward(loss)
    engine.step()
    engine.save_checkpoint(out_dir)
    print("ZERO_CHECKPOINT_OK")


if __name__ == "__main__":
    main(*sys.argv[1:3])
