"""Writes the quickstart distillation's student: a small Llama (4 layers, hidden 256, ~3.4M parameters), randomly
initialised, with its own byte-level BPE tokenizer trained on the quickstart data (at most 2,048 tokens; about 950
come out of this data). Its tokenizer differs from the teacher's (SmolLM2's 49,152 tokens), so
`smolalign rl quickstart/gold` runs GOLD with ULD.

    python scripts/make_quickstart_student.py [--out runs/quickstart/student-init] [--vocab 2048] [--seed 0]
"""

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "recipes" / "quickstart" / "data"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def texts() -> list[str]:
    """Every string of the quickstart data, and the ChatML scaffolding around them."""
    out = []
    for path in sorted(DATA.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            for value in row.values():
                if isinstance(value, str):
                    out.append(value)
                elif isinstance(value, list):
                    out += [m["content"] for m in value if isinstance(m, dict) and isinstance(m.get("content"), str)]
    return out + ["system\nuser\nassistant\n<think>\n\n</think>\n"] * 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "quickstart" / "student-init")
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts(), trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=SPECIAL_TOKENS,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None)
    torch.manual_seed(args.seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
                         tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    count = sum(p.numel() for p in model.parameters())
    print(f"wrote a {count / 1e6:.1f}M-parameter student with a {len(tokenizer):,}-token tokenizer to {args.out}")


if __name__ == "__main__":
    main()
