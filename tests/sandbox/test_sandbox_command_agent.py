"""Command agents: the example external agent in bwrap, both output formats, broken commands as failed rollouts."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import git
import pytest

from evoharness.agent.scripted import ScriptedModel
from evoharness.harness_repo.init import init_harness
from evoharness.sandbox.api import RolloutRequest
from evoharness.sandbox.bwrap import BwrapSandbox
from evoharness.sandbox.command_agent import CommandRollout, run_tool
from evoharness.sandbox.executor import LocalExecutor
from evoharness.sandbox.gateway_upstream import ModelUpstream
from evoharness.sandbox.models import Limits
from evoharness.traces.models import Termination

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "command-agent"
LIMITS = Limits(wall_seconds=60, cpu_seconds=60)

# A command agent that writes what MODE asks for (committed into the harness as fake.py).
FAKE = r'''
import json, sys, time
mode, task_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
task = json.load(open(task_path))
call = {"id": "c1", "type": "function", "function": {"name": "lookup_contact",
        "arguments": json.dumps({"name": "Ada Lovelace"})}}
msgs = [{"role": "user", "content": task["prompt"]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ada@example.org"},
        {"role": "assistant", "content": "It is ada@example.org"}]
def write(x):
    open(out, "w").write(x if isinstance(x, str) else json.dumps(x))
if mode == "list":
    write(msgs)
elif mode == "undelivered":
    write({"messages": msgs[:3], "final_answer": None})
elif mode == "canonical":
    write({"id": "mine", "task_id": task["task_id"], "harness_commit": task["harness_commit"],
           "model": task["model_spec"], "messages": msgs, "final_answer": "It is ada@example.org"})
elif mode == "canonical_scored":
    write({"id": "mine", "task_id": task["task_id"], "messages": msgs, "final_answer": "nope", "score": 0.25})
elif mode == "send":
    send = {"id": "c2", "type": "function", "function": {"name": "send_message",
            "arguments": json.dumps({"to": "ada@example.org", "body": "Meeting moved to 10:00."})}}
    bad = {"id": "c3", "type": "function", "function": {"name": "fax", "arguments": "{}"}}
    write({"messages": msgs[:3] + [{"role": "assistant", "content": None, "tool_calls": [bad, send]}],
           "final_answer": "sent"})
elif mode == "wrongtask":
    write({"id": "x", "task_id": "status_A-100", "messages": msgs, "final_answer": "shipped"})
elif mode == "garbage":
    write("{not json")
elif mode == "shape":
    write({"answer": 42})
elif mode == "role":
    write([{"role": "robot", "content": "beep"}])
elif mode == "crash":
    print("agent exploded", file=sys.stderr)
    sys.exit(3)
elif mode == "hang":
    time.sleep(600)
# mode "nothing": write no file
'''


def _commit(path: Path, message: str) -> str:
    g = git.Repo(path)
    g.git.add("-A")
    g.git.commit("-qm", message, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                      "GIT_COMMITTER_EMAIL": "t@t"})
    return g.head.commit.hexsha


@pytest.fixture
def example_repo(tmp_path) -> tuple[Path, str]:
    """`evoharness init`, then the example's agent and manifest committed, as its README says."""
    repo = init_harness(tmp_path / "h")
    for name in ("agent.py", "harness.toml"):
        shutil.copy(EXAMPLE / name, repo.path / name)
    return repo.path, _commit(repo.path, "command agent")


def _manifest(command: str) -> str:
    return (EXAMPLE / "harness.toml").read_text().replace('command = "python3 agent.py"', f'command = "{command}"')


def _run(path: Path, reqs: list[RolloutRequest], model: str = "scripted:oracle", **kw):
    kw.setdefault("limits", LIMITS)
    with LocalExecutor(path, "synthetic", model, sandbox=BwrapSandbox(), workers=2, **kw) as ex:
        return ex.run(reqs)


def test_the_example_agent_runs_in_bwrap_and_its_rollouts_are_scored(example_repo):
    path, sha = example_repo
    tasks = ["contact_0", "status_A-101", "total_D-400", "message_0", "message_1"]
    trajs = _run(path, [RolloutRequest(task_id=t, harness_commit=sha, seed=3, rollout=1) for t in tasks])
    assert [t.task_id for t in trajs] == tasks
    for t in trajs:
        assert t.meta.get("rollout_failure") is None, t.meta
        assert t.score == 1.0 and t.termination == Termination.delivered
        assert t.harness_commit == sha and t.model == "scripted:oracle" and t.rollout == 1 and t.meta["seed"] == 3
        assert t.meta["output_format"] == "openai_messages" and t.meta["agent"] == "command"
        assert t.final_answer == t.messages[-1]["content"]
        # the harness (read-only) reached the agent: its system prompt is the harness's prompts/system.md
        assert t.messages[0]["content"].startswith((path / "prompts" / "system.md").read_text().strip()[:40])
    send = trajs[3]
    assert [m["tool_calls"][0]["function"]["name"] for m in send.messages if m.get("tool_calls")] == [
        "lookup_contact", "send_message"]


def test_the_example_agent_calls_the_model_through_the_gateway(example_repo):
    path, sha = example_repo
    script = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "x1", "type": "function",
         "function": {"name": "get_order", "arguments": json.dumps({"order_id": "A-101"})}}]},
        "Order A-101 is pending."]
    upstream = ModelUpstream(lambda: ScriptedModel(outputs=script), model_name="scripted-gw")
    (t,) = _run(path, [RolloutRequest(task_id="status_A-101", harness_commit=sha)], model="scripted-gw",
                upstream=upstream)
    assert t.meta.get("rollout_failure") is None, t.meta
    assert t.final_answer == "Order A-101 is pending." and t.score == 1.0
    assert json.loads(t.messages[3]["content"])["status"] == "pending"  # the tool really ran
    assert t.meta["gateway"]["requests"] == 2 and t.usage.prompt_tokens > 0


MODES = ["list", "undelivered", "canonical", "canonical_scored", "send", "wrongtask", "garbage", "shape", "role",
         "crash", "hang", "nothing"]


def test_output_formats_and_broken_commands(example_repo):
    path, _ = example_repo
    (path / "fake.py").write_text(FAKE)
    commits = {}
    for mode in MODES:
        (path / "harness.toml").write_text(_manifest(f"python3 fake.py {mode}"))
        commits[mode] = _commit(path, mode)
    reqs = {m: RolloutRequest(task_id="message_0" if m == "send" else "contact_0", harness_commit=commits[m], seed=i)
            for i, m in enumerate(MODES)}
    # The commands that end on their own get a wall limit they never reach however loaded the machine; the
    # hang a short one, and it must come back at that limit, far sooner than its 600 s sleep.
    ending, wall = [m for m in MODES if m != "hang"], 4.0
    out = dict(zip(ending, _run(path, [reqs[m] for m in ending], limits=Limits(wall_seconds=300, cpu_seconds=30)),
                   strict=True))
    start = time.monotonic()
    (out["hang"],) = _run(path, [reqs["hang"]], limits=Limits(wall_seconds=wall, cpu_seconds=30))
    assert wall <= time.monotonic() - start < 120

    ok = out["list"]  # a bare list: the last assistant message is the final answer, scored by the environment
    assert (ok.final_answer, ok.score, ok.termination) == ("It is ada@example.org", 1.0, Termination.delivered)
    assert ok.harness_commit == commits["list"] and ok.task == "What is the email address of Ada Lovelace?"
    assert ok.usage.steps == 2 and ok.meta["score_note"] == "scored by the environment after replaying 1 tool calls"
    nd = out["undelivered"]
    assert (nd.final_answer, nd.score, nd.termination) == (None, 0.0, Termination.aborted)
    canon = out["canonical"]  # a canonical trajectory without a score is scored the same way
    assert canon.id == "mine" and canon.score == 1.0 and canon.meta["output_format"] == "trajectory"
    forged = out["canonical_scored"]  # a score the command reported itself is not believed: the host's differs
    assert forged.score == 0.0 and "reported score 0.25" in forged.meta["tampered"]
    assert [e.type for e in forged.events] == ["tampered"]
    send = out["send"]  # state-changing calls are replayed: the outbox has the message
    assert send.score == 1.0
    assert [(e.type, e.step) for e in send.events] == [("unknown_tool", 3)]

    reasons = {m: out[m].events[0].detail for m in ("wrongtask", "garbage", "shape", "role", "crash", "hang",
                                                     "nothing")}
    assert reasons["wrongtask"] == "command wrote a trajectory of task 'status_A-100', not 'contact_0'"
    assert reasons["garbage"].startswith("command wrote invalid JSON")
    assert reasons["shape"].startswith("command output is neither a Trajectory")
    assert reasons["role"] == "message 0 is not an OpenAI chat message (role one of system, user, assistant, tool)"
    assert reasons["crash"] == "worker failed: exit 3: agent exploded"
    assert reasons["hang"].startswith("worker failed: wall-time limit hit, ended after")
    assert reasons["nothing"] == "command exited 0 but wrote no output file"
    for m in reasons:
        t = out[m]
        assert t.score == 0.0 and t.final_answer is None and t.meta["rollout_failure"]["reason"] == reasons[m]
    assert out["hang"].termination == Termination.timeout


def test_the_tool_command_keeps_state_between_calls_and_returns_errors_as_data(tmp_path):
    task = {"env_spec": "synthetic", "task_id": "message_0", "output": str(tmp_path / "out.json")}
    (tmp_path / "request.json").write_text(json.dumps(task))
    send = json.dumps({"to": "ada@example.org", "body": "hi"})
    assert run_tool(tmp_path / "request.json", "send_message", send)["ok"]
    assert run_tool(tmp_path / "request.json", "send_message", send)["ok"]
    bad = run_tool(tmp_path / "request.json", "get_order", json.dumps({"order_id": "Z-1"}))
    assert bad == {"ok": False, "error": {"kind": "tool_error", "message": "no order 'Z-1'"}}
    assert len((tmp_path / "tool_calls.jsonl").read_text().splitlines()) == 2  # failed calls change nothing


def test_an_environment_that_cannot_score_leaves_the_score_none_and_says_why(tmp_path, monkeypatch):
    rollout = CommandRollout("synthetic", "scripted:oracle", RolloutRequest(task_id="contact_0", harness_commit="x"),
                             None)

    def refuse(*_a, **_k):
        raise NotImplementedError("needs the live state")

    monkeypatch.setattr(rollout.env, "score", refuse)
    out = tmp_path / "out.json"
    out.write_text(json.dumps([{"role": "assistant", "content": "ada@example.org"}]))
    t = rollout.read(out, 0.5)
    assert t.score is None and t.final_answer == "ada@example.org"
    assert t.meta["score_note"] == "unscored: NotImplementedError: needs the live state"
