"""The one JSON-lines reader (smolalign.jsonl): rows numbered by their line from 0, blank lines skipped, a bad line
refused naming file#row, or left out where a killed writer may have torn it; and through the commands that read
JSON lines a user gave, the refusal reaches the user as exit 2 naming the file and row."""

import json

import pytest

from smolalign.errors import SmolalignError
from smolalign.jsonl import read_jsonl


def write(tmp_path, data: bytes):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(data)
    return path


def test_blank_lines_are_skipped_and_rows_keep_their_line_number(tmp_path):
    path = write(tmp_path, b'{"a": 1}\n\n   \n{"a": 2}\r\n\n{"a": 3}')  # no newline at the end, one CRLF
    assert list(read_jsonl(path)) == [(0, {"a": 1}), (3, {"a": 2}), (5, {"a": 3})]


@pytest.mark.parametrize(("data", "problem"), [
    (b'{"a": 1}\n\n{"a": \n', "#2 (line 3): invalid JSON (Expecting value at column 7)"),
    (b'{"a": 1}\n[1, 2]\n', "#1 (line 2): a row must be a JSON object, got list"),
    (b'{"a": 1}\n\n\n"text"\n', "#3 (line 4): a row must be a JSON object, got str"),
    (b'{"a": 1}\n{"a": "caf\xe9"}\n', "#1 (line 2): not UTF-8 text (byte 0xe9)"),
])
def test_a_bad_line_is_refused_naming_file_and_row(tmp_path, data, problem):
    path = write(tmp_path, data)
    with pytest.raises(SmolalignError) as refused:
        list(read_jsonl(path, "data row"))
    assert str(refused.value).startswith(f"data row {path}{problem}")


def test_a_line_torn_by_a_killed_writer_is_left_out_when_asked(tmp_path):
    path = write(tmp_path, b'{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n[4]\n{"step": "caf\xe9"}\n')
    assert list(read_jsonl(path, skip_bad_lines=True)) == [(0, {"step": 1}), (2, {"step": 3}),
                                                             (4, {"step": "caf\ufffd"})]


def test_a_line_separator_inside_a_string_does_not_split_the_row(tmp_path):
    row = {"completion": "one\u2028two\x85three"}  # str.splitlines splits at both
    path = write(tmp_path, (json.dumps(row, ensure_ascii=False) + "\n").encode())
    assert list(read_jsonl(path)) == [(0, row)]


def test_the_commands_refuse_a_bad_line_naming_file_and_row(cli, tmp_path):
    completions = write(tmp_path, b'{"completion": "2"}\n\n{"completion": \n')
    code, _, err = cli("rewards", "test", "math_accuracy", "--completions", str(completions))
    assert code == 2 and f"--completions {completions}#2 (line 3): invalid JSON" in err
    completions.write_bytes(b'{"completion": "2"}\n{"answer": "2"}\n')
    code, _, err = cli("rewards", "test", "math_accuracy", "--completions", str(completions))
    assert code == 2 and f"--completions {completions}#1: each line needs a completion" in err
