"""Pretraining checkpoints (nanotron, DeepSpeed ZeRO, torch DCP) read without their frameworks and converted into
transformers directories: `smolalign convert SRC DST`, or `model.source: <checkpoint>` in any recipe."""
