"""On a CPU, smolalign's GRPOTrainer runs each distinct prompt of a batch through the model once and its answers on
the prompt's key/value cache (smolalign.trainers.grpo): the log-probabilities, entropies and gradients equal
TRL's own `_get_per_token_logps_and_entropies` (the reference, called as TRL ships it) in float32, and the token
positions the model really embeds are counted against the count worked out by hand."""

from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from tiny_models import write_jsonl

PROMPT, COMPLETION = 10, 6  # prompt tokens (left-padded) and completion tokens (right-padded) per row
ROW_PROMPT = [0, 1, 0, 2, 1, 0, 2, 1]  # three prompts, their answers interleaved as a shuffled batch would have them


@pytest.fixture
def tiny_model(tiny_dir):
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    return model.train()


def _batch(vocab: int, row_prompt=ROW_PROMPT):
    torch.manual_seed(3)
    prompts = torch.randint(3, vocab, (max(row_prompt) + 1, PROMPT))
    prompt_masks = torch.ones_like(prompts)
    prompt_masks[1, :3] = 0  # prompt 1 is three tokens shorter, prompt 2 one token
    prompt_masks[2, :1] = 0
    rows = torch.tensor(row_prompt)
    completions = torch.randint(3, vocab, (len(row_prompt), COMPLETION))
    completion_masks = torch.ones_like(completions)
    for row in range(len(row_prompt)):
        completion_masks[row, 2 + row % 5:] = 0  # answers of 2 to 6 tokens
    input_ids = torch.cat([prompts[rows] * prompt_masks[rows], completions], dim=1)
    attention_mask = torch.cat([prompt_masks[rows], completion_masks], dim=1)
    return input_ids, attention_mask, completion_masks.bool()


def _trainer(**overrides):
    from smolalign.trainers.grpo import SharedPromptGRPOTrainer

    trainer = object.__new__(SharedPromptGRPOTrainer)  # the method under test reads only these attributes
    trainer.accelerator = SimpleNamespace(autocast=nullcontext, num_processes=1, is_main_process=True,
                                          unwrap_model=lambda model: model)
    trainer.is_deepspeed_enabled = False
    for name, value in overrides.items():
        setattr(trainer, name, value)
    return trainer


def _embedded_positions(model) -> list[int]:
    seen = []
    model.get_input_embeddings().register_forward_hook(lambda module, args, out: seen.append(args[0].numel()))
    return seen


def _scores(method, owner, model, input_ids, attention_mask, mask, batch_size=None):
    model.zero_grad()
    log_probs, entropies, _ = method(owner, model, input_ids, attention_mask, COMPLETION, batch_size=batch_size,
                                     compute_entropy=True)
    (log_probs * mask).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return log_probs.detach(), entropies.detach(), grads


@pytest.mark.parametrize("batch_size", [None, 4])
def test_shared_prompts_score_as_trl_does_with_each_prompt_run_once(tiny_model, batch_size):
    from trl import GRPOTrainer

    input_ids, attention_mask, mask = _batch(tiny_model.config.vocab_size)
    trl_self = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext, is_main_process=True))
    expected = _scores(GRPOTrainer._get_per_token_logps_and_entropies, trl_self, tiny_model, input_ids,
                       attention_mask, mask, batch_size)
    trainer = _trainer()
    seen = _embedded_positions(tiny_model)
    got = _scores(type(trainer)._get_per_token_logps_and_entropies, trainer, tiny_model, input_ids, attention_mask,
                  mask, batch_size)

    # By hand: one pass over the first PROMPT - 1 tokens of each distinct prompt in a chunk, then every row's last
    # prompt token and its COMPLETION tokens. Whole batch: 3 prompts; chunks of 4 rows hold prompts {0, 1, 2} and
    # {1, 0, 2}, 3 each. TRL embeds 8 rows × 16 positions.
    chunks = [3] if batch_size is None else [3, 3]
    rows_per_chunk = [8] if batch_size is None else [4, 4]
    by_hand = [n for prompts, rows in zip(chunks, rows_per_chunk, strict=True)
               for n in (prompts * (PROMPT - 1), rows * (COMPLETION + 1))]
    assert seen == by_hand
    assert sum(seen) < 8 * (PROMPT + COMPLETION)

    torch.testing.assert_close(got[0][mask], expected[0][mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1][mask], expected[1][mask], atol=1e-5, rtol=1e-5)
    assert got[2].keys() == expected[2].keys()
    for name, grad in expected[2].items():
        torch.testing.assert_close(got[2][name], grad, atol=1e-6, rtol=1e-4, msg=name)


@pytest.mark.parametrize("case", ["distinct prompts", "gradient checkpointing", "two processes", "images",
                                  "dropout"])
def test_trls_pass_where_the_cache_cannot_serve(tiny_model, case):
    input_ids, attention_mask, mask = _batch(tiny_model.config.vocab_size,
                                             list(range(3)) if case == "distinct prompts" else ROW_PROMPT)
    trainer = _trainer()
    extra = {}
    if case == "gradient checkpointing":
        tiny_model.gradient_checkpointing_enable()
    elif case == "two processes":
        trainer.accelerator.num_processes = 2
    elif case == "images":
        extra["pixel_values"] = None
        extra["token_type_ids"] = torch.zeros_like(input_ids)
    elif case == "dropout":
        tiny_model.config.attention_dropout = 0.1
    seen = _embedded_positions(tiny_model)
    log_probs, _, _ = trainer._get_per_token_logps_and_entropies(tiny_model, input_ids, attention_mask, COMPLETION,
                                                                  **extra)
    assert seen == [input_ids.numel()]  # every row whole, as TRL runs it
    assert log_probs.shape == (input_ids.size(0), COMPLETION)


def test_a_grpo_run_from_the_cli_shares_its_prompts(cli, write_recipe, tiny_dir, tmp_path, monkeypatch):
    import smolalign.trainers.grpo as grpo_trainer
    from smolalign.stages.tool_grpo import tool_grpo_trainer

    shared = []
    original = grpo_trainer.shared_prompt_log_probs

    def counting(model, input_ids, *args, **kwargs):
        result = original(model, input_ids, *args, **kwargs)
        shared.append((input_ids.size(0), result is not None))
        return result

    monkeypatch.setattr(grpo_trainer, "shared_prompt_log_probs", counting)
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus 1"} for i in range(4)])
    recipe = str(write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "grpo",
        "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "think_format"}],
        "train": {"max_completion_length": 4, "num_generations": 4, "per_device_train_batch_size": 8,
                  "max_steps": 2, "save_strategy": "no", "logging_steps": 1, "gradient_checkpointing": False}}))
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert shared == [(8, True)] * 2  # each step's loss: 2 prompts × 4 answers, through the shared pass
    assert issubclass(tool_grpo_trainer(SimpleNamespace()), grpo_trainer.SharedPromptGRPOTrainer)
