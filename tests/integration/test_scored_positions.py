"""On a CPU, TRL's fused LM head and distillation divergence project only the positions they score
(smolalign.stages.scored_positions): the rows reaching TRL's kernels are counted, and the log-probabilities, their
gradients and the divergence are compared with the model's own full logits (independent of TRL's kernels)."""

import pytest
import torch

from smolalign.stages.scored_positions import scored_positions_only


@pytest.fixture
def tiny_model(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)


def _batch(vocab: int):
    torch.manual_seed(1)
    input_ids = torch.randint(3, vocab, (3, 20))
    labels = input_ids.clone()
    labels[:, :14] = -100  # a 14-token prompt, 6 scored completion tokens per row...
    labels[2, 17:] = -100  # ...except the last row's, cut short
    return input_ids, labels


def _row_counter(monkeypatch, module, name: str) -> list[int]:
    rows = []
    original = getattr(module, name)

    class Counting:
        @staticmethod
        def apply(hidden, *args):
            rows.append(hidden.shape[0])
            return original.apply(hidden, *args)

    monkeypatch.setattr(module, name, Counting)
    return rows


def _fused_log_probs(model, input_ids, labels):
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model)
    out = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
    return out.log_probs, out.label_mask


def test_fused_lm_head_projects_only_the_labelled_positions_on_a_cpu(monkeypatch, tiny_model):
    import trl.trainer.utils as trl_utils

    rows = _row_counter(monkeypatch, trl_utils, "_ChunkedLogProbFunction")
    input_ids, labels = _batch(tiny_model.config.vocab_size)
    with scored_positions_only("cpu"):
        log_probs, mask = _fused_log_probs(tiny_model, input_ids, labels)
        log_probs.sum().backward()
    compact_grad = tiny_model.lm_head.weight.grad.clone()
    tiny_model.zero_grad()

    scored = int((labels[:, 1:] != -100).sum())
    assert scored == 6 + 6 + 3  # by hand: labels 14-19 of rows 0 and 1, 14-16 of row 2 (the shift drops label 0)
    assert rows == [scored]

    # The reference: the model's own logits over every position, log-softmax, the label's entry.
    logits = tiny_model(input_ids=input_ids).logits[:, :-1].float()
    target = labels[:, 1:]
    expected = torch.log_softmax(logits, -1).gather(-1, target.clamp(min=0)[..., None])[..., 0]
    assert torch.equal(mask, target != -100)
    torch.testing.assert_close(log_probs[mask], expected[mask], atol=1e-5, rtol=1e-5)
    assert torch.all(log_probs[~mask] == 0)
    expected[mask].sum().backward()
    torch.testing.assert_close(compact_grad, tiny_model.lm_head.weight.grad, atol=1e-5, rtol=1e-4)


def test_without_it_trl_projects_every_position_on_a_cpu(monkeypatch, tiny_model):
    import trl.trainer.utils as trl_utils

    rows = _row_counter(monkeypatch, trl_utils, "_ChunkedLogProbFunction")
    input_ids, labels = _batch(tiny_model.config.vocab_size)
    _fused_log_probs(tiny_model, input_ids, labels)
    assert rows == [3 * 19]


def test_distillation_divergence_projects_only_the_completion_positions_on_a_cpu(monkeypatch):
    import trl.trainer.distillation_trainer as distillation

    rows = _row_counter(monkeypatch, distillation, "ChunkedDivergenceFunction")
    torch.manual_seed(2)
    student_h, teacher_h = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    student_w, teacher_w = torch.randn(30, 8, requires_grad=True), torch.randn(30, 8)
    completion = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])

    def loss(beta):
        return distillation._chunked_divergence_loss(student_h, teacher_h, student_w, teacher_w, completion, beta)[0]

    with scored_positions_only("cpu"):
        compact = loss(0.0)
    assert rows == [8]
    # Forward KL(teacher || student) per completion position, averaged, from the full logits.
    p_t = torch.log_softmax(teacher_h @ teacher_w.T, -1)
    p_s = torch.log_softmax(student_h @ student_w.T, -1)
    per_position = (p_t.exp() * (p_t - p_s)).sum(-1)
    torch.testing.assert_close(compact, per_position[completion.bool()].mean(), atol=1e-5, rtol=1e-5)


def test_nothing_changes_on_a_gpu_and_trl_is_restored_after():
    import trl.trainer.distillation_trainer as distillation
    import trl.trainer.utils as trl_utils

    before = (trl_utils._use_triton, distillation._use_triton)
    with scored_positions_only("cuda"):
        assert (trl_utils._use_triton, distillation._use_triton) == before
    with scored_positions_only("cpu"):
        assert trl_utils._use_triton(torch.device("cpu")) and distillation._use_triton(torch.device("cpu"))
        with scored_positions_only("cpu"):  # nested (a sweep inside a run): still TRL's test underneath
            assert trl_utils._use_triton(torch.device("cpu"))
    assert (trl_utils._use_triton, distillation._use_triton) == before


def test_an_sft_run_from_the_cli_projects_only_the_tokens_it_trains(monkeypatch, cli, write_recipe, tiny_dir, tmp_path):
    """SFT scores through TRL's fused LM head on whole rows (GRPO on a CPU scores its answers apart from their shared
    prompts, so a GRPO run cannot show this): each call projects exactly the batch's labelled positions."""
    import trl.trainer.utils as trl_utils
    from tiny_models import chat_rows, write_jsonl

    import smolalign.stages.sft

    rows = _row_counter(monkeypatch, trl_utils, "_ChunkedLogProbFunction")
    labelled, positions = [], []
    original = smolalign.stages.sft.load_model

    def load(*args, **kwargs):
        model = original(*args, **kwargs)

        def count(module, args, kwargs):
            if kwargs.get("labels") is not None:
                labelled.append(int((kwargs["labels"][:, 1:] != -100).sum()))
                positions.append(kwargs["labels"][:, 1:].numel())

        model.register_forward_pre_hook(count, with_kwargs=True)
        return model

    monkeypatch.setattr(smolalign.stages.sft, "load_model", load)
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 2,
                                     "learning_rate": 1e-3, "logging_steps": 1, "save_strategy": "no",
                                     "gradient_checkpointing": False}})
    code, _, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert len(rows) == 2 and rows == labelled, (rows, labelled)
    assert all(0 < n < total for n, total in zip(labelled, positions, strict=True)), (labelled, positions)
