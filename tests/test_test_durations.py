"""scripts/test_durations.py (docs/testing.md): a report that is not there is named, not asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_durations.py"


def test_a_missing_report_is_named_in_one_error_line(tmp_path):
    missing = tmp_path / "suite.xml"
    run = subprocess.run([sys.executable, str(SCRIPT), str(missing)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == f"error: {missing}: no such file (write it first: pytest --junitxml={missing})\n"
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr == "error: give one JUnit XML report (pytest --junitxml=FILE)\n"


def test_help_prints_the_usage():
    """It read --help as the report's path: 'error: --help: no such file (write it first: pytest --junitxml=--help)'."""
    run = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "scripts/test_durations.py /tmp/suite.xml" in run.stdout, (run.stdout, run.stderr)
