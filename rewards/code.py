"""Code-execution reward: run the final Python code block of a completion against its row's tests, in the sandbox.

This module owns what a *test* is and how executions become a score; running code safely is `rewards.sandbox`.

Two kinds of tests, told apart by their shape:

* stdin/stdout tests, `[{"input": "1 2\\n", "output": "3\\n"}, ...]` (competitive programming): the program gets the
  input on stdin and passes when it exits normally and its stdout equals the expected output, ignoring trailing
  whitespace on each line and trailing blank lines. Expected outputs never enter the sandbox.
* assert tests, `["assert add(1, 2) == 3", ...]`: each runs in its own execution, after the solution, under a fixed
  harness; it passes only if the harness prints a fresh random nonce after the assert, so that exiting early with
  status 0 (`sys.exit(0)`, `os._exit(0)`) does not pass.

The test column may also hold open-r1's `verification_info` (its code datasets): `{"language": "python",
"test_cases": [{"input": ..., "output": ..., "type": "stdin_stdout"}, ...]}`, read as the stdin/stdout tests it
lists; set `test_column: verification_info`. Other languages and test types are refused, naming them.

A completion scores the fraction of its tests passed; 0.0 without a code block. None (not 0.0) when the sandbox
failed or the row has no tests: neither says anything about the code.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rewards.sandbox import Execution, Limits, Pool
from rewards.text import answer_part, completion_text

_FENCE = re.compile(r"```[ \t]*([^\s`]*)[^\n]*\n(.*?)```", re.DOTALL)
_LANGUAGE_TAGS = {"python": ("python", "py", "python3")}

# The fixed program that runs an assert test. The nonce and the test arrive on stdin and are read into this function's
# locals before the solution runs (stdin is then at EOF), the solution runs in a namespace of its own, and the nonce
# is written to fd 1 directly, past whatever the solution did to sys.stdout. The solution's __name__ is not "__main__",
# so its own `if __name__ == "__main__":` demo code, which often reads stdin, does not run.
# Residual risk: code in the same process can still reach the nonce by frame introspection (sys._getframe(1).f_locals,
# gc.get_referrers) and print it before exiting, or return objects whose __eq__ is always True. Stopping that needs
# the check outside the process: stdin/stdout tests have no such hole.
_ASSERT_HARNESS = """\
import json
import os
import sys


def _run_test():
    payload = json.loads(sys.stdin.read())
    nonce = payload["nonce"]
    namespace = {"__name__": "solution", "__builtins__": __builtins__}
    exec(compile(payload["solution"], "solution.py", "exec"), namespace)
    exec(compile(payload["test"], "test.py", "exec"), namespace)
    os.write(1, ("\\n" + nonce + "\\n").encode())


_run_test()
"""


def extract_code(completion: str, language: str = "python") -> str | None:
    """The last fenced code block in `language` (or without a language) in the answer part of the completion: after
    the last </think> when there is one, so reasoning is never executed; None when a think block is never closed, or
    there is no such block or it is blank."""
    answer = answer_part(completion)
    if answer is None:
        return None
    tags = _LANGUAGE_TAGS.get(language, (language,)) + ("",)
    blocks = [code for tag, code in _FENCE.findall(answer) if tag.lower() in tags]
    if not blocks or not blocks[-1].strip():
        return None
    return blocks[-1]


def score_io_tests(code: str, tests: list[dict], pool: Pool) -> float | None:
    """Fraction of stdin/stdout tests passed; None if a sandbox failed or there are no tests."""
    return _run_plan(_io_plan(code, tests), pool)


def score_assert_tests(code: str, asserts: list[str], pool: Pool) -> float | None:
    """Fraction of assert tests passed, each in its own execution; None if a sandbox failed or there are no tests."""
    return _run_plan(_assert_plan(code, asserts), pool)


class CodeReward:
    """`code`: the fraction of the row's tests that the answer's last fenced code block passes, run in the sandbox;
    None when a sandbox fails or the row has no tests.

    Args:
        workers: sandbox workers running executions in parallel; default two per CPU core this process may use.
        limits: each execution's limits, a mapping of `rewards.sandbox.Limits` fields (cpu_seconds 5, wall_seconds 12,
            memory_mb 512, processes 32, output_bytes, file_bytes, dir_bytes).
        level: the sandbox level, auto (bubblewrap, else unshare), bwrap, unshare or rlimits (docs/sandbox.md).
        test_column: the column with each row's tests: a list of {"input", "output"} mappings or of assert
            statements, a JSON string of either, or open-r1's verification_info.
    """

    score_range = (0.0, 1.0)
    """The lowest and highest score a completion can get (pairs thresholds are checked against it)."""

    def __init__(self, workers: int | None = None, limits: Limits | dict = Limits(),  # noqa: B008 -- frozen
                 level: str = "auto", test_column: str = "test_cases"):
        if isinstance(limits, dict):  # as written in a recipe
            limits = Limits(**limits)
        self.test_column = test_column
        self.required_columns = (test_column,)
        self.__name__ = "code"
        # A function of the column alone, not a method: the row check may send it to other processes, and the
        # sandbox pool does not pickle.
        self.row_problem = functools.partial(tests_problem, test_column)
        self.pool = Pool(workers, limits, level)

    def __call__(self, completions: list, **columns) -> list[float | None]:
        tests = columns.get(self.test_column)
        tests = list(tests) if tests is not None else [None] * len(completions)
        plans = [self._plan(c, t) for c, t in zip(completions, tests, strict=True)]
        # One batch for the whole call, so that all executions run in parallel, in rounds (every completion's first
        # test, then every second test...): a program that hangs is met in the first round and holds its worker for
        # its time limit while the others run, instead of starting last and stretching the batch by that limit.
        order = _rounds([len(plan.jobs) for plan in plans])
        ran = self.pool.run_many([plans[i].jobs[j] for i, j in order])
        executions: list[list[Execution]] = [[] for _ in plans]
        for (i, _), execution in sorted(zip(order, ran, strict=True), key=lambda pair: pair[0]):
            executions[i].append(execution)
        return [plan.score(done) for plan, done in zip(plans, executions, strict=True)]

    def close(self) -> None:
        self.pool.close()

    @staticmethod
    def _plan(completion: Any, tests: Any) -> _Plan:
        tests = parse_tests(tests)
        if not tests:
            return _Plan([], lambda _: None)
        code = extract_code(completion_text(completion))
        if code is None:
            return _Plan([], lambda _: 0.0)
        if all(isinstance(t, str) for t in tests):
            return _assert_plan(code, tests)
        return _io_plan(code, tests)


# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _Plan:
    """The executions a completion needs, and how their results become its score."""

    jobs: list[tuple[str, str]]
    score: Callable[[list[Execution]], float | None]


def _rounds(counts: list[int]) -> list[tuple[int, int]]:
    """(completion, test) pairs, round by round: test 0 of every completion that has one, then test 1, ..."""
    return [(i, j) for j in range(max(counts, default=0)) for i, count in enumerate(counts) if j < count]


def _run_plan(plan: _Plan, pool: Pool) -> float | None:
    return plan.score(pool.run_many(plan.jobs) if plan.jobs else [])


def _io_plan(code: str, tests: list[dict]) -> _Plan:
    jobs = [(code, str(test.get("input", ""))) for test in tests]
    expected = [_output_lines(str(test.get("output", ""))) for test in tests]

    def score(executions: list[Execution]) -> float | None:
        return _fraction(executions, [e.status == "ok" and _output_lines(e.stdout) == lines
                                      for e, lines in zip(executions, expected, strict=True)])

    return _Plan(jobs, score)


def _assert_plan(code: str, asserts: list[str]) -> _Plan:
    nonces = [secrets.token_hex(16) for _ in asserts]
    jobs = [(_ASSERT_HARNESS, json.dumps({"nonce": nonce, "solution": code, "test": test}))
            for nonce, test in zip(nonces, asserts, strict=True)]

    def score(executions: list[Execution]) -> float | None:
        return _fraction(executions, [e.status == "ok" and nonce in e.stdout.split()
                                      for e, nonce in zip(executions, nonces, strict=True)])

    return _Plan(jobs, score)


def _fraction(executions: list[Execution], passed: list[bool]) -> float | None:
    if not executions or any(e.status == "sandbox_error" for e in executions):
        return None
    return sum(passed) / len(passed)


def _verification_info_tests(info: dict) -> list:
    """The stdin/stdout tests of an open-r1 `verification_info` value."""
    language = info.get("language", "python")
    if language not in _LANGUAGE_TAGS["python"]:
        raise ValueError(f"language {language!r}: the code reward runs Python only")
    tests = info["test_cases"]
    if isinstance(tests, str):  # some exports keep the list as a JSON string
        tests = json.loads(tests) if tests.strip() else []
    if not isinstance(tests, (list, tuple)):
        raise ValueError(f"test_cases must be a list, got {tests!r:.80}")
    for test in tests:
        kind = test.get("type", "stdin_stdout") if isinstance(test, dict) else None
        if kind != "stdin_stdout" or "output" not in test:
            raise ValueError(f"a test of type {kind!r}: only 'stdin_stdout' tests ({{'input', "
                             f"'output'}}) are supported, got {test!r:.80}")
    return [{"input": test.get("input", ""), "output": test["output"]} for test in tests]


def _output_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def tests_problem(test_column: str, row: dict) -> str:
    """Why a data row's tests cannot be run ("" when they can, or when the row has none: scored None), for the
    check of every row before a run loads (`CodeReward.row_problem`)."""
    try:
        parse_tests(row.get(test_column))
    except ValueError as exc:  # json's errors among them
        return f"its tests (column {test_column!r}) cannot be run: {exc}"
    return ""


def parse_tests(value: Any) -> list | None:
    """A row's tests as a list (None when the row has none); ValueError naming what is wrong."""
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    if isinstance(value, dict) and "test_cases" in value:
        value = _verification_info_tests(value)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"tests must be a list of {{'input', 'output'}} dicts or of assert strings, got {value!r:.80}")
    for test in value:
        if not isinstance(test, str) and not (isinstance(test, dict) and "output" in test):
            raise ValueError(f"a test must be an assert string or a dict with 'input' and 'output', got {test!r:.80}")
    if any(isinstance(t, str) for t in value) and not all(isinstance(t, str) for t in value):
        raise ValueError("a row's tests must be all assert strings or all {'input', 'output'} dicts")
    return list(value)
