"""Writes recipes/quickstart/data/arithmetic.jsonl: small arithmetic chats, half in think mode (worked reasoning in a
<think> block, then the answer) and half in no_think mode (the bare answer). Modes are chosen both ways SmolLM3
data does it: a /think or /no_think flag in the system message, or a per-row chat_template_kwargs.

Also writes arithmetic_prompts.jsonl: questions alone (another seed, so mostly unseen in SFT), the prompts the
quickstart's preference stage generates pairs for; and arithmetic_rl.jsonl: questions with their answer in a
`solution` column (a third seed), the prompts of the quickstart's GRPO stage; and arithmetic_distill.jsonl:
questions with a reference answer as `completion`, for the distillation stage's off-policy share; and
arithmetic_eval.jsonl: held-out questions with their `solution` (a fifth seed), none of which appears in any other
file, for `smolalign eval` of each quickstart stage; and arithmetic_graded.jsonl: the GRPO questions with a system
message asking for a one-line answer, for graded pairs.

    python scripts/make_quickstart_data.py [--rows 400] [--prompts 64] [--rl-prompts 64] [--eval-prompts 32] [--seed 0]
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
GRADED_SYSTEM = "Reply with the calculation and its result only, for example: 12 + 30 = 42."
"""The bundled model before SFT rambles past any small token budget; asked this way it mostly answers in a line."""
SYSTEMS = ["You are a careful calculator.", "Answer arithmetic questions.", "You help with sums and products."]
QUESTIONS = ["What is {a} {op} {b}?", "Compute {a} {op} {b}.", "{a} {op} {b} = ?", "Please work out {a} {op} {b}."]


def reasoning(a: int, op: str, b: int) -> str:
    if op == "+":
        tens, ones = (a // 10 + b // 10) * 10, a % 10 + b % 10
        return f"Add the tens: {a // 10 * 10} + {b // 10 * 10} = {tens}. Add the ones: {a % 10} + {b % 10} = {ones}. " \
               f"Together: {tens} + {ones} = {a + b}."
    if op == "-":
        return f"Take {b // 10 * 10} from {a}: {a - b // 10 * 10}. Then take {b % 10}: {a - b}."
    return f"Split {a} into {a // 10 * 10} and {a % 10}. {a // 10 * 10} × {b} = {a // 10 * 10 * b}, " \
           f"{a % 10} × {b} = {a % 10 * b}. Sum: {a * b}."


def row(rng: random.Random, think: bool, by_flag: bool) -> dict:
    op = rng.choice("+-×")
    a, b = rng.randint(10, 99), rng.randint(2, 9) if op == "×" else rng.randint(10, 99)
    if op == "-" and b > a:
        a, b = b, a
    result = {"+": a + b, "-": a - b, "×": a * b}[op]
    question = rng.choice(QUESTIONS).format(a=a, op=op, b=b)
    answer = f"{a} {op} {b} = {result}."
    content = f"<think>\n{reasoning(a, op, b)}\n</think>\n{answer}" if think else answer
    system = rng.choice(SYSTEMS)
    messages = [{"role": "system", "content": f"{system} {'/think' if think else '/no_think'}" if by_flag else system},
                {"role": "user", "content": question}, {"role": "assistant", "content": content}]
    return {"messages": messages, "chat_template_kwargs": {} if by_flag else {"enable_thinking": think}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--rl-prompts", type=int, default=64)
    parser.add_argument("--eval-prompts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w") as stream:
        for i in range(args.rows):
            stream.write(json.dumps(row(rng, think=i % 2 == 0, by_flag=i % 4 < 2), ensure_ascii=False) + "\n")
    print(f"wrote {args.rows} rows to {OUT}")
    prompt_rng = random.Random(args.seed + 1)
    with PROMPTS_OUT.open("w") as stream:
        for _ in range(args.prompts):
            question = row(prompt_rng, think=False, by_flag=False)["messages"][1]["content"]
            stream.write(json.dumps({"prompt": [{"role": "user", "content": question}]}, ensure_ascii=False) + "\n")
    print(f"wrote {args.prompts} prompts to {PROMPTS_OUT}")
    rl_rng = random.Random(args.seed + 2)
    with RL_OUT.open("w") as stream:
        for _ in range(args.rl_prompts):
            chat = row(rl_rng, think=False, by_flag=False)["messages"]
            solution = chat[2]["content"].rsplit("= ", 1)[1].rstrip(".")
            stream.write(json.dumps({"prompt": [chat[1]], "solution": solution}, ensure_ascii=False) + "\n")
    print(f"wrote {args.rl_prompts} prompts with solutions to {RL_OUT}")
    distill_rng = random.Random(args.seed + 3)
    with DISTILL_OUT.open("w") as stream:
        for _ in range(args.rl_prompts):
            chat = row(distill_rng, think=False, by_flag=False)["messages"]
            stream.write(json.dumps({"prompt": [chat[1]], "completion": chat[2]["content"]}, ensure_ascii=False) + "\n")
    print(f"wrote {args.rl_prompts} prompts with answers to {DISTILL_OUT}")
    write_held_out(args.eval_prompts, args.seed + 4)
    write_graded()


def write_graded() -> None:
    """The GRPO prompts again, each with a system message asking for a one-line answer: the prompts the bundled
    model answers several times for graded pairs (quickstart/po_graded)."""
    rows = [json.loads(line) for line in RL_OUT.read_text().splitlines()]
    with GRADED_OUT.open("w") as stream:
        for row in rows:
            prompt = [{"role": "system", "content": GRADED_SYSTEM}, *row["prompt"]]
            stream.write(json.dumps({"prompt": prompt, "solution": row["solution"]}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} prompts with a system message and solutions to {GRADED_OUT}")


def problem(question: str) -> str:
    """The arithmetic of a question, whatever its wording: "What is 12 + 30?" -> "12 + 30"."""
    return " ".join(token for token in question.replace("?", " ").replace(".", " ").split()
                    if token.isdigit() or token in ("+", "-", "×"))


def write_held_out(n: int, seed: int) -> None:
    """n questions with solutions whose arithmetic appears in no other quickstart file."""
    seen = set()
    for path in (OUT, PROMPTS_OUT, RL_OUT, DISTILL_OUT):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            messages = record.get("messages") or record["prompt"]
            seen.add(problem(next(m["content"] for m in messages if m["role"] == "user")))
    rng = random.Random(seed)
    rows = []
    while len(rows) < n:
        chat = row(rng, think=False, by_flag=False)["messages"]
        key = problem(chat[1]["content"])
        if key in seen:
            continue
        seen.add(key)
        rows.append({"prompt": [chat[1]], "solution": chat[2]["content"].rsplit("= ", 1)[1].rstrip(".")})
    with EVAL_OUT.open("w") as stream:
        stream.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    print(f"wrote {n} held-out prompts with solutions to {EVAL_OUT}")


if __name__ == "__main__":
    main()
