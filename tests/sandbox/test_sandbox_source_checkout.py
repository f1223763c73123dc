"""A sandboxed Python worker imports the evoharness this process runs, not the one the venv was installed from.

Run from another source checkout (``PYTHONPATH=other/checkout evoharness run``, as one runs a branch's worktree
against a shared venv), the sandbox binds that checkout's package, but the worker's environment is an allow-list
without PYTHONPATH: it found evoharness through the venv's editable install, a folder the sandbox does not show,
and every rollout was 'worker did not start', recorded as the harness's own failure (F2.harness_error)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import evoharness

PACKAGE = Path(evoharness.__file__).resolve().parent
PROBE = '''import json, sys
from pathlib import Path
from evoharness.sandbox.{module} import {cls}
from evoharness.sandbox.models import Limits
harness, work = Path(sys.argv[1]), Path(sys.argv[2])
r = {cls}().run([sys.executable, "-c", "import evoharness; print(evoharness.__file__)"], harness_dir=harness,
                 workdir=work, env={{}}, limits=Limits(wall_seconds=30))
print(json.dumps({{"host": __import__("evoharness").__file__, "ok": r.ok, "out": r.stdout, "err": r.stderr[-300:]}}))
'''


def _from_another_checkout(tmp_path: Path, dirs, module: str, cls: str) -> dict:
    checkout = tmp_path / "other-checkout"
    shutil.copytree(PACKAGE, checkout / "evoharness", ignore=shutil.ignore_patterns("__pycache__"))
    for p in (tmp_path, checkout):
        p.chmod(0o755)
    harness, work = dirs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module, cls=cls), str(harness), str(work)],
                         capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["host"] == str(checkout / "evoharness" / "__init__.py")  # the host runs the other checkout
    return got | {"checkout": str(checkout)}


def test_a_bwrap_worker_imports_the_checkout_the_host_runs(tmp_path, dirs):
    got = _from_another_checkout(tmp_path, dirs, "bwrap", "BwrapSandbox")
    assert got["ok"], got["err"]  # before: ModuleNotFoundError: No module named 'evoharness'
    assert got["out"].strip() == got["host"]


def test_an_unsandboxed_worker_imports_the_checkout_the_host_runs(tmp_path, dirs):
    got = _from_another_checkout(tmp_path, dirs, "base", "ProcessSandbox")
    assert got["ok"], got["err"]
    assert got["out"].strip() == got["host"]  # before: the venv's install, another version of the code
