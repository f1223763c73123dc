"""The ninth pass's labelling cost cuts keep the labeller's modules and answers (docs/benchmarks.md, "ninth session").

The diagnosis modules import one another at load where no cycle forbids it: a function-level import costs about a
microsecond at every call, and the detectors made ~20 of them per failed run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["context", "invariants", "multiagent", "write_targets", "detectors", "coding",
                                    "stalls", "environment", "claims", "elapsed", "amounts", "catalogue", "labeller"])
def test_each_diagnosis_module_imports_on_its_own(module):
    # detectors imports invariants, multiagent and write_targets at load; none of them may import detectors at load,
    # or the one imported first would find the other half-made
    out = subprocess.run([sys.executable, "-c", f"import evoharness.diagnosis.{module}"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
