"""`diagnose` names the failing step, agent and a quote; `label` writes the violation log; `calibrate`."""

from __future__ import annotations

import json

from evoharness.cli import main
from evoharness.diagnosis.calibrate import agreement
from evoharness.traces.builder import TraceBuilder
from evoharness.traces.store import write_trajectories


def test_kappa_and_confusion_matrix_match_a_hand_computation():
    labels = {"a": ("F2", 3), "b": ("F2", 5), "c": ("F4", 9), "d": ("F4", 2), "e": ("healthy", None)}
    human = {"a": ("F2", 3), "b": ("F4", 9), "c": ("F4", 8), "d": ("F4", 2), "e": ("healthy", None), "z": ("F1", 1)}
    r = agreement(labels, human)
    assert r.classes == ["healthy", "F2", "F4"]
    assert r.matrix == [[1, 0, 0], [0, 1, 0], [0, 1, 2]]
    # observed 4/5; expected (1*1 + 1*2 + 3*2) / 25 = 9/25; kappa = (0.8 - 0.36) / 0.64
    assert abs(r.kappa - 0.6875) < 1e-9 and r.accuracy == 0.8
    assert (r.step_n, r.step_exact, r.step_within_3, r.unmatched_human) == (4, 2, 3, 1)


def test_diagnose_shows_step_agent_quote_and_label_writes_violations(tmp_path, capsys):
    policy = "You must obtain explicit user confirmation (yes) before any update."
    b = TraceBuilder("t1", id="t1").system(policy).user("cancel order 42")
    b.call("cancel_order", {"id": 42}, result="cancelled").deliver("Order 42 is cancelled.")
    ma = {"id": "ma", "task_id": "ma", "task": "q", "meta": {"failure_only": True}, "final_answer": "12",
          "messages": [{"role": "user", "content": "q"},
                       {"role": "assistant", "name": "Planner", "content": "Let's assume the census says 4,200,118."},
                       {"role": "assistant", "name": "Checker", "content": "FINAL ANSWER: 12"}]}
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [b.build(score=0.0)])
    with src.open("a") as fh:
        fh.write(json.dumps(ma) + "\n")
    assert main(["diagnose", str(src)]) == 0
    out = capsys.readouterr().out
    assert 't1  F4  step 2  F4.policy_violation  "cancel_order({"id": 42})"' in out
    assert "ma  F1  step 1  [Planner]  F1.unsupported_fact" in out
    assert main(["label", str(src), "--out", str(tmp_path / "l.jsonl")]) == 0
    first = json.loads((tmp_path / "l.jsonl").read_text().splitlines()[0])
    assert first["violations"] == [{"rule": "policy.confirmation", "step": 2,
                                    "evidence": "cancel_order without an explicit yes; the user last said: "
                                                "cancel order 42"}]


def test_calibrate_cli_prints_kappa_and_rejects_bad_input(tmp_path, capsys):
    labels = tmp_path / "l.jsonl"
    labels.write_text("\n".join(json.dumps({"trajectory_id": i, "failure_class": c, "first_signal": {"step": 1},
                                             "schema_version": 1})
                                for i, c in (("a", "F2"), ("b", "F4"))))
    human = tmp_path / "h.jsonl"
    human.write_text('{"id": "a", "class": "F2"}\n{"id": "b", "class": "F2"}\n')
    assert main(["calibrate", str(labels), "--human", str(human)]) == 0
    assert "Cohen's kappa 0.000" in capsys.readouterr().out
    human.write_text('{"id": "a", "class": "F9"}\n')
    assert main(["calibrate", str(labels), "--human", str(human)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {human}:line 1: unknown class 'F9'")
    for path, reason in ((tmp_path, "is a directory, not a labels file"),
                         (tmp_path / "nope.jsonl", "no such file or directory"),
                         ("/dev/null", "not a regular file (a FIFO, socket or device is refused)")):
        assert main(["calibrate", str(labels), "--human", str(path)]) == 2  # all three were "no such file"
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {reason}"]


def test_calibrate_reports_unreadable_json_and_odd_fields_in_one_line(tmp_path, capsys):
    human = tmp_path / "human.jsonl"
    human.write_text('{"trajectory_id": "a", "failure_class": "F1", "step": 2}\n')
    cases = {  # each was a traceback (RecursionError, ValueError, AttributeError)
        "deep.json": ("[" * 100_000 + "]" * 100_000, "deep.json:line 1: JSON nested too deeply"),
        "big.jsonl": ('{"id": ' + "1" * 5000 + "}\n", "big.jsonl:line 1: unreadable JSON (Exceeds the limit"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        assert main(["calibrate", str(tmp_path / name), "--human", str(human)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {tmp_path / message}"), err
    odd = tmp_path / "labels.jsonl"  # a first_signal that is not an object: not a crash, and no line of `label`
    odd.write_text('{"trajectory_id": "a", "failure_class": "F1", "first_signal": "F1.claim", "schema_version": 1}\n')
    assert main(["calibrate", str(odd), "--human", str(human), "--json"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {odd}:line 1: not a label (written by `evoharness label`): first_signal: must be a JSON object"]


def test_calibrate_names_a_symlink_loop_and_a_dangling_link_as_every_command_does(tmp_path, capsys):
    """calibrate said 'no such file' for a loop and a dangling link, names `ls` shows (051dde6 made every other
    command say what the link is)."""
    labels = tmp_path / "l.jsonl"
    labels.write_text(json.dumps({"trajectory_id": "a", "failure_class": "F2", "first_signal": {"step": 1},
                                  "schema_version": 1}) + "\n")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("nowhere.jsonl")
    for path, reason in ((tmp_path / "loop", "a symlink loop (too many levels of symbolic links)"),
                         (tmp_path / "dangling", "a symbolic link that cannot be followed: no such file or directory")):
        assert main(["calibrate", str(labels), "--human", str(path)]) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {reason}"]
