"""Packed documents do not see each other: in the forward SFTTrainer makes on a padding-free packed batch (position
ids restarting at each document, no attention mask), each document's logits equal its logits alone. On CPU this
holds only because transformers builds a block-diagonal mask from the position ids when no cache is in use, so TRL's
forward passing `use_cache=False` is pinned here too."""

import pytest
import torch

LENGTHS = (7, 12, 5)


@pytest.fixture(scope="module")
def packed_call(tiny_dir, tmp_path_factory):
    """(model, the keyword arguments of the forward SFTTrainer.compute_loss made on one packed row, the documents)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    # Loaded as the CPU recipes load it: no attn_implementation, so transformers picks its default.
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    documents = [torch.randint(3, len(tokenizer), (n,), generator=generator) for n in LENGTHS]
    row = {"input_ids": torch.cat(documents).tolist(), "labels": torch.cat(documents).tolist(),
           "seq_lengths": list(LENGTHS)}
    config = SFTConfig(output_dir=str(tmp_path_factory.mktemp("out")), use_cpu=True, bf16=False, report_to="none",
                       packing=True, max_length=64, per_device_train_batch_size=1,
                       dataset_kwargs={"skip_prepare_dataset": True})
    trainer = SFTTrainer(model=model, args=config, train_dataset=Dataset.from_list([row]), processing_class=tokenizer)

    calls = []
    forward = model.forward

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return forward(*args, **kwargs)

    model.eval()
    model.forward = spy
    try:
        with torch.no_grad():
            trainer.compute_loss(model, trainer.data_collator([row]))
    finally:
        model.forward = forward
    assert calls, "SFTTrainer.compute_loss did not call the model"
    return model, calls, documents


def test_trl_sft_forward_runs_without_a_kv_cache(packed_call):
    model, calls, _ = packed_call
    for kwargs in calls:
        assert kwargs.get("use_cache") is False, sorted(kwargs)
        assert kwargs.get("past_key_values") is None
        assert "attention_mask" not in kwargs
        assert kwargs["position_ids"][0].tolist() == [i for n in LENGTHS for i in range(n)]


def test_cpu_recipes_get_sdpa(packed_call):
    model, _, _ = packed_call
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_packed_documents_have_the_logits_they_have_alone(packed_call, implementation):
    model, calls, documents = packed_call
    model.set_attn_implementation(implementation)
    inputs = {k: v for k, v in calls[0].items() if k not in ("labels", "fused_lm_head")}
    try:
        with torch.no_grad():
            packed = model(**inputs).logits[0]
            alone = [model(input_ids=d[None]).logits[0] for d in documents]
            # The same call with a cache: transformers skips the block-diagonal mask, and documents leak.
            cached = model(**{**inputs, "use_cache": True}).logits[0]
    finally:
        model.set_attn_implementation("sdpa")
    starts = [sum(LENGTHS[:i]) for i in range(len(LENGTHS))]
    for start, n, expected in zip(starts, LENGTHS, alone, strict=True):
        assert torch.allclose(packed[start:start + n], expected, atol=1e-5, rtol=0)
    leak = max((cached[s:s + n] - e).abs().max().item() for s, n, e in zip(starts, LENGTHS, alone, strict=True))
    assert leak > 1e-3
