"""A checkout's rule-check scripts refuse to measure another checkout's evoharness (benchrepeat.same_checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoharness.benchrepeat import same_checkout

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ["scripts/dump_labels.py", "benchmarks/label_invariance.py", "benchmarks/label_throughput.py",
           "benchmarks/label_accuracy.py"]


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


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_rule_check_script_checks_before_it_runs(script):
    text = (ROOT / script).read_text()
    assert 'if __name__ == "__main__":\n    same_checkout(__file__)\n' in text


def test_run_from_a_worktree_of_this_checkout_the_script_refuses(tmp_path):
    """End to end: a worktree's script run by an interpreter whose evoharness is this checkout's."""
    other = tmp_path / "worktree"
    (other / "evoharness").mkdir(parents=True)
    (other / "evoharness" / "__init__.py").write_text("")
    (other / "scripts").mkdir()
    (other / "scripts" / "dump_labels.py").write_text((ROOT / "scripts" / "dump_labels.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # the interpreter's evoharness is this checkout's (first on its path), the script another checkout's
    script = str(other / "scripts" / "dump_labels.py")
    run = (f"import sys, runpy; sys.path.insert(0, {str(ROOT)!r}); "
           f"sys.argv = ['dump_labels.py', {str(tmp_path / 'x.tsv')!r}]; "
           f"runpy.run_path({script!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and out.stderr.startswith("error: ") and str(other) in out.stderr
    assert not (tmp_path / "x.tsv").exists()
