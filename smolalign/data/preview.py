"""`smolalign data preview`: training rows exactly as the trainer sees them, after templating, masking, packing
and TRL's own collator (which derives position ids from packed lengths and never trains a document's first token)."""

import json
import sys
from typing import Any


def collated_rows(dataset, tokenizer, packing: str | None, n: int) -> list[dict[str, Any]]:
    """The first `n` rows, each passed alone through the SFT collator the trainer uses."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    padding_free = packing in ("bfd", "bfd_split")
    collator = DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id, padding_free=padding_free,
                                               return_position_ids=True)
    rows = []
    for index in range(min(n, len(dataset))):
        batch = collator([dataset[index]])
        ids = batch["input_ids"][0].tolist()
        labels = batch["labels"][0].tolist()
        positions = batch["position_ids"][0].tolist()
        rows.append({
            "input_ids": ids,
            "tokens": [tokenizer.decode([i]) for i in ids],
            "trained": [label != -100 for label in labels],
            "position_ids": positions,
        })
    return rows


def print_json(rows: list[dict]) -> None:
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


def print_readable(rows: list[dict], color: bool) -> None:
    """Each row's text with trained tokens highlighted (green, or inside ⟦ ⟧ without color) and document starts
    marked ¶n."""
    on, off = ("\033[32m", "\033[0m") if color else ("⟦", "⟧")
    for number, row in enumerate(rows):
        trained = sum(row["trained"])
        documents = sum(1 for p in row["position_ids"] if p == 0)
        print(f"── example {number}: {len(row['input_ids'])} tokens, {trained} trained, {documents} document(s)")
        out, inside, document = [], False, 0
        for token, is_trained, position in zip(row["tokens"], row["trained"], row["position_ids"], strict=True):
            if position == 0:
                if inside:
                    out.append(off)
                    inside = False
                document += 1
                if documents > 1:
                    out.append(f"¶{document} ")
            if is_trained != inside:
                out.append(on if is_trained else off)
                inside = is_trained
            out.append(token)
        if inside:
            out.append(off)
        print("".join(out))


def preference_rows(dataset, tokenizer, n: int) -> list[dict[str, Any]]:
    """The first `n` preference rows: the prompt's tokens and each answer's (chosen and rejected, or the
    completion and its label for KTO); only answer tokens are scored."""
    rows = []
    for index in range(min(n, len(dataset))):
        row = dataset[index]
        out: dict[str, Any] = {}
        for key in ("prompt_ids", "chosen_ids", "rejected_ids", "completion_ids"):
            if key in row:
                out[key] = row[key]
                out[key.replace("_ids", "_tokens")] = [tokenizer.decode([i]) for i in row[key]]
        if "label" in row:
            out["label"] = row["label"]
        rows.append(out)
    return rows


def print_preference_readable(rows: list[dict], color: bool) -> None:
    """Each answer after its prompt, the scored answer tokens highlighted (green, or inside ⟦ ⟧ without color)."""
    on, off = ("\033[32m", "\033[0m") if color else ("⟦", "⟧")
    for number, row in enumerate(rows):
        prompt = "".join(row["prompt_tokens"])
        answers = [(name, row[f"{name}_tokens"]) for name in ("chosen", "rejected", "completion") if f"{name}_ids" in row]
        sizes = ", ".join(f"{name} {len(tokens)}" for name, tokens in answers)
        label = f", label {'desirable' if row['label'] else 'undesirable'}" if "label" in row else ""
        print(f"── example {number}: prompt {len(row['prompt_tokens'])} tokens, {sizes}{label}")
        for name, tokens in answers:
            print(f"[{name}] {prompt}{on}{''.join(tokens)}{off}")
