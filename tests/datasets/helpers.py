"""Builders for synthetic trajectories and labels used across the datasets tests."""

from __future__ import annotations

import json

import pytest
import structlog

from evoharness.diagnosis.models import FailureClass, Label, Lever, Signal
from evoharness.traces.models import Split, Trajectory


@pytest.fixture
def offline_hf(monkeypatch, tmp_path):
    """The Hugging Face libraries offline, with a home of the test's own (a module uses it with
    ``pytestmark = pytest.mark.usefixtures("offline_hf")`` after importing it)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    yield
    structlog.reset_defaults()


def make_traj(tid: str, task: str = "t1", *, split: str = "dev", score: float | None = 1.0, calls: int = 2,
              tool: str = "lookup", final: str | None = None, commit: str | None = "abc123",
              model: str | None = "m-4b", user_turns: int = 1, system: str = "You are the agent.",
              tools_meta: bool = True) -> Trajectory:
    """A tool-calling trajectory: system, user, ``calls`` x (assistant call + tool result), final reply."""
    messages: list[dict] = [{"role": "system", "content": system}]
    for u in range(user_turns):
        messages.append({"role": "user", "content": f"{tid} user turn {u}: please solve {task}"})
    for i in range(calls):
        cid = f"orig_{i}"  # deliberately the same ids in every trajectory
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": cid, "type": "function",
            "function": {"name": tool, "arguments": json.dumps({"key": f"{tid}-{i}", "n": i})}}]})
        messages.append({"role": "tool", "tool_call_id": cid, "name": tool, "content": f"result {tid}-{i}"})
    final = final if final is not None else f"final answer of {tid}"
    messages.append({"role": "assistant", "content": final})
    meta: dict = {"env": "synthetic"}
    if tools_meta:
        meta["tools"] = [{"type": "function", "function": {
            "name": tool, "description": f"Look things up ({tool})",
            "parameters": {"type": "object", "required": ["key"],
                           "properties": {"key": {"type": "string"}, "n": {"type": "integer"}}}}}]
    return Trajectory(id=tid, task_id=task, split=Split(split), harness_commit=commit, model=model,
                      task=f"Solve {task}", messages=messages, final_answer=final, score=score, meta=meta)


def content_label(traj: Trajectory, cls: FailureClass = FailureClass.F4,
                  signal: str = "F4.poor_delivery") -> Label:
    return Label(trajectory_id=traj.id, task_id=traj.task_id, failure_class=cls,
                 first_signal=Signal(id=signal, failure_class=cls, step=len(traj.messages) - 1),
                 lever=Lever.weights, score=traj.score, delivered=True)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path) if line.strip()]
