"""The code reward: extracting code from completions, scoring stdin/stdout and assert tests, the TRL-style callable."""

import json
import time

import pytest

from rewards import code as code_module
from rewards.code import CodeReward, extract_code, score_assert_tests, score_io_tests
from rewards.sandbox import Execution, Limits, Pool, SandboxUnavailable, choose_level

LIMITS = Limits(cpu_seconds=1, wall_seconds=2, memory_mb=256, output_bytes=100_000)
ADD_TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "10 -4\n", "output": "6\n"}]
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


def _sandbox_or_skip() -> str:
    try:
        return choose_level()
    except SandboxUnavailable as e:
        pytest.skip(f"no isolating sandbox on this machine: {e}")


@pytest.fixture(scope="module")
def pool():
    with Pool(workers=4, limits=LIMITS, level=_sandbox_or_skip()) as pool:
        yield pool


@pytest.fixture(scope="module")
def reward():
    reward = CodeReward(workers=4, limits=LIMITS, level=_sandbox_or_skip())
    yield reward
    reward.close()


def fenced(code: str, language: str = "python") -> str:
    return f"```{language}\n{code}```"


# ----------------------------------------------------------------------------------------------------------------
# extract_code


PRINT1, PRINT2 = "print(1)\n", "print(2)\n"


def test_extract_code_takes_the_last_python_block():
    completion = "\n".join(["First try:", fenced(PRINT1), "Better:", fenced(PRINT2, "py"), "Run it:",
                            fenced("python main.py\n", "bash"), "Done."])
    assert extract_code(completion) == PRINT2


def test_extract_code_accepts_blocks_without_a_language():
    assert extract_code("Here:\n" + fenced("x = 1\n", "")) == "x = 1\n"
    assert extract_code(fenced("x = 1\n", "Python3")) == "x = 1\n"


def test_extract_code_ignores_the_reasoning():
    completion = "<think>\nMaybe " + fenced(PRINT1) + " ...\n</think>\nAnswer:\n" + fenced(PRINT2)
    assert extract_code(completion) == PRINT2
    assert extract_code("<think>\n" + fenced(PRINT1) + "\n</think>\nNo code this time.") is None
    assert extract_code("<think>\nstill thinking " + fenced(PRINT1)) is None  # never closed: no answer yet


@pytest.mark.parametrize("completion", ["no code at all", "inline `print(1)` only", "```python\nprint(1)\n",
                                        fenced("\n  \n"), fenced("echo hi\n", "bash")])
def test_extract_code_without_a_block(completion):
    assert extract_code(completion) is None


# ----------------------------------------------------------------------------------------------------------------
# stdin/stdout tests


def test_io_correct_solution(pool):
    assert score_io_tests(ADD, ADD_TESTS, pool) == 1.0


def test_io_wrong_solution(pool):
    assert score_io_tests("a, b = map(int, input().split())\nprint(a - b)\n", ADD_TESTS, pool) == 0.0


def test_io_partially_right(pool):
    assert score_io_tests("print(3)\n", ADD_TESTS, pool) == 0.5


def test_io_output_comparison_ignores_trailing_whitespace_only(pool):
    tests = [{"input": "", "output": "1 2\n3\n"}]
    assert score_io_tests("print('1 2   ')\nprint('3')\nprint()\nprint()\n", tests, pool) == 1.0
    assert score_io_tests("print(' 1 2')\nprint('3')\n", tests, pool) == 0.0
    assert score_io_tests("print('1 2')\nprint()\nprint('3')\n", tests, pool) == 0.0


def test_io_crash_after_right_output_fails(pool):
    assert score_io_tests("print(3)\nraise RuntimeError\n", ADD_TESTS[:1], pool) == 0.0
    assert score_io_tests("import sys\nsys.exit(1 / 0)\n", ADD_TESTS, pool) == 0.0


def test_io_infinite_loop_times_out(pool):
    start = time.monotonic()
    assert score_io_tests("print(3)\nwhile True:\n    pass\n", ADD_TESTS, pool) == 0.0
    assert time.monotonic() - start < LIMITS.wall_seconds + 1.5  # the two tests run in parallel


def test_io_without_tests_is_unscored(pool):
    assert score_io_tests(ADD, [], pool) is None


# ----------------------------------------------------------------------------------------------------------------
# assert tests

ASSERTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]


def test_asserts_correct_and_wrong(pool):
    assert score_assert_tests("def add(a, b):\n    return a + b\n", ASSERTS, pool) == 1.0
    assert score_assert_tests("def add(a, b):\n    return a * b\n", ASSERTS, pool) == 0.0
    assert score_assert_tests("def add(a, b):\n    return 3\n", ASSERTS, pool) == 0.5
    assert score_assert_tests("def ad(a, b):\n    return a + b\n", ASSERTS, pool) == 0.0


def test_asserts_skip_the_solutions_main_block(pool):
    solution = ("def add(a, b):\n    return a + b\n\n"
                "if __name__ == '__main__':\n    print(add(*map(int, input().split())))\n")
    assert score_assert_tests(solution, ASSERTS, pool) == 1.0


def test_asserts_solution_output_does_not_matter(pool):
    solution = "import sys\nprint('noise')\nsys.stdout = open('/dev/null', 'w')\ndef add(a, b):\n    return a + b\n"
    assert score_assert_tests(solution, ASSERTS, pool) == 1.0


# ----------------------------------------------------------------------------------------------------------------
# sandbox failures are not wrong answers


class BrokenPool:
    def run_many(self, jobs):
        return [Execution("sandbox_error", 1, "", "bwrap: setting up uid map: Permission denied", 0.0)] * len(jobs)


class HalfBrokenPool:
    def run_many(self, jobs):
        ok = Execution("ok", 0, "3\n", "", 0.0)
        return [ok] + [Execution("sandbox_error", None, "", "", 0.0)] * (len(jobs) - 1)


@pytest.mark.parametrize("broken", [BrokenPool(), HalfBrokenPool()])
def test_sandbox_error_is_unscored(broken):
    assert score_io_tests(ADD, ADD_TESTS, broken) is None
    assert score_assert_tests("def add(a, b):\n    return a + b\n", ASSERTS, broken) is None


def test_reward_with_sandbox_error_is_unscored(reward, monkeypatch):
    monkeypatch.setattr(reward, "pool", BrokenPool())
    assert reward([fenced(ADD), "no code"], test_cases=[ADD_TESTS, ADD_TESTS]) == [None, 0.0]


# ----------------------------------------------------------------------------------------------------------------
# CodeReward


def test_reward_on_chat_completions(reward):
    completions = [
        [{"role": "assistant", "content": "<think>\n" + fenced(PRINT1) + "\n</think>\n" + fenced(ADD)}],
        [{"role": "assistant", "content": fenced("print(3)\n")}],
        [{"role": "assistant", "content": "I cannot solve this."}],
        [{"role": "assistant", "content": fenced("def add(a, b):\n    return a + b\n")}],
        [{"role": "assistant", "content": fenced("def add(a, b):\n    return 0\n")}],
    ]
    tests = [ADD_TESTS, json.dumps(ADD_TESTS), ADD_TESTS, ASSERTS, json.dumps(ASSERTS)]
    assert reward(completions, test_cases=tests, prompts=["p"] * 5) == [1.0, 0.5, 0.0, 1.0, 0.5]


def test_reward_runs_the_whole_batch_in_one_parallel_call(reward, monkeypatch):
    calls = []
    run_many = reward.pool.run_many
    monkeypatch.setattr(reward.pool, "run_many", lambda jobs: calls.append(len(jobs)) or run_many(jobs))
    assert reward([fenced(ADD)] * 3, test_cases=[ADD_TESTS] * 3) == [1.0] * 3
    assert calls == [6]


def test_reward_runs_every_completions_first_test_before_any_second_one(reward, monkeypatch):
    """A program that hangs is met in the first round, not last: the stdin each execution got, in submission order."""
    submitted = []
    run_many = reward.pool.run_many
    monkeypatch.setattr(reward.pool, "run_many", lambda jobs: submitted.extend(stdin for _, stdin in jobs) or run_many(jobs))
    three_tests = ADD_TESTS + [{"input": "5 5\n", "output": "10\n"}]
    wrong_last = [*ADD_TESTS, {"input": "5 5\n", "output": "11\n"}]
    scores = reward([fenced(ADD), fenced("print(3)\n"), fenced(ADD)], test_cases=[three_tests, ADD_TESTS, wrong_last])
    assert scores == [1.0, 0.5, pytest.approx(2 / 3)]  # each result reached its own completion and test
    first, second = (t["input"] for t in ADD_TESTS)
    assert submitted == [first, first, first, second, second, second, "5 5\n", "5 5\n"]


def test_reward_rows_without_tests_are_unscored(reward):
    assert reward([fenced(ADD), fenced(ADD)], test_cases=[[], None]) == [None, None]
    assert reward([fenced(ADD)]) == [None]


def test_reward_rejects_malformed_tests(reward):
    with pytest.raises(ValueError):
        reward([fenced(ADD)], test_cases=[[{"input": "1 2\n"}]])
    with pytest.raises(ValueError):
        reward([fenced(ADD)], test_cases=[["assert True", {"input": "", "output": ""}]])


def test_reward_has_a_name_for_logging(reward):
    assert reward.__name__ == "code"
    assert reward.required_columns == ("test_cases",)


def test_harness_keeps_the_nonce_out_of_the_program_text():
    plan = code_module._assert_plan("def f():\n    pass\n", ["assert f() is None"])
    (source, stdin), = plan.jobs
    assert json.loads(stdin)["nonce"] not in source


def test_reward_accepts_limits_as_a_mapping():
    reward = CodeReward(workers=1, limits={"wall_seconds": 2, "memory_mb": 256}, level=_sandbox_or_skip())
    try:
        assert reward.pool.limits == Limits(wall_seconds=2, memory_mb=256)
    finally:
        reward.close()


# ----------------------------------------------------------------------------------------------------------------
# `smolalign rewards test code`


def test_cli_scores_every_completion_in_one_parallel_batch(cli, tmp_path):
    _sandbox_or_skip()
    slow = "import time\ntime.sleep(0.6)\n"
    rows = [
        {"completion": fenced(slow + ADD), "test_cases": ADD_TESTS},  # 1.0
        {"completion": fenced(slow + "def add(a, b):\n    return 3\n"), "test_cases": ASSERTS},  # 0.5
        {"completion": "no code", "test_cases": ASSERTS},  # 0.0
        {"completion": fenced(slow + "print(3)\n"), "test_cases": json.dumps(ADD_TESTS)},  # 0.5
        {"completion": fenced(ADD), "test_cases": []},  # None
    ]
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    start = time.monotonic()
    code, out, err = cli("rewards", "test", "code", "--completions", path, "--params", '{"workers": 6}')
    elapsed = time.monotonic() - start
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[1] for line in lines[:5]] == ["1", "0.5", "0", "0.5", "None"]
    assert lines[5].split("; ")[1].startswith("6 sandboxed executions in ")
    assert elapsed < 6 * 0.6  # one after another they would take 3.6 s


def test_cli_names_the_row_with_malformed_tests(cli, tmp_path):
    _sandbox_or_skip()
    path = tmp_path / "completions.jsonl"
    path.write_text(json.dumps({"completion": "x", "test_cases": []}) + "\n"
                    + json.dumps({"completion": "x", "test_cases": [{"input": "1"}]}) + "\n")
    code, out, err = cli("rewards", "test", "code", "--completions", path)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: {path}#1: test_cases: a test must be an assert string or a dict with "
                                        "'input' and 'output', got {'input': '1'}"]


# ----------------------------------------------------------------------------------------------------------------
# open-r1's `verification_info` column (its code datasets, read by open_r1.rewards.code_reward)

OPENR1_ROW = {
    "problem": "Read two integers and print their sum.",
    "verification_info": {
        "language": "python",
        "test_cases": [{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
                       {"input": "10 -4\n", "output": "6", "type": "stdin_stdout"},
                       {"input": "0 0\n", "output": "0\n", "type": "stdin_stdout"},
                       {"input": "5 5\n", "output": "10\n", "type": "stdin_stdout"}],
    },
}


def test_open_r1_verification_info_is_read_as_stdin_stdout_tests():
    reward = CodeReward(workers=2, limits=LIMITS, level=_sandbox_or_skip(), test_column="verification_info")
    info = OPENR1_ROW["verification_info"]
    completions = [fenced(ADD),  # all four
                   fenced("a, b = map(int, input().split())\nprint(abs(a + b))\n"),  # abs() changes none of these sums
                   fenced("a, b = map(int, input().split())\nprint(a * b if a == b else a + b)\n"),  # 5 5 -> 25
                   fenced("print(3)\n")]  # only the first
    try:
        assert reward.required_columns == ("verification_info",)
        scores = reward(completions, verification_info=[info, json.dumps(info), info, info])
    finally:
        reward.close()
    assert scores == [1.0, 1.0, 0.75, 0.25]


@pytest.mark.parametrize(("info", "message"), [
    ({"language": "cpp", "test_cases": []}, "language 'cpp': the code reward runs Python only"),
    ({"language": "python", "test_cases": [{"fn_name": "f", "input": [1], "output": [2], "type": "function_call"}]},
     "a test of type 'function_call': only 'stdin_stdout' tests ({'input', 'output'}) are "
     "supported, got {'fn_name': 'f', 'input': [1], 'output': [2], 'type': 'function_call'}"),
    ({"language": "python", "test_cases": [{"input": "1\n", "type": "stdin_stdout"}]},
     "a test of type 'stdin_stdout': only 'stdin_stdout' tests ({'input', 'output'}) are "
     "supported, got {'input': '1\\n', 'type': 'stdin_stdout'}"),
])
def test_cli_refuses_verification_info_it_cannot_run(cli, tmp_path, info, message):
    _sandbox_or_skip()
    path = tmp_path / "completions.jsonl"
    rows = [{"completion": fenced(ADD), "verification_info": OPENR1_ROW["verification_info"]},
            {"completion": fenced(ADD), "verification_info": json.dumps(info)}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, out, err = cli("rewards", "test", "code", "--completions", path, "--params",
                         '{"test_column": "verification_info"}')
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: {path}#1: verification_info: {message}"]


def test_cli_scores_open_r1_rows(cli, tmp_path):
    _sandbox_or_skip()
    path = tmp_path / "completions.jsonl"
    rows = [{"completion": fenced(ADD), **OPENR1_ROW}, {"completion": fenced("print(3)\n"), **OPENR1_ROW}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, out, err = cli("rewards", "test", "code", "--completions", path, "--params",
                         '{"test_column": "verification_info", "workers": 2}')
    assert code == 0, err
    assert [line.split()[1] for line in out.splitlines()[:2]] == ["1", "0.25"]
    assert "8 sandboxed executions in " in out.splitlines()[2]
