"""Property-based fuzzing of the data row checks: any JSON row, in a file training reads, ends the dry run with
exit 0 or with exit 2 and one `error:` line, never a traceback; and the row check itself answers every value."""

import json
import tempfile
from pathlib import Path

from badinput import GOOD_CHAT, sft_recipe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smolalign.data.rows import ROLES, messages_problem

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)
ROLE = st.sampled_from([*ROLES, "robot", "User", ""]) | JSON
MESSAGE = st.fixed_dictionaries({"role": ROLE, "content": st.text(max_size=12) | JSON}) | JSON
ROW = (st.fixed_dictionaries({"messages": st.lists(MESSAGE, max_size=4) | JSON})
       | st.dictionaries(st.sampled_from(["messages", "prompt", "completion", "text", "tools"]), JSON, min_size=1,
                         max_size=3))


@given(value=st.lists(MESSAGE, max_size=5) | JSON)
@settings(max_examples=300, deadline=None)
def test_row_check_answers_any_value(value):
    problem = messages_problem(value)
    assert isinstance(problem, str)
    if not problem:  # accepted: a list of mappings with known roles and text content
        assert value and all(m["role"] in ROLES and isinstance(m["content"], str) for m in value)


@given(rows=st.lists(ROW, min_size=1, max_size=3))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_dry_run_on_any_rows_is_clean(rows, cli, tiny_dir):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        (path / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [GOOD_CHAT, *rows]))
        (path / "r.yaml").write_text(sft_recipe().replace("{dir}", folder).replace("{tiny}", str(tiny_dir)))
        code, _, err = cli("sft", str(path / "r.yaml"), "--dry-run")
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 0 or (code == 2 and len(lines) == 1 and lines[0].startswith("error: ")), (code, err)
