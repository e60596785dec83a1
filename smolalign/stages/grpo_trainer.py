"""TRL's GRPOTrainer with each distinct prompt run through the model once per batch on a CPU.

GRPO scores every answer with the prompt in front of it: TRL 1.16 runs the batch's rows (prompt + completion)
through the model whole, so a prompt shared by the `num_generations` answers sampled from it goes through the model
that many times, forward and backward. On the quickstart (4 prompts × 8 answers, ~89 prompt tokens and ≤ 16
completion tokens a row) that is 32 × 105 = 3,360 token positions where about 900 (4 prompts once, then 32 answers) do.

`shared_prompt_log_probs` runs each distinct prompt once (all but its last token), keeps the key/value cache it
leaves, copies each prompt's cache to its answers' rows and runs the answers on it: positions, masks, the LM head and
its temperature are TRL's, and backward sums each answer's gradient into its prompt's one pass, so log-probabilities
and gradients are the ones TRL computes (equal in float32; under bf16 autocast they differ by rounding, as much as
TRL's own bf16 values differ from float32). It serves the loss, the old-policy and the reference log-probabilities.

Only on a single CPU process, where it is measured (benchmarks/cpu_training.py); TRL's own pass elsewhere (GPUs,
DDP, DeepSpeed), and for inputs the cache cannot carry: images, MoE router losses, gradient checkpointing, cache
layers other than transformers' dynamic ones, or a batch without a shared prompt.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from trl import GRPOTrainer


def shared_prompt_log_probs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                            autocast: Callable[[], AbstractContextManager], compute_entropy: bool):
    """(log-probs, entropies or None) of the last `logits_to_keep` tokens of each row, as TRL's fused LM head scores
    them, with rows that share their prompt tokens and mask sharing one pass over it; None where no two rows share a
    prompt or the model's cache is not one this can copy between rows. `autocast` opens the run's mixed precision."""
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    split = input_ids.size(1) - logits_to_keep - 1  # the prompt's last token scores the first completion token
    if split < 1:
        return None
    prompts = torch.cat([input_ids[:, :split], attention_mask[:, :split]], dim=1)
    distinct, row_prompt = torch.unique(prompts, dim=0, return_inverse=True)
    if distinct.size(0) == input_ids.size(0):
        return None
    rows = torch.arange(input_ids.size(0), device=input_ids.device)
    first_row = torch.full((distinct.size(0),), input_ids.size(0), device=input_ids.device).scatter_reduce(
        0, row_prompt, rows, "amin")
    with autocast():
        # logits_to_keep=1: the prompt pass needs the cache, not the vocabulary projection of every position
        prompt_pass = model(input_ids=input_ids[first_row, :split], attention_mask=attention_mask[first_row, :split],
                            use_cache=True, logits_to_keep=1)
    cache = prompt_pass.past_key_values
    if cache is None or not all(type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) for layer in cache.layers):
        return None
    cache.batch_select_indices(row_prompt)  # each row gets its prompt's keys and values; backward sums them back
    answers = input_ids[:, split:]
    labels = answers.masked_fill(attention_mask[:, split:] == 0, -100)
    labels[:, 0] = -100  # the prompt's last token is input here, not scored
    with autocast():
        scored = model(input_ids=answers, attention_mask=attention_mask, past_key_values=cache, labels=labels,
                       fused_lm_head=True)
    entropies = scored.entropy[:, -logits_to_keep:] if compute_entropy else None
    return scored.log_probs[:, -logits_to_keep:], entropies


class SharedPromptGRPOTrainer(GRPOTrainer):
    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **inputs):
        if self._shares_prompts(model, input_ids, compute_aux_loss, inputs):
            batch_size = batch_size or input_ids.size(0)
            chunks = [shared_prompt_log_probs(model, input_ids[start:start + batch_size],
                                              attention_mask[start:start + batch_size], logits_to_keep,
                                              self.accelerator.autocast, compute_entropy)
                      for start in range(0, input_ids.size(0), batch_size)]
            if all(chunk is not None for chunk in chunks):
                log_probs = torch.cat([chunk[0] for chunk in chunks])
                entropies = torch.cat([chunk[1] for chunk in chunks]) if compute_entropy else None
                return log_probs, entropies, None
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss, **inputs)

    def _shares_prompts(self, model, input_ids, compute_aux_loss: bool, inputs: dict) -> bool:
        """Whether this call can take the shared-prompt pass (module docstring: where, and why only there)."""
        return (input_ids.device.type == "cpu" and self.accelerator.num_processes == 1
                and not self.is_deepspeed_enabled and not compute_aux_loss
                and all(value is None for value in inputs.values())
                and not getattr(self.accelerator.unwrap_model(model), "is_gradient_checkpointing", False))
