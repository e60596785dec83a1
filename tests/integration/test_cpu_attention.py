"""smolalign's attention under CPU autocast (smolalign/models/cpu_attention.py) is transformers' eager attention up
to 512 keys and its SDPA above, with one mask for both: a padded batch gets, bit for bit, the logits each of
transformers' own implementations gives it (at its real tokens), and packed documents longer together than 512 tokens keep the logits
they have alone (the block-diagonal mask reaches SDPA)."""

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from smolalign.models import cpu_attention


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("attention")
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=2048)).save_pretrained(folder)
    return {name: AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation=name).eval()
            for name in ("eager", "sdpa", cpu_attention.register())}


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    """Which of transformers' implementations each attention call of smolalign's ran."""
    import transformers.integrations.sdpa_attention as sdpa
    import transformers.models.llama.modeling_llama as llama

    seen: list[str] = []
    for module, name in ((llama, "eager_attention_forward"), (sdpa, "sdpa_attention_forward")):
        original = getattr(module, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            seen.append(_name.split("_")[0])
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    return seen


@pytest.mark.parametrize(("length", "same_as"), [(100, "eager"), (512, "eager"), (513, "sdpa"), (700, "sdpa")])
def test_a_padded_batch_gets_the_logits_of_the_implementation_for_its_length(models, calls, length, same_as):
    ids = torch.randint(0, 96, (2, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, : length // 3] = 0
    with torch.no_grad():
        ours = models[cpu_attention.NAME](input_ids=ids, attention_mask=mask).logits
        assert calls == [same_as] * 2  # one call per layer, before the reference models add theirs
        theirs = {name: models[name](input_ids=ids, attention_mask=mask).logits for name in ("eager", "sdpa")}
    real = [(0, slice(None)), (1, slice(length // 3, None))]  # a padding position attends to nothing: no logits
    assert all(torch.equal(ours[row, at], theirs[same_as][row, at]) for row, at in real)
    other = "sdpa" if same_as == "eager" else "eager"
    # The two differ in rounding: the comparison can tell them apart.
    assert not all(torch.equal(ours[row, at], theirs[other][row, at]) for row, at in real)


def test_packed_documents_longer_than_the_eager_limit_keep_their_own_logits(models, calls):
    lengths = (300, 400)
    documents = [torch.randint(0, 96, (n,), generator=torch.Generator().manual_seed(n)) for n in lengths]
    model = models[cpu_attention.NAME]
    with torch.no_grad():
        packed = model(input_ids=torch.cat(documents)[None],
                       position_ids=torch.cat([torch.arange(n) for n in lengths])[None],
                       use_cache=False).logits[0]  # as in training: with a cache transformers drops the packing
        assert calls == ["sdpa"] * 2
        alone = [model(input_ids=d[None]).logits[0] for d in documents]
    assert calls[2:] == ["eager"] * 4
    assert torch.allclose(packed[:300], alone[0], atol=1e-5, rtol=0)
    assert torch.allclose(packed[300:], alone[1], atol=1e-5, rtol=0)
