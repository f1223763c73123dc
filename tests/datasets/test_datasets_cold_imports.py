"""What a fresh `dataset export` process imports: every CLI command is a fresh process, so what it imports and never
uses is paid on every export (issue 17 item 3). Checked in a new interpreter, after a real export: the settings
(``evoharness.config``) do not import the roles' factory (the playbook, GitPython), and `--source all` with no training
queue yet does not import SQLAlchemy (the queue's module), which it never opens; an export that labels no run (the
default `--source healthy`, a run's export whose failed runs all have their label beside it) does not import the
labeller (every detector, ~240 regular expressions compiled), and one that labels does; nor PyYAML, which only a
--harness's policies need."""

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
                  if m.split(".")[0] in ("sqlalchemy", "git") or m.startswith("evoharness.roles.factory")
                  or m in ("evoharness.diagnosis.labeller", "yaml"))}))
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
    assert found == {"rc": 0, "held": ["evoharness.diagnosis.labeller"]}  # two failed runs labelled
    assert len((tmp_path / "o" / "data.jsonl").read_text().splitlines()) == 4
    assert not (tmp_path / "home" / "queue.db").exists()  # no queue made for it either


def test_an_export_that_labels_nothing_does_not_import_the_labeller(tmp_path):
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.diagnosis.models import LabelLine
    from evoharness.traces.store import TrajectoryStore

    trajs = [make_traj(f"x{i}", task=f"t{i}", score=1.0 if i % 2 else 0.0) for i in range(4)]
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    found = _held(tmp_path, "dataset", "export", "-t", str(src), "--out", str(tmp_path / "healthy"))
    assert found == {"rc": 0, "held": []}
    assert len((tmp_path / "healthy" / "data.jsonl").read_text().splitlines()) == 2
    # a run's trajectories with their labels beside them (as a run keeps them): every failed run's label reused
    run = tmp_path / "run"
    run.mkdir()
    labeller = Labeller()
    labels = {t.id: labeller.label(t) for t in trajs}
    TrajectoryStore(run / "trajectories.jsonl").add(trajs, labels=lambda t, digest: LabelLine.of(
        labels[t.id], trajectory_sha256=digest, labeller_fingerprint=labeller.fingerprint).model_dump_json())
    found = _held(tmp_path, "dataset", "export", "--source", "all", "-t", str(run), "--out", str(tmp_path / "o"))
    assert found == {"rc": 0, "held": []}
    meta = [json.loads(x) for x in (tmp_path / "o" / "metadata.jsonl").read_text().splitlines()]
    assert [m["failure_class"] for m in meta] == [labels[t.id].failure_class.value for t in trajs]
    assert "F" in "".join(m["failure_class"] for m in meta)  # failed runs among them, their classes read back


def test_the_roles_still_import_where_they_are_made():
    done = subprocess.run([sys.executable, "-c", "import evoharness.roles as r, sys; "
                           "print(r.make_roles.__module__, r.RoleError.__module__, hasattr(r, 'nothing'))"],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["evoharness.roles.factory", "evoharness.roles.errors", "False"], done.stderr
