"""On a CPU that computes in bf16, TRL's trainers sample from a bfloat16 copy of the float32 policy, refreshed before
each generation (smolalign.stages.generation_copy): the copy is compared with the policy's weights cast by hand and
with a model loaded in bfloat16 from the same weights (greedy tokens), and a real GRPO run is watched generating in
bf16 while it trains float32 weights."""

import weakref

import pytest
import torch
from tiny_models import addition_prompts, grpo_recipe, write_jsonl

from smolalign.hardware import CPU_BF16_VARIABLE
from smolalign.stages.generation_copy import bf16_generation_copy, generation_model


def _accelerator(mixed_precision: str):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    return Accelerator(cpu=True, mixed_precision=mixed_precision)


@pytest.fixture
def policy(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)


def _greedy(model, input_ids):
    with torch.no_grad():
        return model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=12,
                              do_sample=False, pad_token_id=0)


def test_the_copy_holds_the_policys_current_weights_in_bf16(policy, tiny_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    accelerator, copies = _accelerator("bf16"), weakref.WeakKeyDictionary()
    copy = generation_model(policy, accelerator, copies)
    assert copy is not policy and {p.dtype for p in copy.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in policy.parameters()} == {torch.float32}  # the trained weights are untouched
    for (name, mine), original in zip(copy.named_parameters(), policy.parameters(), strict=True):
        assert torch.equal(mine, original.detach().to(torch.bfloat16)), name
    assert copy.model.rotary_emb.inv_freq.dtype == torch.float32  # as from_pretrained(dtype=bfloat16) keeps it

    # A training step moves the policy: the next generation sees the new weights, in the same copy.
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    assert generation_model(policy, accelerator, copies) is copy
    for mine, original in zip(copy.parameters(), policy.parameters(), strict=True):
        assert torch.equal(mine, original.detach().to(torch.bfloat16))

    # Independent reference: the moved weights saved and loaded in bfloat16 by transformers generate the same tokens.
    policy.save_pretrained(tmp_path / "moved")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "moved", dtype=torch.bfloat16)
    input_ids = torch.randint(3, policy.config.vocab_size, (3, 10), generator=torch.Generator().manual_seed(0))
    assert torch.equal(_greedy(copy, input_ids), _greedy(loaded, input_ids))


def test_the_policy_itself_generates_without_bf16_mixed_precision(policy):
    assert generation_model(policy, _accelerator("no"), {}) is policy


def test_the_policy_itself_generates_when_its_weights_are_bf16_already(policy):
    policy.to(torch.bfloat16)
    assert generation_model(policy, _accelerator("bf16"), {}) is policy


def test_a_grpo_run_samples_in_bf16_and_trains_float32_weights(monkeypatch, cli, write_recipe, tiny_dir, tmp_path):
    from transformers.generation.utils import GenerationMixin

    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    generated_with, original_generate = [], GenerationMixin.generate

    def recording_generate(self, *args, **kwargs):
        generated_with.append(next(self.parameters()).dtype)
        return original_generate(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", recording_generate)
    data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(8))
    recipe = write_recipe(grpo_recipe(tiny_dir, data, "chatml", max_completion_length=6, save_steps=2))
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert generated_with == [torch.bfloat16, torch.bfloat16]
    from safetensors import safe_open
    with safe_open(str(tmp_path / "run" / "model" / "model.safetensors"), "pt") as weights:
        assert {weights.get_slice(name).get_dtype() for name in weights.keys()} == {"F32"}


def test_trl_gets_its_own_function_back_and_nothing_changes_on_a_gpu():
    import trl.models.utils as trl_model_utils
    import trl.trainer.grpo_trainer as grpo

    before = grpo.unwrap_model_for_generation
    with bf16_generation_copy("cuda"):
        assert grpo.unwrap_model_for_generation is before
    with bf16_generation_copy("cpu"):
        assert grpo.unwrap_model_for_generation is not before
        assert trl_model_utils.unwrap_model_for_generation is grpo.unwrap_model_for_generation
    assert grpo.unwrap_model_for_generation is before and trl_model_utils.unwrap_model_for_generation is before
