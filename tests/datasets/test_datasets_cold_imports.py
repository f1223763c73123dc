"""What a fresh `dataset export` process imports: every CLI command is a fresh process, so what it imports and never
uses is paid on every export (issue 17 item 3). Checked in a new interpreter, after a real export: the settings
(``evoharness.config``) do not import the roles' factory (the playbook, GitPython), and `--source all` with no training
queue yet does not import SQLAlchemy (the queue's module), which it never opens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evoharness.traces.store import write_trajectories

from .helpers import make_traj

ROOT = Path(__file__).resolve().parents[2]

PROBE = """import json, sys
from evoharness.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "held": sorted(m for m in sys.modules
                  if m.split(".")[0] in ("sqlalchemy", "git") or m.startswith("evoharness.roles.factory"))}))
"""


def _held(tmp_path: Path, *argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, "--set", f"home={tmp_path / 'home'}", *argv],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_export_with_no_queue_yet_imports_neither_sqlalchemy_nor_the_roles(tmp_path):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj(f"x{i}", task=f"t{i}", score=1.0 if i % 2 else 0.0) for i in range(4)])
    found = _held(tmp_path, "dataset", "export", "--source", "all", "-t", str(src), "--out", str(tmp_path / "o"))
    assert found == {"rc": 0, "held": []}
    assert len((tmp_path / "o" / "data.jsonl").read_text().splitlines()) == 4
    assert not (tmp_path / "home" / "queue.db").exists()  # no queue made for it either


def test_the_roles_still_import_where_they_are_made():
    done = subprocess.run([sys.executable, "-c", "import evoharness.roles as r, sys; "
                           "print(r.make_roles.__module__, r.RoleError.__module__, hasattr(r, 'nothing'))"],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["evoharness.roles.factory", "evoharness.roles.errors", "False"], done.stderr
