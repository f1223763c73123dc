"""A bare JSON list of OpenAI chat messages is one conversation read as a chat, not a multi-agent message list."""

from __future__ import annotations

import json

from evoharness.traces.importers import detect_format, load_file

CHAT = [
    {"role": "system", "content": "You are an airline agent."},
    {"role": "user", "content": "Cancel my booking ABC123."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_reservation", "arguments": '{"id": "ABC123"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "get_reservation", "content": "Error: reservation not found"},
    {"role": "assistant", "content": "I could not find that booking."},
]


def test_a_bare_chat_list_keeps_its_tool_calls(tmp_path):
    f = tmp_path / "conv.json"
    f.write_text(json.dumps(CHAT))
    assert detect_format(f) == "openai"  # was agentrx: tool calls dropped, tool results became agent turns
    (t,) = list(load_file(f))
    assert [c.name for c in t.tool_calls()] == ["get_reservation"]
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.task == "Cancel my booking ABC123." and t.final_answer == "I could not find that booking."
    assert t.events and t.events[0].step == 3  # the tool's error is friction at its step
    (forced,) = list(load_file(f, "openai"))  # --format openai: was read element by element, each a "record"
    assert forced.messages == t.messages


def test_a_list_without_chat_keys_is_still_a_multi_agent_log(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps([{"role": "human", "content": "Find the paper."},
                             {"role": "Orchestrator (thought)", "content": "Plan: ask WebSurfer."},
                             {"role": "WebSurfer", "content": "I searched."}]))
    assert detect_format(f) == "agentrx"
