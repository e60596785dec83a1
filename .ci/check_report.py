"""Read pytest's JUnit report: fail when no test ran, or when a test was skipped for a reason the skips file does not
list (usage: check_report.py REPORT.xml SKIPS)."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def allowed_reasons(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def main(report: str, skips: str) -> int:
    root = ET.parse(report).getroot()
    allowed = allowed_reasons(Path(skips))
    ran, refused = 0, []
    for case in root.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None:
            ran += 1
            continue
        reason = skipped.get("message", "")
        # pytest writes "Skipped: REASON" for pytest.skip(); skipif markers give the reason as it is.
        reason = reason.removeprefix("Skipped: ").strip()
        if not any(reason.startswith(prefix) for prefix in allowed):
            refused.append(f"{case.get('classname')}::{case.get('name')}: {reason}")
    if ran <= 0:
        print(f"CI: the test command ran no test ({report})")
        return 1
    if refused:
        print(f"CI: {len(refused)} test(s) skipped for a reason .ci/skips does not accept:")
        print("\n".join(f"  {line}" for line in refused))
        return 1
    print(f"CI: {ran} tests ran; every skip is one .ci/skips accepts")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
