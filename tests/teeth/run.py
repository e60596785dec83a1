"""The teeth tier: every claim's tests must fail when its feature is switched off.

    python tests/teeth/run.py                  the baseline (every listed test passes), then every mutation
    python tests/teeth/run.py --only resume    one claim (repeatable)
    python tests/teeth/run.py --check          only that each mutation applies once and each test id exists
    python tests/teeth/run.py --write-table    write docs/claims.md from tests/teeth/mutations.py

Each mutation is applied to a fresh copy of the repository (its tracked and untracked, not ignored files), and its
tests run there with the copy first on PYTHONPATH, so that subprocesses (accelerate launch, `python -m smolalign`)
run the mutated code too. A test counts as failing when it fails or errors, or is skipped for a reason .ci/skips does
not accept (a sandbox level that stops working shows as such a skip). Exit 1 when a mutation is not caught by every
one of its tests, no longer applies, or a listed test does not pass on the unmutated tree."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / ".ci"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_report import allowed_reasons  # noqa: E402
from mutations import FIGURES, MUTATIONS, Mutation  # noqa: E402

TABLE = REPO / "docs" / "claims.md"


def copy_repo(destination: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def apply(mutation: Mutation, root: Path) -> None:
    path = root / mutation.file
    text = path.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise ValueError(f"{mutation.claim}: the mutation's old text occurs {count} times in {mutation.file}")
    path.write_text(text.replace(mutation.old, mutation.new))


def run_tests(root: Path, tests: list[str], report: Path) -> dict[str, str]:
    """{node id: passed | failed | skipped: REASON} for each test, run in `root`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not gpu",
                    f"--junitxml={report}", *tests], cwd=root, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    outcomes = {}
    if not report.is_file():
        return outcomes
    for case in ET.parse(report).getroot().iter("testcase"):
        node = f"{case.get('file') or _file_of(case.get('classname'))}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[node] = "failed"
        elif (skipped := case.find("skipped")) is not None:
            outcomes[node] = "skipped: " + skipped.get("message", "").removeprefix("Skipped: ").strip()
        else:
            outcomes[node] = "passed"
    return outcomes


def _file_of(classname: str) -> str:
    return classname.replace(".", "/") + ".py"


def cases_of(test: str, outcomes: dict[str, str]) -> list[str]:
    """The outcomes of a listed test: itself, or every case of a parametrized test named without its parameters."""
    return [o for node, o in outcomes.items() if node == test or ("[" not in test and node.startswith(test + "["))]


def caught(test: str, outcomes: dict[str, str], accepted: list[str]) -> bool:
    """A listed test fails when it (or, named without parameters, one of its cases) fails, errors or is skipped for
    a reason .ci/skips does not accept, or when it could not even be collected under the mutation."""
    cases = cases_of(test, outcomes)
    if not cases:
        return True
    for outcome in cases:
        if outcome == "failed":
            return True
        if outcome.startswith("skipped: ") and not any(outcome.removeprefix("skipped: ").startswith(prefix)
                                                       for prefix in accepted):
            return True
    return False


def check_only(selected: list[Mutation]) -> int:
    problems = []
    for mutation in selected:
        text = (REPO / mutation.file).read_text()
        if text.count(mutation.old) != 1:
            problems.append(f"{mutation.claim}: old text occurs {text.count(mutation.old)} times in {mutation.file}")
    tests = sorted({t for m in selected for t in m.tests})
    files = sorted({t.split("::")[0] for t in tests})
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-m", "not gpu", *files], cwd=REPO, capture_output=True, text=True)
    collected = {line.strip(): "passed" for line in listed.stdout.splitlines() if "::" in line}
    problems += [f"no such test: {t}" for t in tests if not cases_of(t, collected)]
    print("\n".join(problems) or f"{len(selected)} mutations apply once; their {len(tests)} tests exist")
    return 1 if problems else 0


def table_text() -> str:
    rows = ["# Claims and the tests that prove them", "",
            "Every claim below has tests that fail when its feature is switched off: `make test-teeth` applies each "
            "mutation to a copy of the repository and requires every listed test to fail there (written from "
            "`tests/teeth/mutations.py` by `python tests/teeth/run.py --write-table`; "
            "`tests/unit/test_claims_table.py` fails when this page and that list disagree).", "",
            "| claim | stated in | tests | mutation (switches it off) |", "|---|---|---|---|"]
    for m in MUTATIONS:
        tests = "<br>".join(f"`{t}`" for t in m.tests)
        where = "<br>".join(f"[{page}]({page})" for page in m.where.split("; "))
        rows.append(f"| **{m.claim}**: {m.says} | {where} | {tests} | `{m.file}`: {m.why} |")
    rows += ["", "## Figures measured by benchmarks", "",
             "Speed and size figures are measured by scripts in `benchmarks/` against a baseline in the same run, "
             "never by timed tests; their latest results, with the machine, are in `benchmarks/RESULTS.md`.", "",
             "| figure | benchmark | RESULTS.md section | the mechanism's test |", "|---|---|---|---|"]
    rows += [f"| {f.figure} | `{f.benchmark}` | {f.results} | {f.mechanism or '-'} |" for f in FIGURES]
    return "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", help="a claim id (repeatable)")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--write-table", action="store_true")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the listed tests")
    args = parser.parse_args()
    if args.write_table:
        TABLE.write_text(table_text())
        return 0
    selected = [m for m in MUTATIONS if not args.only or m.claim in args.only]
    if args.only and len(selected) != len(set(args.only)):
        sys.exit(f"unknown claim in {args.only}; claims: {', '.join(m.claim for m in MUTATIONS)}")
    if args.check:
        return check_only(selected)
    accepted = allowed_reasons(REPO / ".ci" / "skips")
    work = Path(tempfile.mkdtemp(prefix="smolalign-teeth-"))
    failures = 0
    try:
        if not args.no_baseline:
            start = time.monotonic()
            base = work / "baseline"
            copy_repo(base)
            tests = sorted({t for m in selected for t in m.tests})
            outcomes = run_tests(base, tests, work / "baseline.xml")
            broken = [f"{t}: {cases_of(t, outcomes) or 'not run'}" for t in tests
                      if not cases_of(t, outcomes) or any(o != "passed" for o in cases_of(t, outcomes))]
            print(f"baseline: {len(tests) - len(broken)} of {len(tests)} listed tests pass unmutated "
                  f"({time.monotonic() - start:.0f} s)")
            if broken:
                print("\n".join(f"  NOT PASSING UNMUTATED {line}" for line in broken))
                return 1
            shutil.rmtree(base)
        print(f"{'claim':32} {'result':12} {'time':>6}  tests")
        for mutation in selected:
            start = time.monotonic()
            root = work / mutation.claim
            copy_repo(root)
            try:
                apply(mutation, root)
            except ValueError as exc:
                print(f"{mutation.claim:32} {'STALE':12} {0:5.0f}s  {exc}")
                failures += 1
                continue
            outcomes = run_tests(root, list(mutation.tests), work / f"{mutation.claim}.xml")
            missed = [t for t in mutation.tests if not caught(t, outcomes, accepted)]
            verdict = "caught" if not missed else "NOT CAUGHT"
            failures += bool(missed)
            detail = f"{len(mutation.tests)} of {len(mutation.tests)} fail" if not missed else \
                "; ".join(f"{t} {cases_of(t, outcomes) or 'not run'}" for t in missed)
            print(f"{mutation.claim:32} {verdict:12} {time.monotonic() - start:5.0f}s  {detail}", flush=True)
            shutil.rmtree(root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(selected) - failures} of {len(selected)} mutations caught by every one of their tests")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
