"""The eleventh pass's labelling cuts give the answers of what they replace (docs/benchmarks.md, "eleventh session").

The detectors read a run's fields from the view's plain copy (``context.Run``), not through the pydantic model (whose
``__getattr__`` hook makes every read ~30x dearer): the same values, the trajectory's own objects. Whether a shell call
changes state (``detectors.changes_state``) is a regex scan of its command: it is now made once per call (kept on the
call) and, for the write list of a run, once per command text (a coding agent runs its tests, ``ls`` and ``git diff``
again and again). The answers are ``is_state_changing``'s, asked of each call afresh.
"""

from __future__ import annotations

import random
from pathlib import Path

from evoharness.diagnosis import detectors
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import changes_state, is_state_changing
from evoharness.diagnosis.invariants import write_calls
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIELDS = ("id", "task_id", "split", "harness_commit", "model", "rollout", "task", "messages", "events", "final_answer",
          "score", "termination", "usage", "meta", "delivered", "scored")

COMMANDS = ["ls -la", "cd /testbed && python -m pytest tests/x.py", "sed -i 's/a/b/' x.py", "cat x.py",
            "git diff", "echo hi > out.txt", "rm -rf build", "python reproduce.py", "grep -rn foo .", "touch y.py"]
TOOLS = ["bash", "execute_bash", "str_replace_editor", "get_user_details", "book_reservation", "run_terminal_cmd"]


class _Counting:
    """``MUTATING_COMMAND`` with its searches counted."""

    def __init__(self, pattern):
        self.pattern, self.texts = pattern, []

    def search(self, text, *args):
        self.texts.append(text)
        return self.pattern.search(text, *args)


def _run(rnd: random.Random, n: int):
    b = TraceBuilder("t").user("fix the bug")
    for _ in range(n):
        tool = rnd.choice(TOOLS)
        if tool == "str_replace_editor":
            args = {"command": rnd.choice(["view", "str_replace", "create"]), "path": "/testbed/x.py"}
        elif tool in ("get_user_details", "book_reservation"):
            args = {"user_id": rnd.choice(["mia_li_3668", "x"])}
        else:
            args = {"command": rnd.choice(COMMANDS)}
        b.call(tool, args, result=rnd.choice(["ok", "Error: no", ""]))
    return b.deliver("done").build(score=0.0)


def test_a_run_scans_each_command_text_once(monkeypatch):
    # the same test command run five times, and an ``ls`` twice: two scans, not seven
    counting = _Counting(detectors.MUTATING_COMMAND)
    monkeypatch.setattr(detectors, "MUTATING_COMMAND", counting)
    b = TraceBuilder("t").user("fix the bug")
    for cmd in ["python -m pytest", "ls", "python -m pytest", "python -m pytest", "ls", "python -m pytest",
                "python -m pytest"]:
        b.call("bash", {"command": cmd}, result="1 failed")
    view = TraceView.of(b.deliver("done").build(score=0.0))
    assert write_calls(view) == []
    assert sorted(counting.texts) == sorted({c.canonical for c in view.calls})
    assert all(changes_state(c) is False for c in view.calls) and len(counting.texts) == 2  # kept on each call


def test_the_kept_answers_are_those_of_each_call_asked_afresh():
    rnd = random.Random(11)
    writes = 0
    for _ in range(300):
        view = TraceView.of(_run(rnd, rnd.randint(0, 12)))
        expected = [c for c in view.calls if is_state_changing(c.name, c.canonical)]
        expected = [c for c in expected if not detectors.is_handoff(c.name)]
        assert write_calls(view) == expected
        assert [changes_state(c) for c in view.calls] == [is_state_changing(c.name, c.canonical) for c in view.calls]
        writes += len(expected)
    assert writes > 300  # runs with writes and reads both


def test_labels_are_those_of_a_labeller_asked_on_fresh_runs():
    # a call asked before (its answer kept) and a run labelled twice give the labels of a first labelling
    rnd = random.Random(5)
    labeller = Labeller()
    for _ in range(60):
        seed = rnd.random()
        first = labeller.label(_run(random.Random(seed), 10))
        again = _run(random.Random(seed), 10)
        view = TraceView.of(again)
        [changes_state(c) for c in view.calls]
        assert labeller.label(again) == first


def _fixture_runs() -> list[Trajectory]:
    return list(load_paths([FIXTURES / "data" / "tau_bench_airline_gpt4o", FIXTURES / "traces" / "openhands",
                            FIXTURES / "data" / "mini_swe_agent_sample"]))


def test_the_views_run_fields_are_the_trajectorys_own():
    runs = _fixture_runs() + [_run(random.Random(3), 6), TraceBuilder("t").user("x").build()]
    assert len(runs) > 10
    for traj in runs:
        run = TraceView.of(traj).traj
        assert run.trajectory is traj
        for name in FIELDS:
            assert getattr(run, name) is getattr(traj, name) or getattr(run, name) == getattr(traj, name), name
        assert run.messages is traj.messages and run.events is traj.events and run.meta is traj.meta
        assert run.tool_calls() is traj.tool_calls() and run.assistant_steps() == traj.assistant_steps()


def test_labelling_reads_few_fields_through_the_model(monkeypatch):
    # each read through the model costs ~580 interpreter instructions; the view reads them once
    runs = _fixture_runs()
    labeller = Labeller()
    for traj in runs:
        labeller.label(traj)  # the tool calls parsed: what an import leaves
    reads = []
    plain = object.__getattribute__

    def counted(self, name):
        reads.append(name)
        return plain(self, name)

    monkeypatch.setattr(Trajectory, "__getattribute__", counted, raising=False)
    for traj in runs:
        labeller.label(traj)
    assert len(reads) <= 6 * len(runs), sorted(set(reads))
