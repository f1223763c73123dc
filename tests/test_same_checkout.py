"""A checkout's scripts refuse to measure another checkout's evoharness (benchrepeat.same_checkout): every script
under benchmarks/ and scripts/ that imports evoharness, not only the four rule-check ones."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.benchrepeat import same_checkout

ROOT = Path(__file__).resolve().parents[1]


def _imports_evoharness(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "evoharness":
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "evoharness" for a in node.names):
            return True
    return False


SCRIPTS = sorted(str(p.relative_to(ROOT)) for p in [*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")]
                 if _imports_evoharness(p))


def test_a_script_of_another_checkout_is_refused_naming_both(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    other = tmp_path / "worktree"
    (other / "evoharness").mkdir(parents=True)
    (other / "evoharness" / "__init__.py").write_text("")
    (other / "scripts").mkdir()
    script = other / "scripts" / "dump_labels.py"
    with pytest.raises(SystemExit) as e:
        same_checkout(str(script))
    message = str(e.value.code)
    assert message.startswith("error: ") and str(other) in message and str(ROOT) in message
    assert f"PYTHONPATH={other}" in message


@pytest.mark.parametrize("script", SCRIPTS)
def test_this_checkouts_scripts_run_on_its_own_code(script, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert same_checkout(str(ROOT / script)) is None


def test_pythonpath_is_a_choice_and_a_folder_without_the_package_is_no_checkout(tmp_path, monkeypatch):
    other = tmp_path / "worktree"
    (other / "evoharness").mkdir(parents=True)
    (other / "evoharness" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    assert same_checkout(str(other / "benchmarks" / "label_accuracy.py")) is None
    monkeypatch.delenv("PYTHONPATH")
    assert same_checkout(str(tmp_path / "copied" / "benchmarks" / "label_accuracy.py")) is None


def test_the_scripts_that_import_evoharness_are_found():
    assert len(SCRIPTS) >= 29 and {"scripts/dump_labels.py", "benchmarks/rollout_overhead.py"} <= set(SCRIPTS)
    assert "scripts/import_share.py" not in SCRIPTS  # it reads evoharness's source, imports none of it


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_that_imports_evoharness_checks_before_it_runs(script):
    """Only the four rule-check scripts checked: rollout_overhead.py, export_scale.py, demo_pair.py and 22 more run
    from a worktree without PYTHONPATH measured the first checkout's code and said nothing."""
    text = (ROOT / script).read_text()
    assert re.search(r'^if __name__ == "__main__":\n(    from evoharness\.benchrepeat import same_checkout\n\n)?'
                     r"    same_checkout\(__file__\)\n", text, re.M), script


@pytest.mark.parametrize("name", ["scripts/dump_labels.py", "benchmarks/rollout_overhead.py"])
def test_run_from_a_worktree_of_this_checkout_the_script_refuses(tmp_path, name):
    """End to end: a worktree's script run by an interpreter whose evoharness is this checkout's."""
    other = tmp_path / "worktree"
    (other / "evoharness").mkdir(parents=True)
    (other / "evoharness" / "__init__.py").write_text("")
    (other / name).parent.mkdir()
    (other / name).write_text((ROOT / name).read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # the interpreter's evoharness is this checkout's (first on its path), the script another checkout's
    script = str(other / name)
    run = (f"import sys, runpy; sys.path.insert(0, {str(ROOT)!r}); "
           f"sys.argv = [{name!r}, {str(tmp_path / 'x.tsv')!r}]; "
           f"runpy.run_path({script!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and out.stderr.startswith("error: ") and str(other) in out.stderr
    assert not (tmp_path / "x.tsv").exists()
