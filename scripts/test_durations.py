"""Write tests/durations.json: seconds per test file from a pytest JUnit XML report.

    .venv/bin/python -m pytest --junitxml=/tmp/suite.xml
    .venv/bin/python scripts/test_durations.py /tmp/suite.xml

Only the order matters: with ``EVOHARNESS_TEST_WORKERS=N`` (pytest-xdist, ``--dist loadfile``) the
files are handed out slowest first (tests/conftest.py), so the slow ones start early instead of leaving
one worker busy at the end while the others wait. A stale or missing entry only costs balance.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "durations.json"


def file_of(classname: str) -> str | None:
    """``tests.graph.test_graph_crash[.Class]`` -> ``tests/graph/test_graph_crash.py`` (the longest prefix
    that is a file of the checkout)."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (ROOT / path).is_file():
            return path
    return None


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):  # it read "--help" as the report's path: "--help: no such file"
        print(__doc__)
        return 0
    if len(argv) != 1:
        print("error: give one JUnit XML report (pytest --junitxml=FILE)", file=sys.stderr)
        return 2
    if not Path(argv[0]).is_file():  # it said "give one JUnit XML report" of the one it was given
        print(f"error: {argv[0]}: no such file (write it first: pytest --junitxml={argv[0]})", file=sys.stderr)
        return 2
    try:
        root = ET.parse(argv[0]).getroot()
    except ET.ParseError as e:
        print(f"error: {argv[0]}: not XML ({e})", file=sys.stderr)
        return 2
    seconds: Counter[str] = Counter()
    for case in root.iter("testcase"):
        path = file_of(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time") or 0)
    if not seconds:
        print(f"error: {argv[0]}: no test case of this checkout", file=sys.stderr)
        return 2
    OUT.write_text(json.dumps({k: round(v, 1) for k, v in seconds.most_common() if v >= 1.0}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(seconds)} files, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
