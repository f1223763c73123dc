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


# SWE-agent's edit tools refuse an edit that breaks the file's syntax (tools/windowed_edit_*: _LINT_ERROR_TEMPLATE)
LINT_REJECTION = (
    "Your proposed edit has introduced new syntax error(s). Please read this error message carefully and then retry "
    "editing the file.\n\nERRORS:\n\n- E999 SyntaxError: invalid syntax\n\nThis is how your edit would have looked if "
    "applied\n------------------------------------------------\n4:def division(a: float, b: float) -> float::\n"
    "------------------------------------------------\nYour changes have NOT been applied. Please fix your edit "
    "command and try again.\nDO NOT re-run the same failed edit command. Running it again will lead to the same "
    "error.\n(Open file: /SWE-agent__test-repo/tests/missing_colon.py)\n(Current directory: /SWE-agent__test-repo)\n"
    "bash-$")


def _with_lint_rejections(tmp_path: Path, tries: int, resolved: bool, recover: bool = True):
    """The real run with ``tries`` edits the linter refused (the same edit each time) before its edit that went
    through; ``recover=False`` ends the run there instead (no accepted edit, no later step)."""
    data = json.loads((REAL / "test-repo" / "trajs" / f"{TEST_REPO}.traj").read_text())
    hist = data["history"]
    at = next(i for i, m in enumerate(hist) if m.get("action", "").startswith("edit "))
    line = "def division(a: float, b: float) -> float"
    wrong = {"search": line, "replace": line + "::"}
    inserted = []
    for k in range(tries):
        call_id = f"call_lint_{k}"
        inserted += [
            {**hist[at], "tool_calls": [{"function": {"arguments": json.dumps(wrong), "name": "edit"}, "id": call_id,
                                         "type": "function"}],
             "action": f"edit '{wrong['search']}' '{wrong['replace']}' False"},
            {"role": "tool", "content": LINT_REJECTION, "agent": "main", "tool_call_ids": [call_id],
             "message_type": "observation"}]
    data["history"] = hist[:at] + inserted + (hist[at:] if recover else [])
    if not recover:
        data["info"]["exit_status"] = "exit_cost"
    out = tmp_path / "run"
    (out / "trajs").mkdir(parents=True)
    (out / "trajs" / f"{TEST_REPO}.traj").write_text(json.dumps(data))
    (out / "logs" / TEST_REPO).mkdir(parents=True)
    (out / "logs" / TEST_REPO / "report.json").write_text(json.dumps({TEST_REPO: {"resolved": resolved}}))
    (t,) = load_paths([out])
    return t


@pytest.mark.parametrize("tries", [1, 3])
@pytest.mark.parametrize("resolved", [True, False])
def test_edits_the_linter_refused_before_one_went_through_are_friction_not_the_failure(tmp_path, tries, resolved):
    """A recovered rejection is never the first signal, and the same refused edit sent again until the agent got
    past it is no loop: three of them were ``F3.repeated_action`` (the linter's refusal was no friction to the
    rules), the resolved run's signal and the failed run's first signal."""
    t = _with_lint_rejections(tmp_path, tries, resolved)
    lab = Labeller().label(t)
    assert not [s.id for s in lab.signals if s.id.startswith(("F2.", "F3."))]
    assert (lab.failure_class.value == "healthy") == resolved
    if not resolved:
        assert lab.first_signal.id.startswith("F4.")


def test_a_run_that_never_got_past_the_linter_fails_by_it(tmp_path):
    """The run ends on two refused edits (its budget ran out): the refusal is its failure (F2), at the first."""
    t = _with_lint_rejections(tmp_path, 2, resolved=False, recover=False)
    lab = Labeller().label(t)
    first_refusal = next(i for i, m in enumerate(t.messages) if m["role"] == "tool" and
                         str(m["content"]).startswith("Your proposed edit"))
    assert (lab.first_signal.id, lab.first_signal.step) == ("F2.tool_error", first_refusal)


@pytest.mark.parametrize(("observation", "refused"), [
    (LINT_REJECTION, True),
    ("Your bash command contained syntax errors and was NOT executed. Please fix the syntax errors and try again.",
     True),
    ("Interactive operation 'vim' is not supported by this environment.", True),
    ("8.2\nSyntaxError: Your proposed edit has introduced new syntax error(s) -- quoted by a test", False),
])
def test_swe_agents_refusals_are_tool_errors_and_other_output_is_not(tmp_path, observation, refused):
    data = json.loads((REAL / "test-repo" / "trajs" / f"{TEST_REPO}.traj").read_text())
    i = next(k for k, m in enumerate(data["history"]) if m["role"] == "tool" and m["content"].startswith("8.2"))
    data["history"][i]["content"] = observation
    (tmp_path / f"{TEST_REPO}.traj").write_text(json.dumps(data))
    (t,) = load_paths([tmp_path / f"{TEST_REPO}.traj"])
    assert [(e.type, e.step) for e in t.events] == ([("tool_error", i)] if refused else [])
