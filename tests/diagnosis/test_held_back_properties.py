"""What the held-back sets of other domains check, on variants of real public runs: a tool error retried
with success (at once or after several failures) and a format rejection the agent fixed (even after
several in a row) are friction, never the failure; an edit -> re-run cycle is never a loop; a run that
never gets past its friction is still F2. Each variant is a real record of ../shared/data with messages
inserted, written back in its own format and read by the importer (the path a user's files take)."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths

PROCESS = ("F2", "F3")


def _tau_records(full_shared_data):
    return json.loads((full_shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())


def _first_write(traj):
    """Index of the first assistant message calling a write tool whose result is no error."""
    for i, m in enumerate(traj):
        for c in m.get("tool_calls") or []:
            name = c["function"]["name"]
            if name.startswith(("book_", "update_", "cancel_", "send_")):
                res = next((r for r in traj[i + 1:] if r.get("tool_call_id") == c["id"]), None)
                if res is not None and not str(res.get("content", "")).startswith("Error"):
                    return i
    return None


def _with_failed_tries(record, tries: int, recover: bool = True, same_args: bool = True):
    """The record with ``tries`` failed calls (``Error: ...`` results) of its first write inserted before the
    call that succeeded -- the same call, or with ``same_args=False`` one with other arguments (the agent fixed
    the call); with ``recover=False`` the run ends on the last failure instead."""
    rec = copy.deepcopy(record)
    traj = rec["traj"]
    i = _first_write(traj)
    call = traj[i]["tool_calls"][0]
    if not same_args:
        args = {**json.loads(call["function"]["arguments"]), "payment_id": "gift_card_0000000"}
        call = {**call, "function": {**call["function"], "arguments": json.dumps(args)}}
    inserted = []
    for k in range(tries):
        cid = f"{call['id']}_failed{k}"
        inserted.append({"role": "assistant", "content": None, "tool_calls": [{**call, "id": cid}]})
        inserted.append({"role": "tool", "tool_call_id": cid, "name": call["function"]["name"],
                         "content": "Error: the payment method gift_card_0000000 is not enough"})
    rec["traj"] = traj[:i] + inserted + (traj[i:] if recover else [])
    return rec


def _label_tau(tmp_path, records):
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(records))
    labeller = Labeller()
    return [labeller.label(t) for t in load_paths([path])]


@pytest.mark.parametrize(("tries", "same_args"), [(1, True), (2, True), (3, True), (3, False)])
def test_a_tool_error_retried_with_success_is_never_the_failure(full_shared_data, tmp_path, tries, same_args):
    records = [r for r in _tau_records(full_shared_data) if _first_write(r["traj"]) is not None]
    failed = [r for r in records if r["reward"] == 0][:20]
    passed = [r for r in records if r["reward"] == 1][:20]
    labels = _label_tau(tmp_path, [_with_failed_tries(r, tries, same_args=same_args) for r in failed + passed])
    assert len(labels) == len(failed) + len(passed) == 40
    assert all(lab.failure_class == "healthy" for lab in labels[len(failed):])
    bad = [(lab.trajectory_id, lab.first_signal.id) for lab in labels[:len(failed)]
           if lab.failure_class in PROCESS]
    assert not bad, bad
    assert not [s.id for lab in labels for s in lab.signals if s.id == "F2.tool_error"]


def test_a_tool_error_never_got_past_is_the_failure(full_shared_data, tmp_path):
    failed = [r for r in _tau_records(full_shared_data) if r["reward"] == 0 and _first_write(r["traj"])][:20]
    labels = _label_tau(tmp_path, [_with_failed_tries(r, 2, recover=False) for r in failed])
    for rec, lab in zip(failed, labels, strict=True):
        error_at = _first_write(rec["traj"]) + 1  # the first inserted failure's result (the importer keeps indices)
        # at the inserted failure, or at an earlier error of the record's own that the cut tail recovered
        [tool_error] = [s.step for s in lab.signals if s.id == "F2.tool_error"]
        assert tool_error <= error_at, lab.trajectory_id
        assert lab.first_signal.id == "F2.tool_error" or lab.first_signal.step < error_at, lab.first_signal


REJECTION = ("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n\n"
             "Please format your action in triple backticks as shown in <response_example>.")


def _mini_swe_variant(full_shared_data, tmp_path, resolved: bool, edit):
    """Every mini-swe-agent run with the given outcome, ``edit(messages)`` applied, written in its layout."""
    src = full_shared_data / "mini_swe_agent_sample"
    out = tmp_path / ("resolved" if resolved else "failed")
    n = 0
    for report in sorted(src.glob("logs/*/report.json")):
        inst = report.parent.name
        rep = json.loads(report.read_text())
        if rep.get(inst, rep).get("resolved") != resolved:
            continue
        data = json.loads((src / "trajs" / inst / f"{inst}.traj.json").read_text())
        data["messages"] = edit(data["messages"])
        (out / "trajs" / inst).mkdir(parents=True)
        (out / "logs" / inst).mkdir(parents=True)
        (out / "trajs" / inst / f"{inst}.traj.json").write_text(json.dumps(data))
        shutil.copy(report, out / "logs" / inst / "report.json")
        n += 1
    labeller = Labeller()
    labels = [labeller.label(t) for t in load_paths([out])]
    assert len(labels) == n == 10
    return labels


def _first_action(messages):
    return next(i for i, m in enumerate(messages) if m["role"] == "assistant" and "```bash" in m["content"])


def _rejected_twice(messages):
    i = _first_action(messages)
    bad = {"role": "assistant", "content": "THOUGHT: two at once.\n\n```bash\nls\n```\n\n```bash\npwd\n```"}
    rejection = {"role": "user", "content": REJECTION}
    return messages[:i] + [bad, rejection, bad, rejection, bad, rejection] + messages[i:]


@pytest.mark.parametrize("resolved", [True, False])
def test_format_rejections_the_agent_fixed_are_no_process_label(full_shared_data, tmp_path, resolved):
    labels = _mini_swe_variant(full_shared_data, tmp_path, resolved, _rejected_twice)
    if resolved:
        assert all(lab.failure_class == "healthy" for lab in labels)
    else:
        assert not [lab.first_signal.id for lab in labels if lab.failure_class in PROCESS]
    assert not [s.id for lab in labels for s in lab.signals if s.id == "F2.format_rejected"]


def _edit_rerun_cycle(messages):
    """Three rounds of: edit a file with sed -i, re-run the same script, the same failing output."""
    i = _first_action(messages)
    cycle = []
    for k in range(3):
        cycle += [
            {"role": "assistant", "content": f"THOUGHT: try a fix.\n\n```bash\nsed -i 's/x{k}/y{k}/' src/m.py\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"},
            {"role": "assistant", "content": "THOUGHT: re-run.\n\n```bash\npython reproduce.py\n```"},
            {"role": "user", "content": "<returncode>1</returncode>\n<output>\nAssertionError: 1 != 2\n</output>"},
        ]
    return messages[:i] + cycle + messages[i:]


@pytest.mark.parametrize("resolved", [True, False])
def test_an_edit_rerun_cycle_is_no_loop(full_shared_data, tmp_path, resolved):
    labels = _mini_swe_variant(full_shared_data, tmp_path, resolved, _edit_rerun_cycle)
    assert all((lab.failure_class == "healthy") == resolved for lab in labels)
    assert not [s.id for lab in labels for s in lab.signals if s.id.startswith("F3.")]
