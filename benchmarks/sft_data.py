"""SFT data preparation throughput: smolalign's tokenize + mask + check + pack against TRL's own SFTTrainer dataset
preparation, on the same rows, tokenizer and template, measured in the same run. Also packing efficiency.

    python benchmarks/sft_data.py [--rows 3000] [--max-length 2048] [--repeats 3] [--tokenizer smollm2-135m-instruct]

Prints tokens/s for both, their ratio (target >= 1.0) and the bfd fill rate (share of packed capacity holding real
tokens; padding-free batches hold no pad at all, so this is the share of non-pad tokens; target >= 0.99).
"""

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

# This file's folder comes first on sys.path when it runs as a script, where benchmarks/rewards.py would shadow the
# `rewards` package that smolalign imports: the folder goes last.
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

WORDS = ("the of and to in is that it for on with as was by this be are from at or an have not which but they one "
         "all were we when there can more if will would each about how up out them then so some her these two like "
         "into time has look number way could people my than first water been call who oil its now find long down "
         "day did get come made may part sum product answer step check result therefore hence equals value").split()


def conversations(n: int, seed: int = 0) -> list[dict]:
    """Synthetic multi-turn chats, half in think mode, answer lengths spread like real SFT data (20-400 words)."""
    rng = random.Random(seed)

    def words(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))

    rows = []
    for i in range(n):
        think = i % 2 == 0
        messages = [{"role": "system", "content": words(3, 20) + (" /think" if think else " /no_think")}]
        for _ in range(rng.randint(1, 3)):
            answer = words(20, 250)
            if think:
                answer = f"<think>\n{words(20, 150)}\n</think>\n{answer}"
            messages += [{"role": "user", "content": words(5, 60) + "?"}, {"role": "assistant", "content": answer}]
        rows.append({"messages": messages, "chat_template_kwargs": {"enable_thinking": think}})
    return rows


def trl_prepare(dataset, tokenizer, max_length: int):
    """TRL 1.16's SFTTrainer dataset preparation, called as the trainer calls it (assistant-only, bfd packing)."""
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(output_dir=tempfile.mkdtemp(prefix="bench-sft-"), max_length=max_length, packing=True, packing_strategy="bfd",
                     assistant_only_loss=True, use_cpu=True, bf16=False, report_to="none")
    trainer_state = SimpleNamespace(_tokenizer=tokenizer, chat_template=None, completion_only_loss=False)
    return SFTTrainer._prepare_dataset(trainer_state, dataset, tokenizer, args, True, None, "train")


def smolalign_prepare(dataset, tokenizer, template, max_length: int):
    from smolalign.data.encode import Encoder, LossMask
    from smolalign.data.mixture import ORIGIN
    from smolalign.data.prepare import Layout, prepare_split

    dataset = dataset.add_column(ORIGIN, [f"bench#{i}" for i in range(len(dataset))])
    encoder = Encoder(tokenizer, template, "messages", LossMask(), {})
    layout = Layout(max_length=max_length, packing="bfd", truncation_mode="keep_start", loss=LossMask())
    return prepare_split(dataset, encoder, layout, "fail")


def best_time(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokenizer", default="smollm2-135m-instruct", help="any smolalign model source")
    args = parser.parse_args()

    import datasets

    from smolalign.models.load import load_tokenizer
    from smolalign.recipe.schema import ModelSection

    datasets.disable_progress_bars()
    datasets.disable_caching()
    tokenizer, template = load_tokenizer(ModelSection(source=args.tokenizer), "smollm3")
    dataset = datasets.Dataset.from_list(conversations(args.rows))

    trl_best, trl_median, trl_rows = best_time(lambda: trl_prepare(dataset, tokenizer, args.max_length), args.repeats)
    ours_best, ours_median, (ours_rows, stats) = best_time(
        lambda: smolalign_prepare(dataset, tokenizer, template, args.max_length), args.repeats)

    tokens = stats["tokens"]
    trl_tokens = sum(len(ids) for ids in trl_rows["input_ids"])
    ours_tokens = sum(len(ids) for ids in ours_rows["input_ids"])
    trl_trained = sum(sum(1 for x in labels if x != -100) for labels in trl_rows["labels"])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, python {platform.python_version()}")
    print(f"data: {args.rows} conversations, {tokens:,} tokens, tokenizer {args.tokenizer}, template smollm3, "
          f"max_length {args.max_length}, bfd packing, assistant-only loss")
    print(f"TRL SFTTrainer preparation: {tokens / trl_best:,.0f} tokens/s (best of {args.repeats}; median "
          f"{tokens / trl_median:,.0f})")
    print(f"smolalign preparation:      {tokens / ours_best:,.0f} tokens/s (best of {args.repeats}; median "
          f"{tokens / ours_median:,.0f})")
    print(f"throughput ratio smolalign / TRL: {trl_best / ours_best:.2f} (target >= 1.0)")
    print(f"packing efficiency (bfd fill, non-pad share): smolalign {stats['fill']:.4f}, "
          f"TRL {trl_tokens / (len(trl_rows) * args.max_length):.4f} (target >= 0.99)")
    print(f"same packed tokens: {ours_tokens == trl_tokens}; trained tokens smolalign {stats['trained_tokens']:,} vs "
          f"TRL {trl_trained:,} (TRL's collator-free count includes each document's first label)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
