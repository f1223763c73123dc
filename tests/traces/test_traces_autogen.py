"""AutoGen AgentChat (0.4+) runs: a TaskResult dump, or its messages alone, as AgentChat writes them
(tests/fixtures/traces/autogen/make_sample.py: AutoGen's own classes, scripted model replies)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.multiagent import AgentLog, responsible_agent
from evoharness.errors import InputError
from evoharness.traces.importers import autogen, detect_format, load_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AUTOGEN = FIXTURES / "traces" / "autogen"
TOOL_TEAM = AUTOGEN / "tool_team.json"
MAGENTIC = AUTOGEN / "magentic_one_messages.json"


def _tool_answers_call(t) -> None:
    called = set()
    for m in t.messages:
        called.update(c["id"] for c in m.get("tool_calls") or [])
        if m["role"] == "tool":
            assert m["tool_call_id"] in called, m


def test_a_tool_teams_task_result_names_its_agents_and_makes_calls_and_results_steps():
    assert detect_format(TOOL_TEAM) == "autogen"
    [t] = load_paths([TOOL_TEAM])
    assert (t.id, t.task_id, t.score, t.termination) == ("autogen:tool_team", "tool_team", None, "delivered")
    assert t.task == "Book the cheapest nonstop flight from SFO to JFK on 2025-05-20 for Ana Lima."
    assert [(m["role"], m.get("name")) for m in t.messages] == [
        ("user", None), ("assistant", "booking_agent"), ("tool", "search_flights"), ("assistant", "booking_agent"),
        ("tool", "book_flight"), ("assistant", "booking_agent"), ("tool", "book_flight"),
        ("assistant", "booking_agent"), ("assistant", "reviewer_agent")]
    # the ThoughtEvent before the first call is that call's text, not a step of its own
    assert t.messages[1]["content"] == "I will look up the nonstop flights first."
    args = {"origin": "SFO", "destination": "JFK", "date": "2025-05-20"}
    assert t.messages[1]["tool_calls"][0]["function"] == {"name": "search_flights", "arguments": json.dumps(args)}
    assert "UA 1532" in t.messages[2]["content"]
    _tool_answers_call(t)
    # a result with is_error: true is friction, at the result
    assert [(e.type, e.step, e.detail) for e in t.events] == [
        ("tool_error", 4, "fare class sold out for UA 1532"), ("tool_error", 6, "fare class sold out for UA 1532")]
    assert (t.usage.steps, t.usage.prompt_tokens, t.usage.completion_tokens) == (5, 2170 + 45, 108 + 5)
    assert t.final_answer == "The booking is confirmed. TERMINATE"
    assert t.meta["stop_reason"] == "Text 'TERMINATE' mentioned"


def test_a_failing_tool_result_is_friction_and_the_agent_that_called_it_answers_for_it():
    [t] = load_paths([TOOL_TEAM])
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F2.tool_error", 4)
    assert lab.agent == "booking_agent"  # not the tool's name the result carries
    # retried until the call went through, the error is no failure
    data = json.loads(TOOL_TEAM.read_text())
    data["messages"][7]["content"][0].update(content='{"confirmation": "K3LQ9"}', is_error=False)
    retried = autogen.convert(data, "retried")
    assert "F2.tool_error" not in {s.id for s in Labeller().label(retried).signals}


def test_magentic_ones_04_team_reads_as_a_multi_agent_log():
    assert detect_format(MAGENTIC) == "autogen"
    [t] = load_paths([MAGENTIC])
    agents = {m.get("name") for m in t.messages if m["role"] == "assistant"}
    assert agents == {"MagenticOneOrchestrator", "Coder", "ComputerTerminal"}
    assert t.messages[0] == {"role": "user", "content": "How many regions in sales.csv sold more than 100 units? "
                                                        "The chart is attached.\n<image>"}
    assert t.final_answer == "Two regions in sales.csv sold more than 100 units."
    assert not t.events and all("tool_calls" not in m for m in t.messages)
    log = AgentLog(TraceView(t))
    assert log.applies
    # the orchestrator's task ledger (its fact sheet guesses "1,000 to 5,000 rows") is no agent's reasoning
    assert 1 not in log.reasoning_turns
    assert "F1.unsupported_fact" not in {s.id for s in Labeller().label(t).signals}
    # the terminal's bare output ("2") is the code's: the Coder answers for it
    assert (t.messages[9]["name"], responsible_agent(t.messages, 9)) == ("ComputerTerminal", "Coder")
    # known to have failed (the answer is 3), the run is located at the code whose run failed first
    t.meta["failure_only"] = True
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F4.first_commitment", 3, "Coder")
    assert "failed first (step 5)" in lab.first_signal.evidence


def _message(source: str, kind: str, content, **extra) -> dict:
    return {"source": source, "models_usage": None, "metadata": {}, "content": content, "type": kind, **extra}


def test_other_shapes_many_runs_a_limit_a_user_proxy_and_skipped_events(tmp_path):
    run = json.loads(TOOL_TEAM.read_text())
    many = tmp_path / "runs.json"
    many.write_text(json.dumps([run, run]))
    lines = tmp_path / "runs.jsonl"
    lines.write_text(json.dumps(run) + "\n\n" + json.dumps(run) + "\n")
    for path in (many, lines):
        assert detect_format(path) == "autogen"
        assert [t.id for t in load_paths([path])] == ["autogen:runs:0", "autogen:runs:1"]
    chat = {"messages": [
        _message("user", "TextMessage", "Plan the launch."),
        _message("planner", "ModelClientStreamingChunkEvent", "Plan"),
        _message("planner", "TextMessage", "Plan: ship on Monday."),
        _message("human", "UserInputRequestedEvent", "", request_id="r1"),
        _message("human", "TextMessage", "Make it Tuesday."),
        _message("planner", "HandoffMessage", "Transferred to writer.", target="writer"),
        _message("writer", "StructuredMessage[Draft]", {"title": "Launch", "day": "Monday"}),
    ], "stop_reason": "Maximum number of messages 7 reached, current message count: 7"}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat))
    [t] = load_paths([path])
    assert [(m["role"], m.get("name"), m.get("role_detail")) for m in t.messages] == [
        ("user", None, None), ("assistant", "planner", None), ("user", None, None),
        ("assistant", "planner", "HandoffMessage -> writer"), ("assistant", "writer", "StructuredMessage[Draft]")]
    assert json.loads(t.messages[4]["content"]) == {"title": "Launch", "day": "Monday"}
    assert t.meta["skipped_events"] == 2
    assert (t.termination, t.final_answer) == ("step_budget", None)
    assert [e.type for e in t.events] == ["budget_exhausted"]


def test_results_without_call_ids_answer_the_calls_in_order():
    # some models give no call ids (Gemini through AutoGen: FunctionCall(id='')): the results' call_id is '' too
    data = json.loads(TOOL_TEAM.read_text())
    for m in data["messages"]:
        for c in m["content"] if isinstance(m["content"], list) else []:
            c.update({"id": ""} if "arguments" in c else {"call_id": ""})
    t = autogen.convert(data, "no-ids")
    _tool_answers_call(t)
    assert len({m["tool_call_id"] for m in t.messages if m["role"] == "tool"}) == 3
    lab = Labeller().label(t)
    assert (lab.first_signal.id, lab.first_signal.step, lab.agent) == ("F2.tool_error", 4, "booking_agent")


def test_detection_of_every_other_fixture_is_unchanged():
    # the new format claims its own samples and nothing else: a TaskResult's messages have no chat 'role'
    for f in sorted(FIXTURES.rglob("*.json*")):
        if f.suffix not in (".json", ".jsonl") or f.parent == AUTOGEN:
            continue
        try:
            fmt = detect_format(f)
        except InputError:
            continue
        assert fmt != "autogen", f


@pytest.mark.parametrize(("mutate", "reason"), [
    (lambda d: d["messages"][2].pop("type"), "message 2 needs a string 'source' and 'type'"),
    (lambda d: d["messages"][2].update(content="oops"), "message 2: a ToolCallRequestEvent's content must be a list"),
    (lambda d: d["messages"][2]["content"][0].pop("name"), "message 2: tool call 0 has no 'name'"),
])
def test_bad_input_is_one_error_line(tmp_path, capsys, mutate, reason):
    data = json.loads(TOOL_TEAM.read_text())
    mutate(data)
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps(data))
    assert main(["import", str(bad), "--format", "autogen", "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and str(bad) in err[0] and reason in err[0], err
    assert main(["diagnose", str(bad)]) == 2  # detected as another format or not: refused on one line
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    lines = tmp_path / "runs.jsonl"
    lines.write_text(json.dumps(json.loads(TOOL_TEAM.read_text())) + "\n" + json.dumps(data)[:80] + "\n")
    assert main(["import", str(lines), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert f"{lines}:line 2" in capsys.readouterr().err
    scalar = tmp_path / "scalar.json"  # forced onto JSON that is no object or list (a fuzzed variant gave a traceback)
    scalar.write_text("5")
    assert main(["import", str(scalar), "--format", "autogen", "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "needs a 'messages' list" in capsys.readouterr().err
    assert main(["import", str(lines), "-o", str(tmp_path / "o.jsonl"), "--skip-invalid"]) == 0
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 1
