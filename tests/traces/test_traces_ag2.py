"""AG2's / AutoGen 0.2's ``chat_history`` with tool calls: calls and results become steps, as OpenAI chats' do.

The sample (tests/fixtures/traces/ag2/, written by AG2 0.14's own agents with a scripted model) was read as an OpenAI
chat: the roles are the initiator's view, so the assistant's answer was the task, the user proxy's request the final
answer, and no result answered its call (AG2 puts them in ``tool_responses``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evoharness.traces.importers import detect_format, load_file

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "ag2" / "chat_history.json"


def test_tool_calls_and_results_of_an_ag2_chat_are_steps():
    raw = json.loads(SAMPLE.read_text())
    assert detect_format(SAMPLE) == "agentrx"
    [t] = list(load_file(SAMPLE))
    assert t.task == raw[0]["content"] and t.final_answer == raw[-1]["content"]
    calls = t.tool_calls()
    assert [(c.name, c.step) for c in calls] == [("search_flights", 1), ("book_flight", 3), ("book_flight", 5),
                                                 ("get_baggage_policy", 5)]
    assert [m["tool_call_id"] for m in t.messages if m["role"] == "tool"] == [c.id for c in calls]
    assert {m["name"] for m in t.messages if m.get("tool_calls")} == {"booking_assistant"}  # unnamed in the file
    assert [(e.type, e.step) for e in t.events] == [("tool_error", 4)]
    assert t.messages[4]["content"].startswith("Error: no business seats")
    # one AG2 message held both results of the parallel calls: step i is message meta.source_index[i] of the file
    assert t.meta["source_index"] == [0, 1, 2, 3, 4, 5, 6, 6, 7]
    assert t.meta["failure_only"] is False and t.score is None


def test_human_labels_name_a_message_of_the_file_not_our_step(tmp_path):
    run = tmp_path / "chat_history.json"
    shutil.copy(SAMPLE, run)
    (tmp_path / "ground_truth.json").write_text(json.dumps([{"trajectory_id": "chat_history", "failures": [
        {"step_number": 8, "failure_category": "Invention of New Information", "failed_agent": "booking_assistant",
         "step_reason": "claims a fee the tool did not give"}]}]))
    [t] = list(load_file(run))
    assert [(h["step"], h["agent"]) for h in t.meta["human_failures"]] == [(8, "booking_assistant")]
    assert t.messages[8]["content"] == json.loads(SAMPLE.read_text())[7]["content"]


def test_older_function_calls_and_group_chat_names(tmp_path):
    """AG2's function calling (``function_call`` / ``role: function``) in a group chat, where calls are named."""
    f = tmp_path / "group.json"
    f.write_text(json.dumps([
        {"content": "What is 17 * 23?", "role": "user", "name": "admin"},
        {"content": None, "function_call": {"name": "multiply", "arguments": '{"a": 17, "b": 23}'},
         "role": "assistant", "name": "mathematician"},
        {"content": "391", "role": "function", "name": "multiply"},
        {"content": "17 * 23 = 391.", "role": "user", "name": "mathematician"}]))
    assert detect_format(f) == "agentrx"
    [t] = list(load_file(f))
    [call] = t.tool_calls()
    assert (call.name, call.args, call.step) == ("multiply", {"a": 17, "b": 23}, 1)
    assert t.messages[2] == {"role": "tool", "tool_call_id": call.id, "name": "multiply", "content": "391"}
    assert t.messages[1]["name"] == "mathematician" and "source_index" not in t.meta and not t.events
