"""The fourteenth pass's labelling cuts (docs/benchmarks.md, "fourteenth session").

- No ``import`` statement runs inside a function the labeller calls per write or per message: one costs about a
  microsecond at every call even with the module loaded (the ninth pass's largest cut), and the violation log's
  ``_workspace_edit`` / ``_ends_run`` (every write of a failed run) and ``write_calls`` still made two or three of
  them. A module that imports another at its top, which imports it back, binds it at its foot instead (invariants
  reads detectors so). ``TraceView.violations`` keeps its import (once per failed run; context is imported by every
  module below invariants, so it cannot import invariants at its top or foot).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import evoharness.diagnosis
from evoharness.diagnosis.catalogue import default_catalogue

PACKAGE = Path(evoharness.diagnosis.__file__).parent
# a function allowed its import: (module, qualified name) -- once per failed run, not per write or message
ONCE_PER_RUN = {("context", "TraceView.violations")}


def _labelling_modules() -> list[str]:
    """The diagnosis modules the default catalogue's detectors come from, and those they import."""
    names = {type(d).__module__ for d in default_catalogue()} | {
        "evoharness.diagnosis.labeller", "evoharness.diagnosis.context", "evoharness.diagnosis.invariants",
        "evoharness.diagnosis.consent", "evoharness.diagnosis.write_targets", "evoharness.diagnosis.models"}
    for name in list(names):
        module = importlib.import_module(name)
        names |= {m.__name__ for m in vars(module).values()
                  if type(m) is type(ast) and m.__name__.startswith("evoharness.diagnosis.")}
    return sorted(n.rsplit(".", 1)[1] for n in names)


def _imports_in_functions(source: str) -> list[str]:
    found = []

    def walk(node: ast.AST, scope: list[str], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                found.append(".".join(scope))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                walk(child, [*scope, child.name], in_function or not isinstance(child, ast.ClassDef))
            else:
                walk(child, scope, in_function)

    walk(ast.parse(source), [], False)
    return found


@pytest.mark.parametrize("module", _labelling_modules())
def test_no_function_the_labeller_runs_holds_an_import_statement(module: str) -> None:
    found = [f for f in _imports_in_functions((PACKAGE / f"{module}.py").read_text())
             if (module, f) not in ONCE_PER_RUN]
    assert not found, f"{module}: import statements inside {found}"


def test_the_scan_finds_an_import_inside_a_method() -> None:
    src = "import re\nclass A:\n    def f(self):\n        from os import path\n        return path\n"
    assert _imports_in_functions(src) == ["A.f"]


def test_either_module_of_the_cycle_imports_first() -> None:
    for first in ("invariants", "detectors", "context", "consent"):
        code = (f"import evoharness.diagnosis.{first}\nfrom evoharness.diagnosis import invariants\n"
                "assert invariants._detectors.delivers is not None")
        assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0, first
