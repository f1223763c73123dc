"""A model's ``reasoning_content`` (DeepSeek, vLLM / llama.cpp's OpenAI-compatible servers; LiteLLM passes it on) is
kept: ``meta.reasoning`` holds each assistant turn's, by step, and the turn's own text stays what the agent said.
The Trajectory has no field for it (messages are OpenAI chat messages), and the labeller reads messages, so the
thinking is never taken for the agent's words. Before, the OpenHands readers dropped it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
THINK = "The user cannot be refunded, so I must refuse; maybe the list is empty."


def _first_record(name: str) -> dict:
    return json.loads((FIXTURES / name / "output.jsonl").read_text().splitlines()[0])


def _one(tmp_path: Path, rec: dict, name: str = "output.jsonl"):
    path = tmp_path / name
    path.write_text(json.dumps(rec) + "\n")
    [t] = load_file(path)
    return t


def _labels_alike(t) -> None:
    """The label is the same with the reasoning dropped: the labeller does not read it."""
    bare = t.model_copy(update={"meta": {k: v for k, v in t.meta.items() if k != "reasoning"}})
    assert Labeller().label(t).model_dump() == Labeller().label(bare).model_dump()


def test_the_classic_openhands_reader_keeps_the_model_response_s_reasoning_content(tmp_path):
    rec = _first_record("openhands")
    plain = _one(tmp_path, rec, "plain.jsonl")
    edit = rec["history"][6]  # the edit and the check of one response: one assistant turn
    edit["tool_call_metadata"]["model_response"]["choices"][0]["message"]["reasoning_content"] = THINK
    rec["history"][8]["tool_call_metadata"]["model_response"]["choices"][0]["message"]["reasoning_content"] = THINK
    # OpenHands' Thought as it serialises with reasoning: {"text", "reasoning_content"}
    rec["history"][4]["args"]["thought"] = {"text": "Let me read the file.", "reasoning_content": "First, read."}
    t = _one(tmp_path, rec)
    turns = t.assistant_steps()
    assert t.meta["reasoning"] == [{"step": turns[0], "text": "First, read."}, {"step": turns[1], "text": THINK}]
    assert t.messages[turns[0]]["content"] == "Let me read the file."  # it was "" (the dict was no string)
    assert t.messages[turns[1]] == plain.messages[turns[1]]  # the turn is what the agent said, as before
    assert THINK not in json.dumps(t.messages)
    assert "reasoning" not in plain.meta
    _labels_alike(t)


def test_the_classic_openhands_reader_keeps_args_reasoning_content_beside_a_string_thought(tmp_path):
    rec = _first_record("openhands")
    rec["history"][10]["args"]["reasoning_content"] = THINK  # the finish: a turn of its own
    t = _one(tmp_path, rec)
    assert t.meta["reasoning"] == [{"step": t.assistant_steps()[-1], "text": THINK}]


def test_the_v1_sdk_reader_keeps_an_action_s_and_a_message_s_reasoning_content(tmp_path):
    rec = _first_record("openhands_v1")
    plain = _one(tmp_path, copy.deepcopy(rec), "plain.jsonl")
    rec["history"][4]["reasoning_content"] = THINK  # the first action of a response of two calls
    rec["history"][5]["reasoning_content"] = THINK  # the SDK may repeat it on the response's second action
    said = {"id": "m-1", "source": "agent", "kind": "MessageEvent", "llm_response_id": "chatcmpl-0009",
            "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}],
                            "reasoning_content": "Say it is done."}}
    rec["history"].append(said)
    t = _one(tmp_path, rec)
    turns = t.assistant_steps()
    assert t.meta["reasoning"] == [{"step": turns[1], "text": THINK}, {"step": turns[-1], "text": "Say it is done."}]
    assert t.messages[turns[1]] == plain.messages[turns[1]] and t.messages[turns[-1]]["content"] == "Done."
    _labels_alike(t)


def test_the_openai_records_reader_keeps_the_message_and_names_its_reasoning_in_meta(tmp_path):
    messages = [{"role": "user", "content": "Refund order 7."},
                {"role": "assistant", "content": "Order 7 is refunded.", "reasoning_content": THINK}]
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps({"task_id": "t", "reward": 1.0, "messages": messages}) + "\n")
    [t] = load_file(path, "openai")
    assert t.messages[1] == messages[1]  # the record's message as it was written (the importer keeps it whole)
    assert t.meta["reasoning"] == [{"step": 1, "text": THINK}]
    _labels_alike(t)


def test_the_mini_swe_agent_reader_keeps_a_v2_reply_s_reasoning_content(tmp_path):
    """mini-swe-agent v2 saves the model's message as LiteLLM returns it: ``reasoning_content`` with the reply."""
    name = "django__django-12708"
    data = json.loads((FIXTURES / "mini_swe_v2" / "toolcall" / name / f"{name}.traj.json").read_text())
    plain_path = tmp_path / "plain" / name / f"{name}.traj.json"
    plain_path.parent.mkdir(parents=True)
    plain_path.write_text(json.dumps(data))
    [plain] = load_file(plain_path)
    k = next(i for i, m in enumerate(data["messages"]) if m.get("role") == "assistant")
    data["messages"][k]["reasoning_content"] = THINK
    path = tmp_path / "thinking" / name / f"{name}.traj.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    [t] = load_file(path)
    step = plain.meta.get("source_index", list(range(len(plain.messages)))).index(k)
    assert t.meta["reasoning"] == [{"step": step, "text": THINK}] and t.messages == plain.messages
    _labels_alike(t)


def test_the_atif_reader_keeps_an_agent_step_s_reasoning_content():
    """ATIF's agent step carries ``reasoning_content`` beside its ``message`` (Harbor's sample trial)."""
    path = FIXTURES / "atif" / "trial-1" / "agent" / "trajectory.json"
    said = [s for s in json.loads(path.read_text())["steps"] if s.get("reasoning_content")]
    [t] = load_file(path)
    assert [r["text"] for r in t.meta["reasoning"]] == [s["reasoning_content"] for s in said] and said
    assert all(t.messages[r["step"]]["role"] == "assistant" for r in t.meta["reasoning"])
    assert not any(r["text"] in (m.get("content") or "") for r in t.meta["reasoning"] for m in t.messages)
    _labels_alike(t)
