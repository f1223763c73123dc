"""The SWE held-back properties on shapes the public runs do not show yet: every resolved run stays Healthy, and a
failed run gets no process label (F2/F3) for an edit -> re-run cycle or a rejection it recovered from. Each variant
is every mini-swe-agent run of ../shared/data with messages inserted before its first action, written in each format
the held-back sets may come in (v1; v2 tool calls, text, Responses API; SWE-agent ``.traj``) and read by the importer
(``_mini_swe_variant``). Also: every resolved run among the vendored SWE fixtures is Healthy."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from tests.diagnosis.test_held_back_properties import PROCESS, REJECTION, SWE_FORMATS, _first_action, _mini_swe_variant

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# the SWE fixtures vendored before 2026-12-05's blind set (a new set joins once its blind scoring is done)
SWE_FIXTURES = ("data/mini_swe_agent_sample", "traces/mini_swe_v2", "traces/swe_agent", "traces/swe_agent_real")
FAIL = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\nAssertionError: 1 != 2\n</output>"
OK = "<returncode>0</returncode>\n<output>\n</output>"


def _say(command: str, thought: str = "THOUGHT: next.") -> dict:
    return {"role": "assistant", "content": f"{thought}\n\n```bash\n{command}\n```"}


def _result(text: str) -> dict:
    return {"role": "user", "content": text}


def _insert(messages, added):
    i = _first_action(messages)
    return messages[:i] + added + messages[i:]


def _rejection_fixed_two_turns_later(messages):
    """An edit sent with a second block (rejected), a read-only look, then the edit alone."""
    edit = "sed -i 's/x0/y0/' src/m.py"
    return _insert(messages, [
        {"role": "assistant", "content": f"THOUGHT: fix and run.\n\n```bash\n{edit}\n```\n\n```bash\npython r.py\n```"},
        _result(REJECTION), _say("grep -n x0 src/m.py"), _result(OK), _say(edit), _result(OK)])


def _rejected_with_different_faults(messages):
    """Three rejections in a row, each for another fault (two blocks, no block, two blocks), then the action."""
    two = {"role": "assistant", "content": "THOUGHT: both.\n\n```bash\nls\n```\n\n```bash\npwd\n```"}
    none = {"role": "assistant", "content": "THOUGHT: I will look at the file next."}
    zero = ("Please always provide EXACTLY ONE action in triple backticks, found 0 actions.\n\n"
            "Please format your action in triple backticks as shown in <response_example>.")
    return _insert(messages, [two, _result(REJECTION), none, _result(zero), two, _result(REJECTION)])


def _sed_and_rerun_in_one_command(messages):
    """Three rounds of ``sed -i ... && python reproduce.py`` in one command, the same failure each time."""
    added = []
    for k in range(3):
        added += [_say(f"sed -i 's/x{k}/y{k}/' src/m.py && python reproduce.py"), _result(FAIL)]
    return _insert(messages, added)


def _heredoc_edit_then_test(messages):
    """Three rounds of rewriting a file through a heredoc, then the same test run with the same failure."""
    added = []
    for k in range(3):
        added += [_say(f"cat <<'EOF' > src/m.py\ndef f(x):\n    return x + {k}\nEOF"), _result(OK),
                  _say("python -m pytest tests/test_m.py -q"), _result(FAIL)]
    return _insert(messages, added)


def _python_edit_then_rerun(messages):
    """Three rounds of a Python heredoc rewriting the file (a name bound to its path), then the same re-run."""
    added = []
    for k in range(3):
        script = (f"python - <<'EOF'\np = 'src/m.py'\ns = open(p).read()\nwith open(p, 'w') as f:\n"
                  f"    f.write(s.replace('x{k}', 'y{k}'))\nEOF")
        added += [_say(script), _result(OK), _say("python reproduce.py"), _result(FAIL)]
    return _insert(messages, added)


def _windowed_edit_cycle(messages):
    """SWE-agent's classic editor: ``open`` the file, then three rounds of ``edit N:M`` and a re-run; the first edit
    refused by its linter and re-sent fixed."""
    lint = ("Your proposed edit has introduced new syntax error(s). Please read this error message carefully and then "
            "retry editing the file.\n\nYour changes have NOT been applied.")
    added = [_say("open src/m.py 10"), _result("[File: /testbed/src/m.py (40 lines total)]\n10:    return x")]
    added += [_say("edit 10:10\n      return x + 0\nend_of_edit"), _result(lint)]
    for k in range(3):
        added += [_say(f"edit 10:10\n    return x + {k}\nend_of_edit"), _result("File updated."),
                  _say("python reproduce.py"), _result(FAIL)]
    return _insert(messages, added)


SHAPES = [_rejection_fixed_two_turns_later, _rejected_with_different_faults, _sed_and_rerun_in_one_command,
          _heredoc_edit_then_test, _python_edit_then_rerun, _windowed_edit_cycle]


@pytest.mark.parametrize("fmt", SWE_FORMATS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("resolved", [True, False])
def test_no_process_label_on_recovered_rejections_and_edit_rerun_cycles(full_shared_data, tmp_path, resolved, shape,
                                                                         fmt):
    labels = _mini_swe_variant(full_shared_data, tmp_path, resolved, shape, fmt)
    assert all((lab.failure_class == "healthy") == resolved for lab in labels)
    assert not [(lab.trajectory_id, lab.first_signal.id) for lab in labels if lab.failure_class in PROCESS]
    # no F2 / F3 signal fires at all, first or not: the inserted friction was recovered, the cycles progress
    fired = [(lab.trajectory_id, s.id) for lab in labels for s in lab.signals
             if s.id.startswith("F3.") or s.id in ("F2.format_rejected", "F2.tool_error")]
    assert not fired


@pytest.mark.parametrize("shape", [_rejection_fixed_two_turns_later, _rejected_with_different_faults],
                         ids=lambda f: f.__name__.strip("_"))
def test_the_inserted_rejections_are_read_as_rejections(full_shared_data, tmp_path, shape):
    """The shapes' rejections reach the labeller as format rejections (else the property above checks nothing)."""
    out = tmp_path / "v1"
    _mini_swe_variant(full_shared_data, out, False, shape, "v1")
    trajs = list(load_paths([out / "failed"]))
    assert len(trajs) == 10
    assert all(sum(e.type == "format_rejected" for e in t.events) >= (1 if shape is _rejection_fixed_two_turns_later
                                                                       else 3) for t in trajs)


def test_every_resolved_swe_fixture_run_is_healthy():
    labeller = Labeller()
    trajs = [t for rel in SWE_FIXTURES for t in load_paths([FIXTURES / rel])]
    resolved = [t for t in trajs if t.score == 1.0]
    assert len(trajs) >= 9 and resolved  # the fixtures hold resolved and unresolved runs
    assert [(t.id, labeller.label(t).failure_class) for t in resolved
            if labeller.label(t).failure_class != "healthy"] == []


def _reruns_without_an_edit(messages):
    return _insert(messages, [m for _ in range(3) for m in (_say("python reproduce.py"), _result(FAIL))])


def _the_same_edit_resent(messages):
    return _insert(messages, [m for _ in range(3)
                              for m in (_say("sed -i 's/x/y/' src/m.py && python reproduce.py"), _result(FAIL))])


@pytest.mark.parametrize("fmt", ["v1", "swe-agent"])
@pytest.mark.parametrize("shape", [_reruns_without_an_edit, _the_same_edit_resent], ids=lambda f: f.__name__.strip("_"))
def test_the_same_rounds_with_nothing_changed_between_are_a_loop(full_shared_data, tmp_path, shape, fmt):
    """The control for the property above: with no new edit between the re-runs, the rounds are a loop."""
    labels = _mini_swe_variant(full_shared_data, tmp_path, False, shape, fmt)
    assert [lab.first_signal.id for lab in labels] == ["F3.repeated_action"] * 10
