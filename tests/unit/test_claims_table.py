"""The claims table (docs/claims.md) is what tests/teeth/mutations.py holds, and every mutation still applies to the
code exactly once and names tests that exist: the teeth tier can only drift when this fails."""

import ast
import sys

from paths import REPO

sys.path.insert(0, str(REPO / "tests" / "teeth"))
sys.path.insert(0, str(REPO / ".ci"))

from mutations import MUTATIONS  # noqa: E402
from run import TABLE, table_text  # noqa: E402


def test_the_claims_page_is_written_from_the_mutation_list():
    assert TABLE.read_text() == table_text(), "run `python tests/teeth/run.py --write-table`"


def test_every_mutation_applies_exactly_once():
    for mutation in MUTATIONS:
        count = (REPO / mutation.file).read_text().count(mutation.old)
        assert count == 1, f"{mutation.claim}: the old text occurs {count} times in {mutation.file}"
        assert mutation.old != mutation.new


def test_every_listed_test_is_a_test_function():
    for mutation in MUTATIONS:
        for test in mutation.tests:
            path, name = test.split("::")
            functions = {node.name for node in ast.walk(ast.parse((REPO / path).read_text()))
                         if isinstance(node, ast.FunctionDef)}
            assert name.split("[")[0] in functions, f"{mutation.claim}: {test}"


def test_claim_ids_are_unique():
    claims = [m.claim for m in MUTATIONS]
    assert len(claims) == len(set(claims))
