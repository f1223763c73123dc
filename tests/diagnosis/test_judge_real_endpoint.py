"""The LLM judge against the real local llama.cpp server (SmolLM2-135M-Instruct): the round trip and the
shape of what comes back, not its quality.

Skipped when llama-cpp-python is not installed (``scripts/install-endpoint.sh``), unless
EVOHARNESS_TEST_ENDPOINT=1, which makes a missing server a failure.
"""

from __future__ import annotations

from evoharness.diagnosis.judge import LLMJudge, openai_judge_model
from evoharness.traces.models import Trajectory
from tests.conftest import LLAMA_MODEL, REAL_ENDPOINT_MARKS

pytestmark = REAL_ENDPOINT_MARKS


def test_judge_round_trip_returns_a_step_agent_class_and_quote_or_says_why_not(llama_server):
    msgs = [{"role": "user", "content": "How many stops between South Station and Windsor Gardens?"},
            {"role": "assistant", "name": "Orchestrator", "content": "Please look up the line's stops."},
            {"role": "assistant", "name": "WebSurfer", "content": "I typed 'stops' into the search bar. "
                                                                 "The page shows a cooking blog."},
            {"role": "assistant", "name": "Orchestrator", "content": "FINAL ANSWER: 12"}]
    t = Trajectory(id="rt", task_id="rt", task=msgs[0]["content"], messages=msgs, final_answer="12",
                   meta={"failure_only": True})
    judge = LLMJudge(openai_judge_model(f"openai:{llama_server}#{LLAMA_MODEL}"), context_tokens=2048)
    lab = judge.label(t)
    assert lab.failure_class in ("F1", "F2", "F3", "F4", "E") and lab.first_signal is not None
    assert 0 <= lab.first_signal.step < len(msgs)
    if lab.labeller == "llm":
        assert lab.first_signal.id.endswith(".llm_judge") and lab.agent in ("Orchestrator", "WebSurfer")
    else:  # the tiny model may say nothing usable; the server must still have answered
        assert lab.labeller.startswith("rules (llm fallback:")
        assert "Connect" not in lab.labeller and "HTTPStatusError" not in lab.labeller, lab.labeller
