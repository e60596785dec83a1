"""Packing does not leak across documents: the loss of a packed, padding-free batch (as TRL's collator builds it)
equals the token-weighted mean of the same documents' losses computed one by one without packing."""

import pytest
import torch
from recipe_runs import run_of
from tiny_models import build_model, build_tokenizer, chat_rows, write_jsonl

from smolalign.data.prepare import prepare_sft_data
from smolalign.models.load import load_tokenizer


@pytest.fixture(scope="session")
def tiny_smollm3_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny-smollm3")
    build_model(directory, build_tokenizer(directory), arch="smollm3", layers=4)
    return directory


def packed_data(model_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = run_of({"model": {"source": str(model_dir)}, "data": {"sources": [{"path": str(data)}]},
                              "train": {"max_length": 512, "packing": "bfd"}}, "sft", "test")
    tokenizer, template = load_tokenizer(recipe.recipe.model, "smollm3")
    return prepare_sft_data(recipe, tokenizer, template, use_cache=False).train, tokenizer


def per_document_losses(model, rows) -> float:
    """Token-weighted mean of every document's own loss, each document run alone, unpacked."""
    total, count = 0.0, 0
    for row in rows:
        start = 0
        for length in row["seq_lengths"]:
            ids = torch.tensor([row["input_ids"][start:start + length]])
            labels = torch.tensor([row["labels"][start:start + length]])
            n = int((labels[0, 1:] != -100).sum())  # targets after the shift inside one document
            if n:
                total += model(input_ids=ids, labels=labels, use_cache=False).loss.item() * n
                count += n
            start += length
    return total / count


@pytest.mark.parametrize("arch", ["llama", "smollm3"])
def test_packed_loss_equals_weighted_per_document_loss(arch, tiny_dir, tiny_smollm3_dir, tmp_path):
    from transformers import AutoModelForCausalLM
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    model_dir = tiny_dir if arch == "llama" else tiny_smollm3_dir
    dataset, tokenizer = packed_data(model_dir, tmp_path)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa").eval()
    collator = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id, padding_free=True)
    multi = [i for i in range(len(dataset)) if len(dataset[i]["seq_lengths"]) >= 3]
    assert multi, "the fixture should pack several documents into one row"
    rows = [dataset[i] for i in multi[:2]]
    batch = collator(rows)
    assert "attention_mask" not in batch
    with torch.no_grad():
        packed = model(**batch, use_cache=False).loss.item()
        expected = per_document_losses(model, rows)
    assert abs(packed - expected) / expected < 1e-5

    # Without position ids the same flat sequence attends across documents and the loss moves: the check has teeth.
    with torch.no_grad():
        leaky = model(input_ids=batch["input_ids"], labels=batch["labels"], use_cache=False).loss.item()
    assert abs(leaky - expected) / expected > 1e-4


def test_trainer_loss_on_a_packed_batch_matches_per_document_losses(tiny_dir, tmp_path):
    """The same equality through SFTTrainer.compute_loss, the code path training really takes."""
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    dataset, tokenizer = packed_data(tiny_dir, tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    config = SFTConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none", packing=True,
                       max_length=512, per_device_train_batch_size=2, dataset_kwargs={"skip_prepare_dataset": True})
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    rows = [dataset[i] for i in range(2)]
    batch = trainer.data_collator(rows)
    model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(model, batch).item()
        expected = per_document_losses(model, rows)
    assert abs(loss - expected) / expected < 1e-5
