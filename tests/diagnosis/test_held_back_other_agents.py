"""Hand-written runs of agents and shapes the tuning data lacks, written in the on-disk formats the held-back sets
may come in and read by the importers: mini-swe-agent v1 (``trajs/<id>/<id>.traj.json`` + ``logs/<id>/report.json``),
SWE-agent ``.traj`` (function calling, written by tests/fixtures/traces/swe_agent/make_sample.py), an
OpenHands-style chat record (``execute_bash``, tau-bench's record list), OpenHands' own evaluation ``output.jsonl``
(its serialised events, the verdict in ``eval_outputs/<id>/report.json``) and Harbor's ATIF trial
(``<trial>/agent/trajectory.json`` + ``<trial>/result.json``). The properties: a resolved run stays Healthy; a
failed run gets no process label (F2 / F3) for work that made progress or friction it got past."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.diagnosis.invariants import policy_rules
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from tests.modules import load_file

FORMATS = ("mini-swe-agent", "swe-agent", "openhands", "openhands-output", "atif")
SYSTEM = "You are a helpful assistant that can interact with a computer shell to solve programming tasks."
TASK = ("<pr_description>\nvalues() crashes on an empty list in pkg/core.py\n</pr_description>\n"
        "Please solve this issue. You can execute bash commands and edit files to implement the necessary changes.")
PATCH = ("diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
         "@@ -10,7 +10,7 @@ def values(items):\n     out = []\n     for x in items:\n         out.append(x)\n"
         "-    return out[0]\n+    return out[0] if out else None\n \n \n def keys(items):\n")
OK = (0, "")
FIX = ("Fix it.", "sed -i 's/    return out\\[0\\]/    return out[0] if out else None/' pkg/core.py", OK)
SUBMIT = ("Done.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", (0, PATCH))
CORE = (0, "def values(items):\n    out = []\n    for x in items:\n        out.append(x)\n    return out[0]")


def _swe_agent_writer():
    path = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "swe_agent" / "make_sample.py"
    return load_file(path, "swe_agent_writer")


def _mini(actions) -> list[dict]:
    """v1 messages; an exit code of None is a command that ran out of time (mini-swe-agent's timeout_template)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for thought, command, (rc, out) in actions:
        observation = f"<returncode>{rc}</returncode>\n<output>\n{out}\n</output>" if rc is not None else (
            f"The last command <command>{command}</command> timed out and has been killed.\nThe output of the "
            f"command was:\n <output>\n{out}\n</output>\nPlease try another command and make sure to avoid those "
            "requiring interactive input.")
        messages += [{"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```"},
                     {"role": "user", "content": observation}]
    return messages


def write_swe_run(root: Path, fmt: str, actions, resolved: bool, instance: str = "pkg__pkg-101") -> Path:
    """``actions`` -- (thought, shell command, (exit code, output)), the last one the submission -- as ``fmt``
    writes a run, with its SWE-bench verdict where that format's tools keep it."""
    submission = actions[-1][2][1]
    v1 = {"instance_id": instance, "messages": _mini(actions),
          "info": {"exit_status": "Submitted", "submission": submission, "mini_version": "1.15",
                   "config": {"model": {"model_name": "m"}}}}
    report = {instance: {"resolved": resolved}}
    if fmt in ("mini-swe-agent", "swe-agent"):
        (root / "logs" / instance).mkdir(parents=True)
        (root / "logs" / instance / "report.json").write_text(json.dumps(report))
        if fmt == "mini-swe-agent":
            (root / "trajs" / instance).mkdir(parents=True)
            (root / "trajs" / instance / f"{instance}.traj.json").write_text(json.dumps(v1))
        else:
            (root / "trajs").mkdir(parents=True)
            (root / "trajs" / f"{instance}.traj").write_text(json.dumps(_swe_agent_writer().to_swe_agent(v1)))
        return root
    if fmt == "openhands-output":  # OpenHands' evaluation output.jsonl: its events, the patch in test_result
        return _openhands_output(root, instance, actions, report)
    if fmt == "openhands":  # OpenHands' execute_bash tool, its observations ending with the exit code
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        for k, (thought, command, (rc, out)) in enumerate(actions):
            messages += [{"role": "assistant", "content": thought, "tool_calls": [
                {"id": f"toolu_{k}", "type": "function",
                 "function": {"name": "execute_bash", "arguments": json.dumps({"command": command})}}]},
                {"role": "tool", "tool_call_id": f"toolu_{k}", "name": "execute_bash",
                 "content": f"{out}\n[The command completed with exit code {rc}.]"}]
        messages.append({"role": "assistant", "content": submission})
        root.mkdir(parents=True, exist_ok=True)
        path = root / "output.json"
        path.write_text(json.dumps([{"task_id": instance, "reward": 1.0 if resolved else 0.0, "traj": messages}]))
        return path
    steps = [{"step_id": 1, "source": "system", "message": SYSTEM}, {"step_id": 2, "source": "user", "message": TASK}]
    for k, (thought, command, (rc, out)) in enumerate(actions):
        steps.append({"step_id": len(steps) + 1, "source": "agent", "message": thought,
                      "tool_calls": [{"tool_call_id": f"c{k}", "function_name": "bash",
                                      "arguments": {"command": command}}],
                      "observation": {"results": [{"source_call_id": f"c{k}",
                                                   "content": out if rc == 0 else f"{out}\nexit code {rc}"}]}})
    steps.append({"step_id": len(steps) + 1, "source": "agent", "message": submission})
    (root / "trial" / "agent").mkdir(parents=True)
    (root / "trial" / "agent" / "trajectory.json").write_text(json.dumps(
        {"schema_version": "ATIF-v1.2", "session_id": instance, "agent": {"name": "openhands", "model_name": "m"},
         "steps": steps}))
    (root / "trial" / "result.json").write_text(json.dumps(
        {"task_name": instance, "verifier_result": {"rewards": {"reward": 1.0 if resolved else 0.0}}}))
    return root / "trial" / "agent" / "trajectory.json"


def _openhands_output(root: Path, instance: str, actions, report: dict) -> Path:
    """``actions`` as OpenHands 0.39 serialises a run's events (``event_to_dict``): each command a ``run`` action and
    its observation (the exit code in ``extras.metadata``), then ``finish``; the submission is ``test_result.git_patch``
    when it is a diff, else the finish message."""
    submission = actions[-1][2][1]
    patch = submission if submission.startswith("diff --git") else ""
    events = [{"id": 0, "source": "agent", "action": "system", "args": {"content": SYSTEM}},
              {"id": 1, "source": "user", "action": "message", "args": {"content": TASK}}]
    for thought, command, (rc, out) in actions:
        meta = {"function_name": "execute_bash", "tool_call_id": f"toolu_{len(events)}", "model_response": None,
                "total_calls_in_response": 1}
        events.append({"id": len(events), "source": "agent", "action": "run", "tool_call_metadata": meta,
                       "args": {"command": command, "is_input": False, "thought": thought}})
        events.append({"id": len(events), "source": "agent", "cause": len(events) - 1, "observation": "run",
                       "tool_call_metadata": meta, "content": out, "extras": {"command": command, "metadata": {
                           "exit_code": rc, "suffix": f"\n[The command completed with exit code {rc}.]"}}})
    events.append({"id": len(events), "source": "agent", "action": "finish",
                   "args": {"final_thought": "Done." if patch else submission, "task_completed": "true"}})
    (root / "eval_outputs" / instance).mkdir(parents=True)
    (root / "eval_outputs" / instance / "report.json").write_text(json.dumps(report))
    (root / "output.jsonl").write_text(json.dumps(
        {"instance_id": instance, "instruction": TASK, "history": events, "test_result": {"git_patch": patch},
         "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "m"}}, "error": None}) + "\n")
    return root / "output.jsonl"


def label_one(path: Path):
    [traj] = list(load_paths([path]))
    return traj, Labeller().label(traj)


def _exploration_looking_back(repeat_searches: bool):
    """A long exploratory phase: the agent reads pkg/core.py, searches the code base, and reads the file again
    between searches -- each search a new one (``repeat_searches=False``) or the same search again."""
    actions = []
    for k in range(3):
        actions.append(("Read the function again.", "sed -n '1,40p' pkg/core.py", CORE))
        word = "values(" if repeat_searches else ("values(", "keys(", "items(")[k]
        grep = f"grep -rn '{word}' tests/"
        actions.append(("Where is it used?", grep, (0, f"tests/test_core.py:{5 if repeat_searches else 5 + k}: call")))
    return actions + [FIX, ("Run it.", "python reproduce.py", OK), SUBMIT]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("resolved", [True, False])
def test_looking_back_at_a_file_between_new_searches_is_no_loop(tmp_path, fmt, resolved):
    traj, lab = label_one(write_swe_run(tmp_path, fmt, _exploration_looking_back(False), resolved))
    assert traj.score == (1.0 if resolved else 0.0)
    assert lab.failure_class == ("healthy" if resolved else "F4")
    assert [s.id for s in lab.signals if s.id.startswith(("F2.", "F3."))] == []
    if not resolved:  # the failure sits on the edit of the patched file, not on the exploration
        assert lab.first_signal.id == "F4.first_write" and "sed -i" in lab.quote + lab.first_signal.evidence


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_same_look_and_the_same_search_over_and_over_is_a_loop(tmp_path, fmt):
    """The control: nothing new between the looks (the same search, the same answer) is a loop."""
    _, lab = label_one(write_swe_run(tmp_path, fmt, _exploration_looking_back(True), False))
    assert lab.first_signal.id == "F3.repeated_action"


def _setup_then_fix(finish: str):
    """A failed run that installs the package (the first try fails), writes a reproduction script, then edits the
    source in place; it ends with ``finish`` (a message, as OpenHands' ``finish`` and a Harbor trial end)."""
    return [("Install it.", "pip install -e . -q", (1, "ERROR: Could not build wheels for pkg")),
            ("Install deps first.", "pip install setuptools==68.0 && pip install -e . -q", OK),
            ("Reproduce.", "cat > reproduce.py <<'EOF'\nfrom pkg.core import values\nprint(values([]))\nEOF", OK),
            ("Run it.", "python reproduce.py", (1, "Traceback (most recent call last):\nIndexError: list index")),
            FIX, ("Run it again.", "python reproduce.py", (0, "None")), ("Finish.", "echo done", (0, finish))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_without_a_patch_a_failed_coding_run_sits_on_its_first_edit_of_the_code(tmp_path, fmt):
    """No patch names the files that matter: the change to the code starts at the first in-place edit of an existing
    file, not at the package install or the reproduction script written before it."""
    traj, lab = label_one(write_swe_run(tmp_path, fmt, _setup_then_fix("I have fixed the issue."), False))
    assert traj.score == 0.0 and "diff --git" not in (traj.final_answer or "")
    assert lab.first_signal.id == "F4.first_write"
    assert "sed -i" in lab.quote + lab.first_signal.evidence and "pip install" not in lab.quote
    assert [s.id for s in lab.signals if s.id.startswith(("F2.", "F3."))] == []
    # with the patch delivered, the same run sits on the same edit (the first write of the patched file)
    _, patched = label_one(write_swe_run(tmp_path / "patch", fmt, _setup_then_fix(PATCH), False))
    assert patched.first_signal.step == lab.first_signal.step


def test_an_editor_tool_run_without_a_patch_sits_on_its_first_replacement(tmp_path):
    """OpenHands' tools: ``str_replace_editor`` creates the reproduction script, then replaces text in the source;
    the run ends with its ``finish`` call's message."""
    calls = [("str_replace_editor", {"command": "view", "path": "/workspace/pkg"}, "pkg/\npkg/core.py\ntests/"),
             ("str_replace_editor", {"command": "create", "path": "/workspace/pkg/reproduce.py",
                                     "file_text": "from pkg.core import values\nprint(values([]))\n"},
              "File created successfully at: /workspace/pkg/reproduce.py"),
             ("execute_bash", {"command": "cd /workspace/pkg && python reproduce.py"},
              "IndexError: list index out of range\n[The command completed with exit code 1.]"),
             ("str_replace_editor", {"command": "str_replace", "path": "/workspace/pkg/pkg/core.py",
                                     "old_str": "    return out[0]", "new_str": "    return out[0] if out else None"},
              "The file /workspace/pkg/pkg/core.py has been edited."),
             ("execute_bash", {"command": "cd /workspace/pkg && python reproduce.py"},
              "None\n[The command completed with exit code 0.]"),
             ("finish", {"message": "values() now returns None for an empty list."}, "")]
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for k, (name, args, out) in enumerate(calls):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"t{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": f"t{k}", "name": name, "content": out}]
    messages.append({"role": "assistant", "content": "values() now returns None for an empty list."})
    path = tmp_path / "output.json"
    path.write_text(json.dumps([{"task_id": "pkg__pkg-101", "reward": 0.0, "traj": messages}]))
    traj, lab = label_one(path)
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 8)  # the str_replace, not the create
    assert traj.messages[8]["tool_calls"][0]["function"]["arguments"].startswith('{"command": "str_replace"')


def _search_replace(path: str, old: str, new: str) -> str:
    return f"{path}\n```python\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n```"


def _aider_chat() -> list[dict]:
    """An Aider-style session: the edits are SEARCH/REPLACE blocks in the replies (no tool call), Aider's own lint
    and test reports come back as user messages; the first edit has a syntax error, fixed next turn."""
    return [
        {"role": "system", "content": "Act as an expert software developer. Describe each change with a "
                                      "*SEARCH/REPLACE block*."},
        {"role": "user", "content": "values() crashes on an empty list in pkg/core.py. Fix it."},
        {"role": "assistant", "content": "Guard the empty list:\n\n" + _search_replace(
            "pkg/core.py", "    return out[0]", "    return out[0] if out else None)")},
        {"role": "user", "content": "# Fix any errors below, if possible.\n\n## Running: python -m flake8 --select=E9 "
                                    "pkg/core.py\n\npkg/core.py:13:38: E999 SyntaxError: unmatched ')'"},
        {"role": "assistant", "content": "I cannot leave the stray paren; removing it:\n\n" + _search_replace(
            "pkg/core.py", "    return out[0] if out else None)", "    return out[0] if out else None")},
        {"role": "user", "content": "I ran this command:\n\npython -m pytest tests/test_core.py -q\n\nAnd got this "
                                    "output:\n\n5 passed"},
        {"role": "assistant", "content": "All tests pass now: values() returns None for an empty list."}]


@pytest.mark.parametrize("fmt", ["records", "canonical"])
@pytest.mark.parametrize("resolved", [True, False])
def test_an_aider_style_run_sits_on_its_first_edit_not_its_last_message(tmp_path, fmt, resolved):
    """A failed run whose agent writes its edits in its replies is located at its first edit (the first write), not
    at its last message, and its "I cannot leave ..." is no refusal of the task (it wrote); a resolved one is
    Healthy."""
    score = 1.0 if resolved else 0.0
    if fmt == "records":  # tau-bench's record list (the ``openai`` importer)
        path = tmp_path / "aider.json"
        path.write_text(json.dumps([{"task_id": "pkg__pkg-101", "reward": score, "traj": _aider_chat()}]))
    else:  # evoharness' own JSONL
        path = tmp_path / "aider.jsonl"
        path.write_text(json.dumps({"id": "aider:pkg__pkg-101", "task_id": "pkg__pkg-101", "messages": _aider_chat(),
                                    "final_answer": _aider_chat()[-1]["content"], "score": score,
                                    "termination": "delivered"}) + "\n")
    traj, lab = label_one(path)
    assert traj.score == score and not traj.tool_calls()
    if resolved:
        assert lab.failure_class == "healthy"
        return
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 2)
    assert [s.id for s in lab.signals if s.id.startswith(("F2.", "F3.", "F4.stalled"))] == []


NO_REPLACEMENT = ("ERROR:\nNo replacement was performed, old_str `    return out[0]` did not appear verbatim in "
                  "/workspace/pkg/pkg/core.py.")


def _openhands_record(tmp_path, calls, reward: float, system: str = SYSTEM) -> Path:
    """``calls`` -- (tool, arguments, result) -- as an OpenHands run in tau-bench's record list, ending with its
    ``finish`` message."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": TASK}]
    for k, (name, args, out) in enumerate(calls):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"t{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": f"t{k}", "name": name, "content": out}]
    messages.append({"role": "assistant", "content": "values() now returns None for an empty list."})
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"output-{reward}.json"
    path.write_text(json.dumps([{"task_id": "pkg__pkg-101", "reward": reward, "traj": messages}]))
    return path


def _the_same_refused_replacement(then_fixed: bool):
    """The editor refuses the same ``str_replace`` three times (its old text has tabs, not spaces); the agent then
    views the lines and sends it with the right whitespace (``then_fixed``), or runs the tests and finishes."""
    edit = {"command": "str_replace", "path": "/workspace/pkg/pkg/core.py", "old_str": "    return out[0]",
            "new_str": "    return out[0] if out else None"}
    calls = [("execute_bash", {"command": "grep -rn 'def values' /workspace/pkg"},
              "/workspace/pkg/pkg/core.py:10:def values(items):\n[The command completed with exit code 0.]")]
    calls += [("str_replace_editor", edit, NO_REPLACEMENT)] * 3
    if then_fixed:
        calls += [("str_replace_editor", {"command": "view", "path": "/workspace/pkg/pkg/core.py"},
                   "    13\t\treturn out[0]"),
                  ("str_replace_editor", {**edit, "old_str": "\treturn out[0]", "new_str": "\treturn out[0] if out "
                                                                                         "else None"},
                   "The file /workspace/pkg/pkg/core.py has been edited.")]
    return calls + [("execute_bash", {"command": "cd /workspace/pkg && python -m pytest tests -q"},
                     "1 failed, 4 passed\n[The command completed with exit code 1.]"),
                    ("finish", {"message": "values() now returns None for an empty list."}, "")]


@pytest.mark.parametrize("reward", [1.0, 0.0])
def test_an_editor_refusal_resent_until_it_went_through_is_no_loop(tmp_path, reward):
    """OpenHands' editor says "ERROR: No replacement was performed" in plain text (no harness event); the same
    refused edit sent three times before a corrected one went through is a rejection got past, not a loop."""
    traj, lab = label_one(_openhands_record(tmp_path, _the_same_refused_replacement(True), reward))
    assert not traj.events
    assert [s.id for s in lab.signals if s.id.startswith(("F2.", "F3."))] == []
    if reward == 0.0:  # the first refused edit makes the change that went through: the agent committed to it there
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4)
    else:
        assert lab.failure_class == "healthy"
    # the control: refused three times and never got past, it is a loop
    _, stuck = label_one(_openhands_record(tmp_path / "stuck", _the_same_refused_replacement(False), 0.0))
    assert (stuck.first_signal.id, stuck.first_signal.step) == ("F3.repeated_action", 8)


@pytest.mark.parametrize("named", ["test_values_empty_list2", "test_values_empty_list3"])
def test_a_summary_naming_what_the_agent_wrote_is_no_unbacked_claim(tmp_path, named):
    """A coding agent's closing summary names the test it wrote (its own write went through: no claim to back);
    one naming a test it never wrote is still unbacked."""
    calls = [("str_replace_editor", {"command": "str_replace", "path": "/workspace/pkg/pkg/core.py",
                                     "old_str": "    return out[0]", "new_str": "    return out[0] if out else None"},
              "The file /workspace/pkg/pkg/core.py has been edited."),
             ("str_replace_editor", {"command": "create", "path": "/workspace/pkg/tests/test_empty.py",
                                     "file_text": "def test_values_empty_list2():\n    assert values([]) is None\n"},
              "File created successfully at: /workspace/pkg/tests/test_empty.py"),
             ("execute_bash", {"command": "cd /workspace/pkg && python -m pytest tests -q"},
              "6 passed\n[The command completed with exit code 0.]")]
    summary = f"I fixed values() and added {named} in tests/test_empty.py; all tests pass."
    calls.append(("finish", {"message": summary}, ""))
    path = _openhands_record(tmp_path, calls, 0.0)
    data = json.loads(path.read_text())
    data[0]["traj"][-1]["content"] = summary
    path.write_text(json.dumps(data))
    _, lab = label_one(path)
    if named.endswith("2"):  # the one it wrote
        assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 2)
    else:
        assert lab.first_signal.id == "F1.unbacked_claim" and "test_values_empty_list3" in lab.first_signal.evidence


def _install_fails_then_moves_on(finish: str, moves_on: bool = True):
    """A Harbor trial (ATIF: pip's "ERROR: ..." output is a tool error event) whose dependency install fails twice; the
    agent then leaves it and edits the code (``moves_on``), or only looks around and finishes."""
    actions = [("Install deps.", "pip install numpy==1.9.9", (1, "ERROR: Could not find a version that satisfies "
                                                                  "the requirement numpy==1.9.9")),
               ("Try another.", "pip install 'numpy<1.10'", (1, "ERROR: No matching distribution found")),
               ("Look at the code.", "grep -n 'return out' pkg/core.py", (0, "13:    return out[0]"))]
    return actions + ([FIX, ("Run it.", "python reproduce.py", OK)] if moves_on else []) + [
        ("Finish.", "echo done", (0, finish))]


@pytest.mark.parametrize("finish", ["I have fixed the issue.", PATCH], ids=["message", "patch"])
@pytest.mark.parametrize("resolved", [True, False])
def test_a_failed_install_the_agent_went_past_is_no_friction_label(tmp_path, finish, resolved):
    """The install wrote nothing of the change the run is judged on, and the agent went on to make that change: the
    install's failure is friction got past, not the failure (the edit is, in a failed run)."""
    traj, lab = label_one(write_swe_run(tmp_path, "atif", _install_fails_then_moves_on(finish), resolved))
    assert sum(e.type == "tool_error" for e in traj.events) == 2  # the importer read both failures as tool errors
    assert [s.id for s in lab.signals if s.id.startswith(("F2.", "F3."))] == []
    if resolved:
        assert lab.failure_class == "healthy"
    else:
        assert lab.first_signal.id == "F4.first_write" and "sed -i" in lab.quote + lab.first_signal.evidence
    # the control: with no change made after the failed installs, they are the unrecovered friction
    _, stuck = label_one(write_swe_run(tmp_path / "stuck", "atif", _install_fails_then_moves_on(finish, False), False))
    assert (stuck.first_signal.id, stuck.first_signal.step) == ("F2.tool_error", 3)


def test_a_command_that_timed_out_is_its_tool_result_not_a_user_turn(tmp_path):
    """mini-swe-agent v1 answers a command that ran out of time with its timeout_template, not a ``<returncode>``
    observation: it is that command's result. Read as a user message, it quoted the agent's own command, whose test
    file a tool had said did not exist, and the failed run was ``E.unsatisfiable_task`` ("the user insists")."""
    actions = [("Look.", "cat tests/test_core2.py", (1, "cat: tests/test_core2.py: No such file or directory")),
               ("Find it.", "find . -name 'test_core*'", (0, "./tests/test_core.py")),
               ("Run both.", "python -m pytest tests/test_core2.py tests/test_core.py -q", (None, "collecting ...")),
               FIX, ("Run.", "python -m pytest tests/test_core.py -q", (0, "5 passed")), SUBMIT]
    traj, lab = label_one(write_swe_run(tmp_path, "mini-swe-agent", actions, False))
    assert [m["role"] for m in traj.messages[6:8]] == ["assistant", "tool"]  # the timed-out call and its result
    assert traj.messages[7]["content"].startswith("The last command <command>python -m pytest")
    assert [m["role"] for m in traj.messages].count("user") == 1  # the task only
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 8)


OPENHANDS_PROMPT = (
    "You are OpenHands agent, a helpful AI assistant that can interact with a computer to solve tasks.\n"
    "<VERSION_CONTROL>\n* When configuring git credentials, use \"openhands\" as the user.name by default.\n"
    "* If there are existing git credentials, use the GITHUB_TOKEN environment variable to authenticate with the "
    "GitHub API.\n</VERSION_CONTROL>\n<PROBLEM_SOLVING_WORKFLOW>\n1. EXPLORATION\n2. REPRODUCTION: create a script "
    "to reproduce the issue\n3. IMPLEMENTATION\n4. VERIFICATION\n</PROBLEM_SOLVING_WORKFLOW>")


def test_a_coding_prompt_authenticating_with_a_service_is_no_identity_policy(tmp_path):
    """"authenticate with the GitHub API" asks the agent to log in, not to check who the user is: a failed coding run
    is no ``policy.identity_check`` violation at its first write (the reproduction script), but sits on its edit."""
    calls = [("str_replace_editor", {"command": "create", "path": "/workspace/pkg/reproduce.py",
                                     "file_text": "from pkg.core import values\nprint(values([]))\n"},
              "File created successfully at: /workspace/pkg/reproduce.py"),
             ("str_replace_editor", {"command": "str_replace", "path": "/workspace/pkg/pkg/core.py",
                                     "old_str": "    return out[0]", "new_str": "    return out[0] if out else None"},
              "The file /workspace/pkg/pkg/core.py has been edited."),
             ("finish", {"message": "values() now returns None for an empty list."}, "")]
    _, lab = label_one(_openhands_record(tmp_path, calls, 0.0, OPENHANDS_PROMPT))
    assert lab.violations == []
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4)
    # a shop's policy that asks to authenticate the user still is one
    assert policy_rules("- At the beginning of the conversation, you have to authenticate the user identity by "
                        "locating their user id via email, or via name + zip code.") == (True, False)
    assert policy_rules("use the GITHUB_TOKEN to authenticate with the GitHub API") == (False, False)


def test_a_coding_prompt_asking_to_confirm_destructive_steps_is_no_confirmation_policy_for_edits(tmp_path):
    """"Never push ... or delete files ... without explicit user confirmation" in a coding agent's prompt is about those
    operations: the agent's edits of its workspace (shell, editor) and its ``finish`` are no writes the policy reads,
    so a failed run sits on its edit, not on a ``policy.confirmation`` violation at its first write. A domain write
    after the same line, with no yes before it, still is one."""
    prompt = SYSTEM + ("\n* Never push to a remote, force-reset, or delete files outside the workspace without "
                       "explicit user confirmation.")
    calls = [("str_replace_editor", {"command": "create", "path": "/workspace/pkg/reproduce.py",
                                     "file_text": "from pkg.core import values\nprint(values([]))\n"},
              "File created successfully at: /workspace/pkg/reproduce.py"),
             ("execute_bash", {"command": "cd /workspace/pkg && sed -i 's/out\\[0\\]$/out[0] if out else None/' "
                                          "pkg/core.py"}, "[The command completed with exit code 0.]"),
             ("finish", {"message": "values() now returns None for an empty list."}, "")]
    _, lab = label_one(_openhands_record(tmp_path, calls, 0.0, prompt))
    assert lab.violations == []
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4)
    domain = [("cancel_reservation", {"reservation_id": "ZFA04Y"}, '{"status": "cancelled"}')] + calls[2:]
    _, lab = label_one(_openhands_record(tmp_path / "domain", domain, 0.0, prompt))
    assert [v.rule for v in lab.violations] == ["policy.confirmation"]


def test_a_shell_edit_whose_output_starts_with_error_still_wrote(tmp_path):
    """``ERROR:`` at the start of an editor's result is its refusal (OpenHands' str_replace_editor, 8b6b3f1); a shell
    command's output that starts so is what it printed, after the edit before it ran (pytest's 'ERROR: file or
    directory not found' after a ``sed -i ... &&``): the sed is the run's first edit of the patched file, not a refused
    edit that a later, other edit of it went past."""
    sed = "cd /workspace/pkg && sed -i 's/return out\\[0\\]$/return out[0] if out else None/' pkg/core.py"
    calls = [("execute_bash", {"command": "cd /workspace/pkg && python reproduce.py"},
              "IndexError: list index out of range\n[The command completed with exit code 1.]"),
             ("execute_bash", {"command": sed + " && python -m pytest tests/test_cor.py -q"},
              "ERROR: file or directory not found: tests/test_cor.py\n\n[The command completed with exit code 4.]"),
             ("execute_bash", {"command": "cd /workspace/pkg && python reproduce.py"},
              "None\n[The command completed with exit code 0.]"),
             ("execute_bash", {"command": "cd /workspace/pkg && sed -i '1i import logging' pkg/core.py"},
              "[The command completed with exit code 0.]"),
             ("execute_bash", {"command": "cd /workspace/pkg && git diff"}, PATCH),
             ("finish", {"message": "values() now returns None for an empty list."}, "")]
    path = _openhands_record(tmp_path, calls, 0.0)
    records = json.loads(path.read_text())
    records[0]["traj"][-1]["content"] = PATCH  # the run delivers its diff
    path.write_text(json.dumps(records))
    traj, lab = label_one(path)
    assert "diff --git" in traj.final_answer
    assert (lab.first_signal.id, lab.first_signal.step) == ("F4.first_write", 4)
    assert "sed -i" in lab.first_signal.evidence
