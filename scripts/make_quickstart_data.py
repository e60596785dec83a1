"""Writes the quickstart's data, all on one task: which of two 2-digit numbers is larger ("Which is larger, 47 or
52?", answer 52). The bundled SmolLM2-135M-Instruct answers it right about a quarter of the time before any
training (28% of 40 questions, no_think, 48 tokens: it mostly rambles), which leaves every stage something to gain.

- arithmetic.jsonl: SFT chats, half in think mode (a one-line comparison of the digits in a <think> block, then the
  answer) and half in no_think mode (the bare answer). Modes are chosen both ways SmolLM3 data does it: a /think or
  /no_think flag in the system message, or a per-row chat_template_kwargs.
- arithmetic_prompts.jsonl: questions alone, the prompts the preference stage generates pairs for;
- arithmetic_rl.jsonl: questions with their answer in a `solution` column, the GRPO prompts;
- arithmetic_distill.jsonl: questions with a reference answer as `completion`, the distillation's off-policy share;
- arithmetic_eval.jsonl: held-out questions with their `solution`, for `smolalign eval` of each stage. They are
  drawn first, and no other file holds the same two numbers, in either order or wording.
- arithmetic_graded.jsonl: the GRPO questions with a system message asking for a one-line answer, the prompts the
  bundled model answers several times for graded pairs (quickstart/po_graded).
- arithmetic_decimals.jsonl and arithmetic_eval_decimals.jsonl: which of two decimals with the same whole part is
  larger, one with one decimal digit and one with two ("Which is larger, 8.5 or 8.13?", answer 8.5: the longer one is
  not the larger), with the answer in `solution`: the quickstart preference stage's prompts and their held-out
  questions. SFT teaches whole numbers only and leaves room here (about three answers in four right after SFT,
  no_think), which preference pairs checked by math accuracy can close.
- arithmetic_three.jsonl and arithmetic_eval_three.jsonl: which of three 2-digit numbers is largest, with the answer
  in `solution`: the quickstart GRPO's prompts and their held-out questions. SFT teaches two numbers only and leaves
  room here (about 0.8 right after SFT, no_think), which GRPO can close.

    python scripts/make_quickstart_data.py [--rows 400] [--prompts 64] [--rl-prompts 128] [--eval-prompts 96] [--seed 0]
"""

import argparse
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "recipes" / "quickstart" / "data" / "arithmetic.jsonl"
PROMPTS_OUT = OUT.with_name("arithmetic_prompts.jsonl")
RL_OUT = OUT.with_name("arithmetic_rl.jsonl")
DISTILL_OUT = OUT.with_name("arithmetic_distill.jsonl")
EVAL_OUT = OUT.with_name("arithmetic_eval.jsonl")
GRADED_OUT = OUT.with_name("arithmetic_graded.jsonl")
THREE_OUT = OUT.with_name("arithmetic_three.jsonl")
THREE_EVAL_OUT = OUT.with_name("arithmetic_eval_three.jsonl")
DECIMALS_OUT = OUT.with_name("arithmetic_decimals.jsonl")
DECIMALS_EVAL_OUT = OUT.with_name("arithmetic_eval_decimals.jsonl")
GRADED_SYSTEM = "Reply with the answer only, for example: The larger is 52."
"""The bundled model before SFT rambles past any small token budget; asked this way it mostly answers in a line."""
SYSTEMS = ["You are a careful calculator.", "Answer arithmetic questions.", "You help with numbers."]
THREE_QUESTIONS = ["Which is the largest of {a}, {b} and {c}?", "Which is larger, {a}, {b} or {c}?",
                   "What is the largest of {a}, {b} and {c}?", "Which number is biggest: {a}, {b} or {c}?"]
QUESTIONS = ["Which is larger, {a} or {b}?", "Which number is bigger: {a} or {b}?", "What is the larger of {a} and {b}?",
             "Which is greater, {a} or {b}?"]


def distinct_numbers(rng: random.Random, count: int, excluded: set) -> list[int]:
    """`count` different 2-digit numbers whose set is not in `excluded` (sets are unordered)."""
    while True:
        numbers = rng.sample(range(10, 100), count)
        if frozenset(numbers) not in excluded:
            return numbers


def pair(rng: random.Random, excluded: set) -> tuple[int, int]:
    """Two different 2-digit numbers whose pair is not in `excluded`."""
    a, b = distinct_numbers(rng, 2, excluded)
    return a, b


def three_questions(rng: random.Random, count: int, excluded: set) -> list[dict]:
    """`count` questions on three different 2-digit numbers whose set is not in `excluded` (each one added to it),
    with the largest as their `solution`."""
    rows = []
    while len(rows) < count:
        numbers = distinct_numbers(rng, 3, excluded)
        excluded.add(frozenset(numbers))
        question = rng.choice(THREE_QUESTIONS).format(a=numbers[0], b=numbers[1], c=numbers[2])
        rows.append({"prompt": [{"role": "user", "content": question}], "solution": str(max(numbers))})
    return rows


def decimal_questions(rng: random.Random, count: int, excluded: set) -> list[dict]:
    """`count` questions on two decimals with the same whole part, one digit after the point against two (the
    second not ending in 0), in a random order, not in `excluded` (each one added to it); the larger in `solution`."""
    rows = []
    while len(rows) < count:
        whole, short, long = rng.randint(1, 9), rng.randint(1, 9), rng.randint(11, 99)
        if long % 10 == 0:
            continue
        numbers = [f"{whole}.{short}", f"{whole}.{long}"]
        if frozenset(numbers) in excluded:
            continue
        excluded.add(frozenset(numbers))
        rng.shuffle(numbers)
        question = rng.choice(QUESTIONS).format(a=numbers[0], b=numbers[1])
        rows.append({"prompt": [{"role": "user", "content": question}], "solution": max(numbers, key=float)})
    return rows


def reasoning(a: int, b: int) -> str:
    big, small = max(a, b), min(a, b)
    if big // 10 != small // 10:
        return f"Tens: {big // 10} > {small // 10}, so {big} > {small}."
    return f"Same tens; ones: {big % 10} > {small % 10}, so {big} > {small}."


def chat(rng: random.Random, excluded: set, think: bool, by_flag: bool) -> dict:
    a, b = pair(rng, excluded)
    return chat_about(rng, a, b, think, by_flag)


def chat_about(rng: random.Random, a: int, b: int, think: bool, by_flag: bool) -> dict:
    question = rng.choice(QUESTIONS).format(a=a, b=b)
    answer = f"The larger is {max(a, b)}."
    content = f"<think>\n{reasoning(a, b)}\n</think>\n{answer}" if think else answer
    system = rng.choice(SYSTEMS)
    messages = [{"role": "system", "content": f"{system} {'/think' if think else '/no_think'}" if by_flag else system},
                {"role": "user", "content": question}, {"role": "assistant", "content": content}]
    return {"messages": messages, "chat_template_kwargs": {} if by_flag else {"enable_thinking": think},
            "solution": str(max(a, b))}


def write(path: Path, records) -> None:
    with path.open("w") as stream:
        stream.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    print(f"wrote {len(records)} rows to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--rl-prompts", type=int, default=128)
    parser.add_argument("--eval-prompts", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    held_out: set = set()
    eval_rng, rows = random.Random(args.seed + 4), []
    for _ in range(args.eval_prompts):
        a, b = pair(eval_rng, held_out)
        held_out.add(frozenset((a, b)))
        record = chat_about(eval_rng, a, b, think=False, by_flag=False)
        rows.append({"prompt": [record["messages"][1]], "solution": record["solution"]})
    write(EVAL_OUT, rows)
    rng = random.Random(args.seed)
    write(OUT, [{k: v for k, v in chat(rng, held_out, think=i % 2 == 0, by_flag=i % 4 < 2).items() if k != "solution"}
                for i in range(args.rows)])
    prompt_rng = random.Random(args.seed + 1)
    write(PROMPTS_OUT, [{"prompt": [chat(prompt_rng, held_out, False, False)["messages"][1]]}
                        for _ in range(args.prompts)])
    rl_rng = random.Random(args.seed + 2)
    rl = [chat(rl_rng, held_out, False, False) for _ in range(args.rl_prompts)]
    write(RL_OUT, [{"prompt": [r["messages"][1]], "solution": r["solution"]} for r in rl])
    distill_rng = random.Random(args.seed + 3)
    distill = [chat(distill_rng, held_out, False, False) for _ in range(args.rl_prompts)]
    write(DISTILL_OUT, [{"prompt": [r["messages"][1]], "completion": r["messages"][2]["content"]} for r in distill])
    write_graded()
    three: set = set()
    write(THREE_EVAL_OUT, three_questions(random.Random(args.seed + 5), args.eval_prompts, three))
    write(THREE_OUT, three_questions(random.Random(args.seed + 6), args.rl_prompts * 2, three))
    decimals: set = set()
    write(DECIMALS_EVAL_OUT, decimal_questions(random.Random(args.seed + 7), args.eval_prompts, decimals))
    write(DECIMALS_OUT, decimal_questions(random.Random(args.seed + 8), args.rl_prompts * 2, decimals))


def write_graded() -> None:
    """The GRPO prompts again, each with a system message asking for a one-line answer: the prompts the bundled
    model answers several times for graded pairs (quickstart/po_graded)."""
    rows = [json.loads(line) for line in RL_OUT.read_text().splitlines()]
    with GRADED_OUT.open("w") as stream:
        for row in rows:
            prompt = [{"role": "system", "content": GRADED_SYSTEM}, *row["prompt"]]
            stream.write(json.dumps({"prompt": prompt, "solution": row["solution"]}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} prompts with a system message and solutions to {GRADED_OUT}")


if __name__ == "__main__":
    main()
