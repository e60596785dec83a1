"""reasoning-gym's procedural tasks (the `reasoning-gym` extra) as prompt rows, and the `reasoning_gym` reward, which
scores an answer with the task's own `score_answer`.

A row is the task's question as a user message, its gold `answer`, and one JSON column, `reasoning_gym`, holding what
the scorer needs: the task, its config (with seed and size) and the entry (question, answer, metadata). The entry is
written with its tuples and non-string keys kept (`encode`), because scorers compare against them (arc_agi's grids
are tuples: as lists, the gold grid itself scores 0.05). The reward rebuilds the task's dataset from the row's task
and config, since some scorers read the config (decimal_arithmetic's precision, puzzle24's bounds).

The answer scored is the text after the last `</think>` (an unclosed think block is no answer); within it, the last
`<answer>...</answer>` (reasoning-gym's convention, its own `extract_answer`) when there is one, else all of it
(`require_tag: true`: no answer, as reasoning-gym's own evaluation scores it).
`smolalign rewards test reasoning_gym --completions FILE.jsonl` tries it on rows carrying the column.
"""

import dataclasses
import difflib
import json
from typing import Any

from rewards.errors import RewardError, suggest
from rewards.text import answer_part, column, completion_text

PREFIX = "reasoning_gym:"
"""A data source `reasoning_gym:TASK` generates the task's rows."""
COLUMN = "reasoning_gym"
"""The row's JSON column: {"task", "config", "entry"}."""
DEFAULT_SEED = 0
"""A source's seed when it gives none (reasoning-gym's own default is a random seed: not reproducible)."""
NOT_TASKS = ("composite",)
"""reasoning-gym's mixing dataset: mix tasks as several `reasoning_gym:` sources with weights instead."""
UNSEEDED = ("list_functions",)
"""Tasks whose rows its seed does not decide (reasoning-gym 0.1.25: two `create_dataset` calls with one seed give other
questions), so the dry run, the run and a held-out evaluation would each see other rows; found by generating every
task twice."""


def library():
    """The reasoning_gym module, or a RewardError naming the extra that installs it."""
    try:
        import reasoning_gym
    except ImportError:
        raise RewardError("reasoning-gym is not installed: pip install 'smolalign[reasoning-gym]' (the extra pins "
                          "the release smolalign is tested with)") from None
    return reasoning_gym


def tasks() -> list[str]:
    return sorted(set(library().factory.DATASETS) - set(NOT_TASKS))


def task_of(path: str) -> str | None:
    """The task of a `reasoning_gym:TASK` source path, else None."""
    return path[len(PREFIX):] if path.startswith(PREFIX) else None


def settings(config: dict | None, seed: int | None, size: int | None) -> dict:
    """The keyword arguments of the task's config class: `config`, the seed (DEFAULT_SEED when None), the size when
    given (reasoning-gym's default, 500, when None)."""
    sized = {"size": size} if size is not None else {}
    return {**(config or {}), "seed": DEFAULT_SEED if seed is None else seed, **sized}


def check_task(task: str, config: dict | None = None, seed: int | None = None, size: int | None = None) -> None:
    """An existing task whose config class takes every key of `config` and accepts the values; else a RewardError
    naming the task or the key."""
    known = tasks()
    if task in NOT_TASKS:
        raise RewardError(f"reasoning-gym's {task!r} mixes tasks; mix them as several reasoning_gym:TASK sources, "
                          "each with its weight")
    if task not in known:
        close = difflib.get_close_matches(task, known, n=3, cutoff=0.5)
        hint = f"closest: {', '.join(close)}" if close else f"{len(known)} tasks, e.g. {', '.join(known[:4])}"
        raise RewardError(f"unknown reasoning-gym task {task!r} ({hint}; `python -c \"import reasoning_gym; "
                          "print(sorted(reasoning_gym.factory.DATASETS))\"` lists them)")
    if task in UNSEEDED:
        raise RewardError(f"reasoning-gym's {task!r} draws other rows on every call whatever its seed, so a run's rows "
                          "could not be checked, repeated or held out; choose another task")
    config_class = library().factory.DATASETS[task][1]
    fields = [f.name for f in dataclasses.fields(config_class) if f.name not in ("seed", "size")]
    for key in config or {}:
        if key in ("seed", "size"):
            raise RewardError(f"reasoning-gym task {task}: config.{key} is the source's own key: write {key}: beside "
                              "config:, not in it")
        if key not in fields:
            raise RewardError(f"reasoning-gym task {task} has no config key {key!r}{suggest(str(key), fields)} "
                              f"(its keys: {', '.join(fields)})")
    try:
        built = config_class(**settings(config, seed, size))
        if hasattr(built, "validate"):
            built.validate()
    except (AssertionError, ValueError, TypeError) as exc:  # reasoning-gym checks its configs with asserts
        raise RewardError(f"reasoning-gym task {task} refuses its config: {exc or type(exc).__name__}") from None


def check_carried(task: str, config: dict) -> None:
    """check_task for the settings a row carries: its config with the source's seed and size among the task's keys."""
    check_task(task, {k: v for k, v in config.items() if k not in ("seed", "size")}, config.get("seed"),
               config.get("size"))


def task_rows(task: str, config: dict | None = None, seed: int | None = None, size: int | None = None) -> list[dict]:
    """The task's entries as prompt rows: `prompt` (the question as a user message), `answer` and the JSON column
    (the entries `reasoning_gym.create_dataset(task, seed=seed, size=size, **config)` gives)."""
    check_task(task, config, seed, size)
    kwargs = settings(config, seed, size)
    dataset = library().create_dataset(task, **kwargs)
    rows = []
    for index in range(len(dataset)):
        entry = dataset[index]
        try:
            carried = encode({"task": task, "config": kwargs, "entry": entry})
        except TypeError as exc:
            raise RewardError(f"reasoning-gym task {task}: entry {index} cannot be written as a row ({exc})") from None
        answer = entry.get("answer")
        rows.append({"prompt": [{"role": "user", "content": entry["question"]}],
                     "answer": None if answer is None else str(answer), COLUMN: carried})
    return rows


def _tagged(value: Any) -> Any:
    if isinstance(value, tuple):
        return {"__tuple__": [_tagged(v) for v in value]}
    if isinstance(value, list):
        return [_tagged(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not {"__tuple__", "__items__"} & set(value):
            return {k: _tagged(v) for k, v in value.items()}
        return {"__items__": [[_tagged(k), _tagged(v)] for k, v in value.items()]}
    return value


def _untagged(mapping: dict) -> Any:
    if set(mapping) == {"__tuple__"}:
        return tuple(mapping["__tuple__"])
    if set(mapping) == {"__items__"}:
        return {key: value for key, value in mapping["__items__"]}
    return mapping


def encode(value: Any) -> str:
    """JSON text that `decode` turns back into `value`, tuples and non-string keys included.

    Examples:
        >>> decode(encode({"grid": ((1, 2), (3, 4)), "colors": {0: "red"}}))
        {'grid': ((1, 2), (3, 4)), 'colors': {0: 'red'}}
    """
    return json.dumps(_tagged(value))


def decode(text: str) -> Any:
    return json.loads(text, object_hook=_untagged)


class ReasoningGym:
    """`reasoning_gym`: the task's own score (its `score_answer`) of the answer after the last `</think>`, for rows
    of a `reasoning_gym:TASK` source; rows without the column (another source of a mixture) score None.

    Args:
        answer_tag: the tag whose last occurrence holds the answer (`<answer>...</answer>`, reasoning-gym's own
            convention); without one in the completion, the whole answer after the think block is scored. null:
            always the whole answer.
        require_tag: score only an answer inside the tag: a completion without it is no answer, which the task
            scores (0.0 for the tasks tested).
    """

    score_range = (0.0, 1.0)
    """The lowest and highest score a completion can get (pairs thresholds are checked against it)."""

    def __init__(self, answer_tag: str | None = "answer", require_tag: bool = False):
        if require_tag and not answer_tag:
            raise ValueError("require_tag needs an answer_tag")
        library()
        self.answer_tag, self.require_tag = answer_tag, require_tag
        self.required_columns = (COLUMN,)
        self.__name__ = "reasoning_gym"
        self._datasets: dict[str, Any] = {}

    def answer(self, completion: Any) -> str | None:
        """The answer the task scores, or None (no answer)."""
        text = answer_part(completion_text(completion))
        if text is None or not self.answer_tag:
            return None if text is None else text.strip()
        from reasoning_gym.utils import extract_answer

        tagged = extract_answer(text, tag_name=self.answer_tag)
        return tagged if tagged is not None or self.require_tag else text.strip()

    def dataset(self, task: str, config: dict):
        key = encode([task, config])
        if key not in self._datasets:
            check_carried(task, config)
            self._datasets[key] = library().create_dataset(task, **config)
        return self._datasets[key]

    def carried_row(self, carried: Any) -> dict | None:
        """The row's {task, config, entry}; None for a row of another source; a RewardError for a column that is not
        a reasoning_gym: source's."""
        if carried is None:
            return None
        try:
            row = decode(carried) if isinstance(carried, str) else carried
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("task"), str) or not isinstance(row.get("entry"), dict):
            raise RewardError(f"the {COLUMN} column must hold {{task, config, entry}} (a reasoning_gym: source's "
                              f"rows), got {str(carried)[:60]!r}")
        return row

    def row_problem(self, row: dict) -> str:
        """Why a data row cannot be scored ("" when it can): a hand-written column naming an unknown task or a config
        key its task does not take, or not {task, config, entry} at all; checked before training
        (smolalign.data.check.check_reward_rows), not at the first batch that holds the row."""
        try:
            carried = self.carried_row(row.get(COLUMN))
            if carried is not None:
                check_carried(carried["task"], carried.get("config") or {})
        except RewardError as exc:
            return str(exc)
        return ""

    def score(self, completion: Any, carried: Any) -> float | None:
        row = self.carried_row(carried)
        if row is None:
            return None
        dataset = self.dataset(row["task"], row.get("config") or {})
        try:
            return float(dataset.score_answer(self.answer(completion), row["entry"]))
        except Exception:  # a scorer that fails on a malformed answer (prime_factorization, boxnet): a wrong answer
            return 0.0

    def __call__(self, completions: list, **columns) -> list[float | None]:
        carried = column(columns, COLUMN, len(completions))
        return [self.score(c, r) for c, r in zip(completions, carried, strict=True)]
