"""The quickstart's evaluation is honest: its held-out questions appear in no file a quickstart stage learns from
(SFT rows, the prompts preference pairs are generated for, GRPO prompts, distillation prompts), neither word for
word nor as the same arithmetic in other words."""

import json
import re
import shlex
from pathlib import Path

import pytest

from smolalign.recipe.yamlio import load_yaml

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "recipes" / "quickstart"


def eval_args(name: str = "EVAL_ARGS") -> list[str]:
    """The Makefile's EVAL_ARGS (or EVAL_PO_ARGS, EVAL_THREE_ARGS), the options `make quickstart` evaluates with."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith(f"{name} "))
    return shlex.split(line.split("=", 1)[1])


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def training_files() -> list[Path]:
    """Every data file the quickstart's stages read, from the recipes themselves."""
    files = []
    for name in ("sft", "po", "rl", "distill"):
        recipe = load_yaml((QUICKSTART / f"{name}.yaml").read_text())
        sources = recipe.get("data", {}).get("sources", []) + recipe.get("pairs", {}).get("prompts", [])
        files += [QUICKSTART / source["path"] for source in sources]
    return files


def questions(path: Path) -> list[str]:
    """The user turns of a JSONL file of chats (`messages`) or prompts (`prompt`)."""
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        messages = record.get("messages") or record["prompt"]
        found += [m["content"] for m in messages if m["role"] == "user"]
    return found


def arithmetic(question: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The numbers (in any order) and operators of a question: "Which is larger, 47 or 52?" and "What is the larger
    of 52 and 47?" ask the same thing, as do "12 + 30 = ?" and "Compute 30 + 12.", and "8.5 or 8.13?" and "8.13 or
    8.5?"."""
    return tuple(sorted(re.findall(r"\d+(?:\.\d+)?", question))), tuple(re.findall(r"[-+×*/<>]", question))


@pytest.mark.parametrize("name", ["EVAL_ARGS", "EVAL_PO_ARGS", "EVAL_THREE_ARGS"])
def test_the_held_out_questions_appear_in_no_training_pair_rl_or_distillation_file(name):
    args = eval_args(name)
    evaluated = questions(REPO / option(args, "--data"))
    files = training_files()
    assert {path.name for path in files} >= {"arithmetic.jsonl", "arithmetic_decimals.jsonl", "arithmetic_three.jsonl",
                                             "arithmetic_distill.jsonl"}
    assert all(arithmetic(q)[0] for q in evaluated), "every held-out question has numbers"
    for path in files:
        seen = questions(path)
        assert seen, path
        assert not set(evaluated) & set(seen), f"{path.name} holds held-out questions word for word"
        shared = {arithmetic(q) for q in evaluated} & {arithmetic(q) for q in seen}
        assert not shared, f"{path.name} holds the held-out problems {sorted(shared)[:3]}"


@pytest.mark.parametrize("name", ["EVAL_ARGS", "EVAL_PO_ARGS", "EVAL_THREE_ARGS"])
def test_the_evaluation_reads_as_many_distinct_held_out_questions_as_it_asks_for(name):
    args = eval_args(name)
    held_out = questions(REPO / option(args, "--data"))
    wanted = int(option(args, "--max-prompts")) if "--max-prompts" in args else len(held_out)
    assert len({arithmetic(q) for q in held_out}) == len(held_out) >= wanted
