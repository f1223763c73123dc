"""scripts/export_same_bytes.py, the export helpers' byte-identity check (62 exports of real and hostile rows hashed
by two trees): its ``compare`` fails on any line that differs or is missing, and a wrong command line is one error
line. (A whole ``run`` takes minutes: the export helpers run it, not the suite.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "export_same_bytes.py"


def test_compare_fails_on_a_changed_or_missing_line(tmp_path, capsys):
    script = load_file(SCRIPT, "export_same_bytes")
    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    lines = ["tau-openai-all summary records=190 reused=0", "tau-openai-all/data.jsonl 685b 3011831",
             "tau-openai-all/metadata.jsonl 898b 43609"]
    before.write_text("\n".join(lines) + "\n")
    after.write_text("\n".join(lines) + "\n")
    assert script.compare(before, after) == 0
    assert "3 / 3 lines, 0 differ" in capsys.readouterr().out
    after.write_text("\n".join([lines[0], "tau-openai-all/data.jsonl 9999 3011831"]) + "\n")
    assert script.compare(before, after) == 1
    out = capsys.readouterr().out
    assert "- tau-openai-all/data.jsonl 685b 3011831\n+ tau-openai-all/data.jsonl 9999 3011831" in out
    assert "+ (none)" in out and "3 / 2 lines, 2 differ" in out


def test_a_wrong_command_line_is_one_error_line(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "run", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and proc.stderr.startswith("error: usage: export_same_bytes.py"), proc.stderr


def test_a_missing_input_is_one_error_line(tmp_path, capsys, monkeypatch):
    """From a clone that is not beside ../shared/data, `prepare` ended in the importer's traceback; `compare` of a file
    not there in FileNotFoundError's."""
    script = load_file(SCRIPT, "export_same_bytes")
    monkeypatch.setattr(script, "DATA", tmp_path / "shared" / "data")
    assert script.main(["prepare", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {tmp_path / 'shared' / 'data'}: no such directory: prepare reads the public data folder "
                   "beside the repository (../shared/data)"], err
    assert not (tmp_path / "work").exists()
    assert script.main(["compare", str(tmp_path / "before.txt"), str(tmp_path / "after.txt")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "before.txt" in err[0], err


def test_help_prints_the_usage(capsys):
    script = load_file(SCRIPT, "export_same_bytes")  # --help was the usage error, exit 2
    assert script.main(["--help"]) == 0
    assert "export_same_bytes.py compare BEFORE.txt AFTER.txt" in capsys.readouterr().out
