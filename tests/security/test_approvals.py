"""Two concurrent approves never both drive a run: one decision at a time per run (a file lock across
processes, a claimed flag in the service)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evoharness.errors import InputError
from evoharness.graph.locks import decision_lock as _decision_lock


def test_a_second_decision_while_one_is_applied_is_refused(tmp_path):
    with _decision_lock(tmp_path, "run-x"):
        with pytest.raises(InputError, match="already being applied"):
            with _decision_lock(tmp_path, "run-x"):
                pass
        # and from another process
        code = ("import sys; from pathlib import Path; from evoharness.graph.locks import decision_lock\n"
                "try:\n    with decision_lock(Path(sys.argv[1]), 'run-x'): sys.exit(0)\n"
                "except Exception as e:\n    print(e); sys.exit(3)\n")
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 3 and "already being applied" in proc.stdout
    with _decision_lock(tmp_path, "run-x"):  # released: the next decision goes ahead
        pass
