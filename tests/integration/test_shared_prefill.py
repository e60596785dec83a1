"""Generation that reads each distinct prompt once (smolalign/trainers/shared_prefill.py), against transformers' own
`generate` on the same rows in float32: the same sequences and every new token's logits (within 1e-5), greedy and
sampled from one seed, with prompts of several lengths left-padded and their copies interleaved; the positions the embedding layer really sees equal the count worked
out by hand; rows that never repeat, and calls asking for more than TRL asks, go to `generate` unchanged; and a real
GRPO run from the CLI samples its rollouts through it."""

import pytest
import torch
from tiny_models import addition_prompts, grpo_recipe, write_jsonl

import smolalign.trainers.shared_prefill as shared_prefill
from smolalign.hardware import CPU_BF16_VARIABLE

NEW_TOKENS = 6


@pytest.fixture(scope="module")
def model(tiny_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # every row runs to the budget: the counts below are exact
    model.lm_head.weight.data *= 4  # answers that depend on the prompt
    return model


def batch(order):
    """Rows of three prompts of 5, 7 and 3 tokens, left-padded to 7 (pad id 0), in the order given."""
    prompts = {"a": [5, 17, 42, 9, 11], "b": [3, 8, 21, 30, 2, 14, 6], "c": [40, 7, 19]}
    ids = torch.tensor([[0] * (7 - len(prompts[k])) + prompts[k] for k in order])
    return ids, (ids != 0).long()


@pytest.fixture
def positions(model):
    """How many positions each forward call of the model embeds."""
    seen = []
    handle = model.get_input_embeddings().register_forward_hook(lambda module, args, out: seen.append(args[0].numel()))
    yield seen
    handle.remove()


@pytest.mark.parametrize("sampled", [False, True])
def test_the_same_sequences_as_transformers_generate(model, positions, sampled):
    from transformers import GenerationConfig

    ids, mask = batch("abacbaca")
    config = GenerationConfig(do_sample=sampled, max_new_tokens=NEW_TOKENS, pad_token_id=0, eos_token_id=None,
                              top_k=None, top_p=0.9 if sampled else None,  # as TRL passes it: one config
                              return_dict_in_generate=True, output_logits=True)
    results = []
    for call in (lambda: model.generate(input_ids=ids, attention_mask=mask, generation_config=config),
                 lambda: shared_prefill.generate_sharing_prompts(model, input_ids=ids, attention_mask=mask,
                                                                 generation_config=config)):
        torch.manual_seed(0)
        with torch.no_grad():
            results.append(call())
    plain, shared = results
    assert torch.equal(plain.sequences, shared.sequences)
    for theirs, ours in zip(plain.logits, shared.logits, strict=True):  # each new token's logits, every row
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    assert len({tuple(row) for row in shared.sequences[:, 7:].tolist()}) > 2  # answers that differ by prompt
    rows, width = ids.shape
    assert sum(positions[: NEW_TOKENS]) == rows * (width + NEW_TOKENS - 1)  # transformers: every row whole
    assert positions[NEW_TOKENS:] == [3 * (width - 1)] + [rows] * NEW_TOKENS  # 3 prompts once, then a token a row


def test_rows_that_never_repeat_and_other_calls_go_to_generate_unchanged(model, monkeypatch):
    called = []
    monkeypatch.setattr(shared_prefill, "_applies", lambda *args: called.append("checked") or True)
    ids, mask = batch("abc")
    with torch.no_grad():
        shared_prefill.generate_sharing_prompts(model, input_ids=ids, attention_mask=mask, max_new_tokens=2,
                                                do_sample=False, pad_token_id=0)  # every row distinct
    assert called == ["checked"]  # the distinct rows were counted and the call went on unchanged: no error
    monkeypatch.undo()
    ids, mask = batch("aab")
    assert shared_prefill._applies(model, ids, mask, {"generation_config": model.generation_config})
    assert not shared_prefill._applies(model, ids, mask, {"num_beams": 2})  # a keyword TRL never passes
    from transformers import GenerationConfig

    for unusual in ({"num_beams": 2}, {"num_return_sequences": 2, "do_sample": True},
                    {"cache_implementation": "static"}, {"use_cache": False}, {"prefill_chunk_size": 4}):
        config = GenerationConfig(**unusual)
        assert not shared_prefill._applies(model, ids, mask, {"generation_config": config}), unusual
        # set on the model's own config (generate fills the passed config's unset fields from it, as online DPO's
        # cache_implementation): the same
        own = model.generation_config
        monkeypatch.setattr(model, "generation_config", GenerationConfig(**{**own.to_dict(), **unusual}))
        assert not shared_prefill._applies(model, ids, mask, {"generation_config": GenerationConfig()}), unusual
        monkeypatch.setattr(model, "generation_config", own)


def test_a_cache_with_more_than_keys_and_values_goes_to_generate_unchanged():
    """LFM2's convolution layers keep states a copy of keys and values would not carry to the repeats."""
    from transformers import GenerationConfig, Lfm2Config, Lfm2ForCausalLM

    torch.manual_seed(0)
    model = Lfm2ForCausalLM(Lfm2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=1, layer_types=["conv", "full_attention"],
                                       pad_token_id=0)).eval()
    ids = torch.tensor([[5, 17, 42, 9]] * 4)
    config = GenerationConfig(do_sample=False, max_new_tokens=4, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        plain = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
        shared = shared_prefill.generate_sharing_prompts(model, input_ids=ids, attention_mask=torch.ones_like(ids),
                                                         generation_config=config)
    assert torch.equal(plain, shared)


def test_a_grpo_run_reads_each_prompt_once_for_its_rollouts(monkeypatch, cli, write_recipe, tiny_dir, tmp_path):
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")  # the bf16 generation copy, whose generate this is
    prefilled, original = [], shared_prefill.generate_sharing_prompts

    def counting(model, input_ids=None, attention_mask=None, **kwargs):
        distinct = len(torch.unique(torch.cat([input_ids, attention_mask], dim=1), dim=0))
        prefilled.append((len(input_ids), distinct, next(model.parameters()).dtype))
        return original(model, input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    monkeypatch.setattr(shared_prefill, "generate_sharing_prompts", counting)
    from transformers import DynamicCache

    copied, select = [], DynamicCache.batch_select_indices
    monkeypatch.setattr(DynamicCache, "batch_select_indices",
                        lambda self, indices: copied.append(len(indices)) or select(self, indices))
    import smolalign.stages.generation_copy as generation_copy

    monkeypatch.setattr(generation_copy, "generate_sharing_prompts", counting)
    data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(8))
    recipe = write_recipe(grpo_recipe(tiny_dir, data, "chatml", max_completion_length=6, save_steps=2))
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert prefilled and all(rows > distinct and dtype == torch.bfloat16 for rows, distinct, dtype in prefilled)
    assert copied == [rows for rows, _, _ in prefilled]  # each generation's prompts read once, copied to its rows
