"""Writes the data of the tool-use quickstart: products of two 3-digit numbers ("What is 347 × 582?"), which the
bundled SmolLM2-135M-Instruct cannot do in its head and can do with the python tool.

- tools_sft.jsonl: tool-use demonstrations, no_think: the question, the model's call of the python tool
  (`print(347 * 582)`), the tool's result, then the answer ("The answer is 201954."). Each row carries the tool's
  schema in a `tools` column, the one `smolalign rl` and `smolalign eval --tools python` show the model, so the
  system turn is rendered the same in every stage.
- tools_rl.jsonl: questions with their answer in `solution`, GRPO's prompts.
- tools_eval.jsonl: held-out questions with their `solution`, for `smolalign eval --tools python`. They are drawn
  first, and no other file holds the same two numbers, in either order.

    python scripts/make_tool_data.py [--sft 128] [--rl 128] [--eval 64] [--seed 0]
"""

import argparse
import json
import random
from pathlib import Path

from transformers.utils import get_json_schema

from smolalign.tools.python_tool import PythonTool

OUT = Path(__file__).resolve().parent.parent / "recipes" / "quickstart" / "data"
QUESTIONS = ("What is {a} × {b}?", "What is {a} * {b}?", "Compute {a} × {b}.", "Multiply {a} by {b}.",
             "What is the product of {a} and {b}?", "Calculate {a} * {b}.")


def question(rng: random.Random, a: int, b: int) -> str:
    return rng.choice(QUESTIONS).format(a=a, b=b)


def pairs(rng: random.Random, count: int, taken: set) -> list[tuple[int, int]]:
    out = []
    while len(out) < count:
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        if (a, b) in taken or (b, a) in taken:
            continue
        taken.add((a, b))
        out.append((a, b))
    return out


def demonstration(rng: random.Random, a: int, b: int, schema: dict) -> dict:
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": f"print({a} * {b})"}}}
    return {"messages": [{"role": "user", "content": question(rng, a, b)},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "name": "python", "content": f"{a * b}\n"},
                         {"role": "assistant", "content": f"The answer is {a * b}."}],
            "tools": [schema]}


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"wrote {len(rows)} rows to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", type=int, default=128)
    parser.add_argument("--rl", type=int, default=128)
    parser.add_argument("--eval", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng, taken = random.Random(args.seed), set()
    schema = get_json_schema(PythonTool(10.0, 2000).function())
    held_out = pairs(rng, args.eval, taken)  # first, so that no training file holds them
    write(OUT / "tools_eval.jsonl", [{"prompt": question(rng, a, b), "solution": str(a * b)} for a, b in held_out])
    write(OUT / "tools_sft.jsonl", [demonstration(rng, a, b, schema) for a, b in pairs(rng, args.sft, taken)])
    write(OUT / "tools_rl.jsonl", [{"prompt": question(rng, a, b), "solution": str(a * b)}
                                   for a, b in pairs(rng, args.rl, taken)])


if __name__ == "__main__":
    main()
