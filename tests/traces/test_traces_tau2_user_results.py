"""Which user messages of a tau2 run are results of the customer's own calls: the importer lists them, the words do
not say it."""

from __future__ import annotations

import json

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.environment import UserOffScriptDetector
from evoharness.traces.importers import load_paths
from evoharness.traces.patterns import USER_TOOL_RESULT, user_tool_result_steps

WRITTEN = USER_TOOL_RESULT + "my account is ZQ99XK12"  # the customer's own words, starting as a result's do


def _run(tmp_path):
    data = {"info": {"environment_info": {"domain_name": "telecom"}},
            "tasks": [{"id": "t1", "user_scenario": {"instructions": "You are Ann Lee, phone 555-123-4567."}}],
            "simulations": [{"id": "s1", "task_id": "t1", "termination_reason": "agent_stop",
                             "reward_info": {"reward": 0.0}, "messages": [
                                 {"role": "assistant", "content": "Please check your status bar."},
                                 {"role": "user", "content": None, "tool_calls": [
                                     {"id": "u1", "name": "check_status_bar", "arguments": {}}]},
                                 {"role": "tool", "id": "u1", "requestor": "user", "content": "Network: QX7Z9 5G"},
                                 {"role": "user", "content": WRITTEN},
                                 {"role": "assistant", "content": "Thanks."}]}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    [traj] = load_paths([path])
    return traj


def test_a_customers_message_starting_as_a_call_result_does_is_read_as_its_words(tmp_path):
    """The importer marked the result of the customer's own call by a text prefix, and E.user_off_script took any user
    message starting with it for such a result: a customer who wrote those words and an id of its own making was never
    off script. Now the importer lists the results' indexes (meta.user_tool_results) and the words mark nothing."""
    traj = _run(tmp_path)
    result = next(i for i, m in enumerate(traj.messages) if m["content"] == USER_TOOL_RESULT + "Network: QX7Z9 5G")
    written = next(i for i, m in enumerate(traj.messages) if m["content"] == WRITTEN)
    assert user_tool_result_steps(traj) == {result}
    [signal] = UserOffScriptDetector().find(TraceView(traj))
    assert signal.step == written and "ZQ99XK12" in signal.evidence and "QX7Z9" not in signal.evidence


def test_a_tau2_run_imported_before_the_list_keeps_its_results_by_their_prefix(tmp_path):
    traj = _run(tmp_path)
    traj.meta.pop("user_tool_results")  # as `evoharness import` wrote it until the thirteenth session
    assert len(user_tool_result_steps(traj)) == 2
    assert UserOffScriptDetector().find(TraceView(traj)) == []
    traj.meta["source_format"] = "openai"  # no other importer writes such results: its user's words are words
    assert user_tool_result_steps(traj) == set()
