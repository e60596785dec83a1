"""reasoning-gym as data and reward: a `reasoning_gym:TASK` source's rows are the library's own entries, and the
`reasoning_gym` reward gives what the task's own `score_answer` gives, called here directly on the library's entries
with the answer each completion was written around, for hundreds of answers per task (the gold, perturbed golds,
other rows' golds, wrong and reformatted answers) in every way a completion can carry one."""

import json
import random

import pytest
import reasoning_gym

TASKS = {
    "chain_sum": {"min_terms": 2, "max_terms": 4},
    "basic_arithmetic": {},
    "leg_counting": {"max_animals": 4},
    "number_sorting": {},
    # Its scorer reads the config: with one decimal place an answer within 0.1 is right, with the default three not.
    "decimal_arithmetic": {"min_num_decimal_places": 1, "max_num_decimal_places": 1},
    # Metadata holding tuples: complex numbers as (real, imaginary); arc_agi's grids, which its scorer compares.
    "complex_arithmetic": {},
    "arc_agi": {},
    # A scorer that raises on answers it cannot parse ("abc"): such an answer scores 0.
    "prime_factorization": {},
}
SEED, SIZE = 1234, 6


def source_rows(task: str, config: dict) -> list[dict]:
    """The rows as every stage reads them: the source read through the data mixture (Arrow and back)."""
    from smolalign.data.prompts import source_prompts
    from smolalign.recipe.data_schema import SourceSection

    rows = source_prompts([SourceSection(f"reasoning_gym:{task}", size=SIZE, seed=SEED, config=config)]).train
    return list(rows)


def perturbed(gold: str, rng: random.Random) -> str:
    """One random character edit of the gold answer: replace, delete, insert or swap."""
    if not gold:
        return rng.choice("0123456789x")
    i = rng.randrange(len(gold))
    kind = rng.randrange(4)
    if kind == 0:
        return gold[:i] + rng.choice("0123456789-., abx[]'") + gold[i + 1:]
    if kind == 1:
        return gold[:i] + gold[i + 1:]
    if kind == 2:
        return gold[:i] + rng.choice("0123456789 ,.") + gold[i:]
    j = min(i + 1, len(gold) - 1)
    return gold[:i] + gold[j] + gold[i] + gold[j + 1:] if j > i else gold[::-1]


def numeric_variants(gold: str) -> list[str]:
    try:
        value = float(gold)
    except ValueError:
        return []
    out = [repr(value), f"{value:.4f}", f"{value + 0.05:.6f}", f"{value - 0.05:.6f}", f"{value + 0.0004:.6f}",
           f"{value * 10:g}", f"{value:,}"]
    if value == int(value):
        out += [str(int(value) + 1), str(int(value) - 1), f"{int(value):,}", f"+{int(value)}"]
    return out


def answers(gold: str, others: list[str], rng: random.Random) -> list[str]:
    """About 40 answers around a gold answer: right, nearly right, differently written and wrong."""
    found = [gold, f" {gold} ", f"{gold}.", gold.upper(), gold.lower(), gold.replace(" ", ""), gold.replace(",", ", "),
             gold.replace("'", '"'), gold.strip("[]"), f"[{gold}]", gold[::-1], gold[:-1], f"{gold}0",
             f"The answer is {gold}", f"{gold} (I think)", f"{gold}\n{gold}", "", "I don't know", "abc", "-",
             "None", *numeric_variants(gold), *others]
    while len(found) < 40:
        found.append(perturbed(gold, rng))
    return [a for a in found if "<" not in a]


# (completion text around an answer A, what the reward must score: A stripped, or None for no answer). The
# decoys (the gold answer inside the reasoning or in an earlier tag) must not be what is scored.
WRAPPERS = [
    (lambda a, gold: a, "answer"),
    (lambda a, gold: f"<answer>{a}</answer>", "answer"),
    (lambda a, gold: f"<think>\nIt is {gold}.\n</think>\n<answer> {a} </answer>", "answer"),
    (lambda a, gold: f"<think>\n<answer>{gold}</answer>\n</think>\n{a}", "answer"),
    (lambda a, gold: f"<answer>{gold}</answer> no, wait: <answer>{a}</answer>", "answer"),
    (lambda a, gold: f"<think>\nstill thinking about {a}", None),
]


def expected(dataset, answer: str | None, entry: dict) -> float:
    """reasoning-gym's own score (a scorer that raises on an answer counts it wrong)."""
    try:
        return float(dataset.score_answer(answer, entry))
    except Exception:
        return 0.0


@pytest.mark.parametrize("task", sorted(TASKS))
def test_the_reward_scores_as_the_tasks_own_scorer(task):
    from rewards.reasoning_gym import COLUMN
    from rewards.registry import resolve_reward

    config = TASKS[task]
    dataset = reasoning_gym.create_dataset(task, seed=SEED, size=SIZE, **config)
    rows = source_rows(task, config)
    reward = resolve_reward("reasoning_gym")
    strict = resolve_reward("reasoning_gym", {"require_tag": True})
    rng = random.Random(task)
    compared, values = 0, set()
    for index, row in enumerate(rows):
        entry = dataset[index]
        golds = [dataset[i]["answer"] for i in range(SIZE) if i != index]

        def want_tagged(answer: str, entry=entry) -> float:
            return expected(dataset, answer.strip(), entry)

        for answer in answers(entry["answer"], golds, rng):
            for wrap, scored in WRAPPERS:
                text = wrap(answer, entry["answer"])
                want = expected(dataset, answer.strip() if scored else None, entry)
                assert reward([text], **{COLUMN: [row[COLUMN]]}) == [want], (task, text)
                values.add(want)
                compared += 1
            # require_tag: an answer outside the tags is no answer, as reasoning-gym's own evaluation has it.
            assert strict([answer], **{COLUMN: [row[COLUMN]]}) == [expected(dataset, None, entry)]
            assert strict([f"<answer>{answer}</answer>"], **{COLUMN: [row[COLUMN]]}) == [want_tagged(answer)]
    assert compared >= 200
    assert 1.0 in values and len(values) >= 2, values  # right and wrong answers were both among them


@pytest.mark.parametrize("task", ["chain_sum", "complex_arithmetic", "arc_agi"])
def test_source_rows_are_the_librarys_entries(task):
    from rewards.reasoning_gym import COLUMN, decode

    dataset = reasoning_gym.create_dataset(task, seed=SEED, size=SIZE, **TASKS[task])
    rows = source_rows(task, TASKS[task])
    assert len(rows) == SIZE
    for index, row in enumerate(rows):
        entry = dataset[index]
        assert row["prompt"] == [{"role": "user", "content": entry["question"]}]
        assert row["answer"] == entry["answer"]
        carried = decode(row[COLUMN])
        assert carried["entry"] == entry  # tuples included: arc_agi's grids, complex_arithmetic's parts
        assert carried["task"] == task and carried["config"] == {**TASKS[task], "seed": SEED, "size": SIZE}
        assert row["_origin"] == f"reasoning_gym:{task}#{index}"


def test_a_mixture_row_without_the_column_is_unscored():
    from rewards.registry import resolve_reward

    row = source_rows("chain_sum", {})[0]
    reward = resolve_reward("reasoning_gym")
    assert reward([row["answer"], row["answer"]], reasoning_gym=[row["reasoning_gym"], None]) == [1.0, None]
    assert reward([row["answer"]], solution=["4"]) == [None]


def test_a_hand_written_row_with_the_entry_as_an_object_is_scored():
    from rewards.registry import resolve_reward

    entry = reasoning_gym.create_dataset("leg_counting", seed=0, size=1)[0]
    reward = resolve_reward("reasoning_gym")
    carried = json.loads(json.dumps({"task": "leg_counting", "entry": entry}))
    assert reward([f"<answer>{entry['answer']}</answer>", "-1"], reasoning_gym=[carried, carried]) == [1.0, 0.0]


def test_rewards_test_scores_a_sources_rows(cli, tmp_path):
    """`smolalign rewards test reasoning_gym` on completions carrying the column of a source's rows."""
    dataset = reasoning_gym.create_dataset("chain_sum", seed=SEED, size=3)
    rows = source_rows("chain_sum", {})[:3]
    answers = [rows[0]["answer"], f"<think>\nadd them\n</think>\nThe answer is {rows[1]['answer']}.", "12345"]
    lines = [{"completion": answer, "reasoning_gym": row["reasoning_gym"]} for answer, row in zip(answers, rows, strict=True)]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = cli("rewards", "test", "reasoning_gym", "--completions", path)
    assert code == 0, err
    shown = [line.split()[1] for line in out.splitlines() if line.startswith("#")]
    extracted = [rows[0]["answer"], f"The answer is {rows[1]['answer']}.", "12345"]
    want = [dataset.score_answer(answer, dataset[i]) for i, answer in enumerate(extracted)]
    assert want[0] == 1.0 and 0 < want[1] < 1 and want[2] == 0.0
    assert shown == [f"{score:.4g}" for score in want]


def test_eval_data_takes_a_task_with_spaces_around_it_and_a_file_name_with_spaces():
    from smolalign.cli.evaluate import data_source

    assert data_source(" reasoning_gym:chain_sum ", "train").path == "reasoning_gym:chain_sum"
    assert data_source("reasoning_gym:chain_sum {size: 4}", "train").size == 4
    assert data_source("my data.jsonl", "train").path == "my data.jsonl"
