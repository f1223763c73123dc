"""mini-swe-agent v2 trajectories (``trajectory_format: mini-swe-agent-1.1``): native tool calls, the
``mswea_bash_command`` text format, the Responses API shape, ``extra`` format errors and the closing ``exit``
message -- real v1 runs written as v2 writes them (tests/fixtures/traces/mini_swe_v2/make_sample.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.traces.importers import detect_format, load_paths
from evoharness.traces.models import Termination
from tests.modules import load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
V2 = FIXTURES / "traces" / "mini_swe_v2"
V1 = FIXTURES / "data" / "mini_swe_agent_sample"
RUN = "django__django-12708"


def _maker():
    return load_file(V2 / "make_sample.py", "mini_swe_v2_sample")


def _v1(instance: str = RUN) -> dict:
    return json.loads((V1 / "trajs" / instance / f"{instance}.traj.json").read_text())


@pytest.mark.parametrize("style", ["toolcall", "text"])
def test_v2_samples_import_with_their_tool_calls_results_and_verdicts(style):
    path = V2 / style / RUN / f"{RUN}.traj.json"
    raw = json.loads(path.read_text())
    assert detect_format(path) == "mini-swe-agent"
    trajs = {t.task_id: t for t in load_paths([V2 / style])}  # the sb-cli report is no trace
    assert {k: t.score for k, t in trajs.items()} == {RUN: 1.0, "django__django-11477": 0.0}
    t = trajs[RUN]
    assert t.termination == Termination.delivered and t.final_answer.startswith("diff --git")
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in t.messages)  # no 'exit' turn
    calls = t.tool_calls()
    n_actions = sum(1 for m in raw["messages"] if m.get("role") == "assistant")
    assert len(calls) == n_actions > 10
    results = [m["tool_call_id"] for m in t.messages if m["role"] == "tool"]
    # every call has its result, but the submitting one (its output is the exit message's submission)
    assert results == [c.id for c in calls[:-1]]
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in calls[-1].args["command"]
    # step i is raw message source_index[i]: the exit message is the one left out
    assert t.meta["source_index"] == list(range(len(raw["messages"]) - 1))
    assert raw["messages"][-1]["role"] == "exit"


def test_v2_text_commands_are_read_from_the_mswea_block_or_the_parsed_actions():
    [t] = [t for t in load_paths([V2 / "text"]) if t.task_id == RUN]
    first = t.tool_calls()[0]
    v1_first = next(m["content"] for m in _v1()["messages"] if m["role"] == "assistant")
    assert first.args["command"] in v1_first


def _rejected(v1: dict) -> dict:
    """The v1 run with one reply the harness rejected (two bash blocks) before its first action."""
    i = next(k for k, m in enumerate(v1["messages"]) if m["role"] == "assistant")
    bad = {"role": "assistant", "content": "THOUGHT: two.\n\n```bash\nls\n```\n\n```bash\npwd\n```"}
    rejection = {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2."}
    v1["messages"][i:i] = [bad, rejection]
    return v1


@pytest.mark.parametrize("style", ["toolcall", "text", "response"])
def test_a_v2_format_error_is_a_rejection_event_and_every_style_reads_alike(tmp_path, style):
    maker = _maker()
    path = tmp_path / RUN / f"{RUN}.traj.json"
    path.parent.mkdir()
    path.write_text(json.dumps(maker.to_v2(_rejected(_v1()), style)))
    [t] = list(load_paths([path]))
    [event] = t.events
    assert event.type == "format_rejected" and t.messages[event.step]["role"] == "user"
    assert t.messages[event.step - 1]["role"] == "user"  # v2 keeps no rejected reply: the task comes before it
    assert len(t.tool_calls()) == sum(1 for m in _v1()["messages"] if m["role"] == "assistant")
    assert t.task.startswith("<pr_description>")


def test_a_v2_run_that_hit_its_limit_ends_on_the_budget(tmp_path):
    v1 = _v1()
    v1["info"] = {**v1["info"], "exit_status": "LimitsExceeded", "submission": ""}
    data = _maker().to_v2(v1)
    data["info"].pop("exit_status")  # only the exit message says so
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps(data))
    [t] = list(load_paths([path]))
    assert t.termination == Termination.step_budget and t.final_answer is None
    assert [e.type for e in t.events] == ["budget_exhausted"]


@pytest.mark.parametrize("name", [12, None, "", ["gpt"]])
def test_a_model_name_that_is_no_string_is_left_out(tmp_path, name):
    """A fuzzed model_name (a number) was a multi-line pydantic error instead of an import (v1 and v2 alike)."""
    data = _v1()
    data["info"]["config"]["model"]["model_name"] = name
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps(data))
    [t] = list(load_paths([path]))
    assert t.model is None and len(t.tool_calls()) > 10


def test_responses_api_calls_saved_without_an_id_each_get_one_and_keep_their_results(tmp_path):
    """A Responses-API reply whose function_call items carry no call_id imported with id '' for each: two calls
    shared one empty id and their results named it (the chat-message path already gave such calls an id)."""
    messages = [
        {"role": "system", "content": "you fix bugs"}, {"role": "user", "content": "fix it"},
        {"object": "response", "output": [
            {"type": "function_call", "name": "bash", "arguments": json.dumps({"command": "ls"})},
            {"type": "function_call", "name": "bash", "arguments": json.dumps({"command": "cat a.py"})}]},
        {"type": "function_call_output", "output": "a.py"},
        {"type": "function_call_output", "output": "print(1)"},
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": "diff"}}]
    path = tmp_path / "x__y-1.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": messages}))
    [t] = list(load_paths([path]))
    calls = t.tool_calls()
    assert [c.args["command"] for c in calls] == ["ls", "cat a.py"]
    ids = [c.id for c in calls]
    assert all(ids) and len(set(ids)) == 2
    assert [m["tool_call_id"] for m in t.messages if m["role"] == "tool"] == ids  # each result names its call


@pytest.mark.parametrize(("status", "termination"), [
    ("Submitted", Termination.delivered), ("LimitsExceeded", Termination.step_budget),
    ("TimeExceeded", Termination.timeout), ("ExecutionTimeoutError", Termination.timeout),
    ("ContextWindowExceededError", Termination.context_overflow), ("RuntimeError", Termination.error),
    ("", Termination.aborted)])
def test_v2_exit_status_from_the_exit_message_sets_the_termination(tmp_path, status, termination):
    """v2 keeps the exit status in the closing exit message's ``extra`` (``info`` may lack it); each status
    mini-swe-agent writes ends the run its own way, an unknown one as an error, none as aborted."""
    messages = [
        {"role": "system", "content": "you fix bugs"}, {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "exit", "content": "", "extra": {"exit_status": status, "submission": "diff --git a/a.py b/a.py"}}]
    path = tmp_path / "x__y-1.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": messages}))
    [t] = list(load_paths([path]))
    assert t.termination == termination
    assert (t.final_answer is not None) == (termination == Termination.delivered)



def test_a_text_action_is_the_block_mini_swe_agents_own_regex_reads():
    """``action_blocks`` finds each block's end with ``str.find``; its blocks are exactly the ones mini-swe-agent's
    own ``action_regex`` finds (v1 ``DefaultAgent`` and v2's text-based models: the closing fence at a line's start).
    It used to read the regex with ``\\n?`` before the closing fence, which mini-swe-agent never had: a command with
    a fence inside a line (``echo '```'``, a sed on a markdown fence) was cut there, and a reply closing its fence on
    the command's own line, which the harness rejects (no action), was read as an action."""
    import random
    import re

    from evoharness.traces.importers.mini_swe import action_blocks

    mini = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
    pieces = ["```bash", "```mswea_bash_command", "```", "\n```", "`", "\n", " ", "\t", "ls -la", "bashrc", "\n\n",
              "``"]
    rnd = random.Random(19)
    found = 0
    for _ in range(20_000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 10)))
        want = mini.findall(text)
        assert action_blocks(text) == want, text
        found += bool(want)
    assert found > 1_000
    for text in ("```bash\necho '```'\n```", "```bash\nls```", "```bash\n\n```", "```bash\n```", "```bash \n \n```x",
                 "```bash\nls```\ntext\n```bash\npwd\n```", "````bash\n\n```bash\n\n```"):
        assert action_blocks(text) == mini.findall(text), text


def test_a_command_with_a_fence_inside_a_line_is_imported_whole(tmp_path):
    """A v1 reply whose command holds a fence inside a line (a sed rewriting a markdown fence): mini-swe-agent ran
    the whole line; the importer cut the command at the inner fence (``sed -i 's/``), losing the file it writes."""
    command = "sed -i 's/```py$/```python/' docs/README.md"
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Fix the docs."},
                {"role": "assistant", "content": f"THOUGHT: fix the fences.\n\n```bash\n{command}\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
                {"role": "assistant", "content": "THOUGHT: ok.\n\n```bash\nls```"},
                {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 0 "
                                            "actions."}]
    path = tmp_path / "x__y-1.traj.json"
    path.write_text(json.dumps({"messages": messages, "info": {"exit_status": "Submitted", "submission": ""}}))
    [t] = list(load_paths([path]))
    [call] = t.messages[2]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"command": command}
    assert t.messages[3]["role"] == "tool" and t.messages[3]["tool_call_id"] == call["id"]
    assert not t.messages[4].get("tool_calls")  # the harness found no action in it and said so
    assert [e.type for e in t.events] == ["format_rejected"]
