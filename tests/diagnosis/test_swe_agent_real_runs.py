"""Real SWE-agent ``.traj`` files (tests/fixtures/traces/swe_agent_real: copied unchanged from SWE-agent's own
repository, MIT) through the importer and the labeller, with the held-back SWE-bench properties: a resolved run is
Healthy, and a failed run's patch is located where the agent wrote it, not where it opened the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import detect_format, load_paths

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "swe_agent_real"
TEST_REPO = "6e44b9__sweagenttestrepo-1c2844"  # gpt-4o, function calling: find_file, open, edit, python3, submit


def _run_with_verdict(tmp_path: Path, resolved: bool):
    """The run in a SWE-bench layout with the harness's report beside it (the run has none of its own)."""
    shutil.copytree(REAL / "test-repo", tmp_path / "run")
    (tmp_path / "run" / "logs" / TEST_REPO).mkdir(parents=True)
    (tmp_path / "run" / "logs" / TEST_REPO / "report.json").write_text(json.dumps({TEST_REPO: {"resolved": resolved}}))
    (t,) = load_paths([tmp_path / "run"])
    return t


def test_the_real_run_imports_as_swe_agent_with_its_submission():
    path = REAL / "test-repo" / "trajs" / f"{TEST_REPO}.traj"
    assert detect_format(path) == "swe-agent"
    (t,) = load_paths([path])
    raw = json.loads(path.read_text())
    assert t.model == "gpt-4o" and t.final_answer == raw["info"]["submission"]
    assert [c.name for c in t.tool_calls()] == ["find_file", "open", "edit", "bash"]  # submit ends the history
    assert t.score is None


@pytest.mark.parametrize("resolved", [True, False])
def test_a_resolved_run_is_healthy_and_a_failed_one_is_located_at_its_edit_not_its_open(tmp_path, resolved):
    """``open`` (SWE-agent's windowed viewer) only reads: it was taken for the patch's first write (the call names
    the patched file), so the same run judged unresolved was located at step 4 (open) instead of step 6 (edit)."""
    t = _run_with_verdict(tmp_path, resolved)
    lab = Labeller().label(t)
    if resolved:
        assert t.score == 1.0 and lab.first_signal is None and lab.failure_class.value == "healthy"
        return
    assert t.score == 0.0
    edit = next(i for i, m in enumerate(t.messages) for c in m.get("tool_calls") or ()
                if c["function"]["name"] == "edit")
    assert edit == 6 and (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", edit)
    # the edit names no file: it writes the one ``open`` opened, which the patch changes
    assert lab.first_signal.evidence.endswith("(the open file: /SWE-agent__test-repo/tests/missing_colon.py)")
