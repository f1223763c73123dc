"""Load a script or sample writer that is no package module (benchmarks/*.py, scripts/*.py, a fixture's
make_sample.py) by its path, for a test to call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(path: Path, name: str, *, register: bool = False) -> ModuleType:
    """The module at ``path``, run once per call under ``name``. ``register``: put it in ``sys.modules`` first (a
    module whose dataclasses or pickling look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
