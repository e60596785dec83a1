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
DDP, DeepSpeed), and where the one pass would not be TRL's: images and multimodal models (their text positions are
their own), MoE router losses (over whole rows), dropout in training (a mask per row), gradient checkpointing, cache
layers other than transformers' dynamic ones, or a chunk without a shared prompt.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from trl import GRPOTrainer
from trl.extras.profiling import profiling_decorator

from smolalign.trainers.shared_prefill import copyable_cache, distinct_rows


def shared_prompt_log_probs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                            autocast: Callable[[], AbstractContextManager], compute_entropy: bool):
    """(log-probs, entropies or None) of the last `logits_to_keep` tokens of each row, as TRL's fused LM head scores
    them, with rows that share their prompt tokens and mask sharing one pass over it; None where no two rows share a
    prompt or the model's cache is not one this can copy between rows. `autocast` opens the run's mixed precision."""
    split = input_ids.size(1) - logits_to_keep - 1  # the prompt's last token scores the first completion token
    if split < 1:
        return None
    distinct, row_prompt = distinct_rows(input_ids[:, :split], attention_mask[:, :split])
    cache = copyable_cache(model.config)
    if distinct.size(0) == input_ids.size(0) or cache is None:
        return None
    # The rows grouped by prompt (stable), so that each prompt's cache is copied to its rows by `expand`, whose
    # backward is a plain sum: indexing the cache by row would sum the rows' gradients with index_put's parallel
    # accumulation on a CPU, in an order that changes from run to run (so would the trained weights).
    order = torch.argsort(row_prompt, stable=True)
    counts = torch.bincount(row_prompt).tolist()
    first_row = order[torch.tensor([0, *counts[:-1]], device=order.device).cumsum(0)]
    with autocast():
        # logits_to_keep=1: the prompt pass needs the cache, not the vocabulary projection of every position
        model(input_ids=input_ids[first_row, :split], attention_mask=attention_mask[first_row, :split],
              past_key_values=cache, use_cache=True, logits_to_keep=1)
    for layer in cache.layers:
        layer.keys, layer.values = (torch.cat([states[u:u + 1].expand(count, *states.shape[1:])
                                               for u, count in enumerate(counts)]) for states in (layer.keys, layer.values))
    rows, mask = input_ids[order], attention_mask[order]
    answers = rows[:, split:]
    labels = answers.masked_fill(mask[:, split:] == 0, -100)
    labels[:, 0] = -100  # the prompt's last token is input here, not scored
    with autocast():
        scored = model(input_ids=answers, attention_mask=mask, past_key_values=cache, labels=labels,
                       fused_lm_head=True)
    back = torch.argsort(order)  # each row's place in the batch as it came
    entropies = scored.entropy[back, -logits_to_keep:] if compute_entropy else None
    return scored.log_probs[back, -logits_to_keep:], entropies


class SharedPromptGRPOTrainer(GRPOTrainer):
    @profiling_decorator
    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **inputs):
        if not self._shares_prompts(model, input_ids, compute_aux_loss, inputs):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **inputs)
        batch_size = batch_size or input_ids.size(0)
        log_probs, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            rows, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
            chunk = shared_prompt_log_probs(model, rows, mask, logits_to_keep, self.accelerator.autocast,
                                            compute_entropy)
            if chunk is None:  # no shared prompt in this chunk: TRL's pass over it
                chunk = super()._get_per_token_logps_and_entropies(model, rows, mask, logits_to_keep,
                                                                   compute_entropy=compute_entropy)[:2]
            log_probs.append(chunk[0])
            entropies.append(chunk[1])
        return torch.cat(log_probs), torch.cat(entropies) if compute_entropy else None, None

    def _shares_prompts(self, model, input_ids, compute_aux_loss: bool, inputs: dict) -> bool:
        """Whether this call can take the shared-prompt pass (module docstring: where, and why only there)."""
        if input_ids.device.type != "cpu" or self.accelerator.num_processes != 1 or self.is_deepspeed_enabled:
            return False
        if compute_aux_loss or any(value is not None for value in inputs.values()):
            return False
        unwrapped = self.accelerator.unwrap_model(model)
        config = unwrapped.config
        return (not getattr(unwrapped, "is_gradient_checkpointing", False)
                and config.get_text_config() is config  # multimodal models place their text positions themselves
                and not getattr(config, "output_router_logits", False)  # MoE: a router loss over the whole rows
                and not (unwrapped.training and _has_dropout(unwrapped)))


def _has_dropout(model) -> bool:
    """Dropout in training draws a mask per row: a prompt run once would share one mask among its answers."""
    config = model.config
    rates = [value for key, value in vars(config).items() if "dropout" in key and isinstance(value, (int, float))]
    return any(rate > 0 for rate in rates) or any(
        isinstance(module, torch.nn.Dropout) and module.p > 0 for module in model.modules())
