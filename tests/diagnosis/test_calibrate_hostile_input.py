"""`calibrate` on hand-written human label files (fix, sixth session): a byte-order mark, a label given twice and
a step that is no message index were, in turn, "invalid JSON", one of the two kept unsaid, and the step left out
of the failing-step agreement unsaid."""

from __future__ import annotations

import codecs
import json

import pytest

from evoharness.cli import main


@pytest.fixture
def labels(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps({"trajectory_id": i, "failure_class": c, "first_signal": {"step": s},
                                        "schema_version": 1}) + "\n"
                            for i, c, s in (("a", "F2", 3), ("b", "F4", 5))))
    return path


def _human(tmp_path, *records, bom=b""):
    path = tmp_path / "human.jsonl"
    path.write_bytes(bom + "".join(json.dumps(r) + "\n" for r in records).encode())
    return path


def test_a_human_file_with_a_byte_order_mark_is_read(labels, tmp_path, capsys):
    human = _human(tmp_path, {"id": "a", "class": "F2", "step": 3}, {"id": "b", "class": "F1"}, bom=codecs.BOM_UTF8)
    assert main(["calibrate", str(labels), "--human", str(human), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["n"], got["accuracy"], got["step_n"], got["step_exact"]) == (2, 0.5, 1, 1)


def test_a_trajectory_labelled_twice_differently_is_one_error_line(labels, tmp_path, capsys):
    human = _human(tmp_path, {"id": "a", "class": "F2"}, {"id": "b", "class": "F4"}, {"id": "a", "class": "F1"})
    assert main(["calibrate", str(labels), "--human", str(human)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {human}:line 3: trajectory 'a' is labelled twice, differently (line 1: F2; here: F1)"]
    same = _human(tmp_path, {"id": "a", "class": "F2"}, {"id": "a", "class": "f2"})  # the same label twice: fine
    assert main(["calibrate", str(labels), "--human", str(same)]) == 0


@pytest.mark.parametrize("step", ["3", -1, 2.5, True, [3]])
def test_a_step_that_is_no_message_index_is_one_error_line(step, labels, tmp_path, capsys):
    human = _human(tmp_path, {"id": "a", "class": "F2", "step": step})
    assert main(["calibrate", str(labels), "--human", str(human)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {human}:line 1: step must be a message index (a whole number from 0), not {step!r}"]


def test_a_labels_file_with_unscored_runs_is_read(tmp_path, capsys):
    """`label` writes class 'unknown' for an unscored run on which no signal fired; calibrate upper-cased every
    class but 'healthy' and refused its own labeller's file: "unknown class 'UNKNOWN' (classes: ..., unknown)"."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps({
        "id": i, "task_id": f"t-{i}", "score": None, "final_answer": "Your order 42 has shipped.",
        "messages": [{"role": "user", "content": "Where is order 42?"},
                     {"role": "assistant", "content": "Your order 42 has shipped."}]}) + "\n" for i in ("a", "b")))
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(runs), "--out", str(labels)]) == 0
    assert {json.loads(line)["failure_class"] for line in labels.read_text().splitlines()} == {"unknown"}
    human = _human(tmp_path, {"id": "a", "class": "F4"}, {"id": "b", "class": "Unknown"})
    capsys.readouterr()
    assert main(["calibrate", str(labels), "--human", str(human), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["n"], got["classes"], got["matrix"], got["accuracy"]) == (2, ["F4", "unknown"], [[0, 1], [0, 1]], 0.5)


def test_a_human_file_that_is_one_json_object_says_so(labels, tmp_path, capsys):
    """An indented JSON object wrapping the labels ({"labels": [...]}) was 'invalid JSON (Expecting property name
    enclosed in double quotes)' at line 1: the file is valid JSON, only not JSONL or a JSON list."""
    human = tmp_path / "human.json"
    human.write_text(json.dumps({"labels": [{"id": "a", "class": "F2"}, {"id": "b", "class": "F4"}]}, indent=2))
    assert main(["calibrate", str(labels), "--human", str(human)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {human}: one JSON object (keys: labels), not labels: give JSONL (one label per line) or a JSON list "
        "of labels"]


def test_swapped_arguments_are_one_error_line_naming_the_file_and_record(labels, tmp_path, capsys):
    """`calibrate HUMAN --human LABELS` printed a matrix (the human classes read as the labeller's, the labeller's
    steps dropped unsaid): each file is now checked for its kind."""
    human = _human(tmp_path, {"trajectory_id": "a", "failure_class": "F2", "step": 3})
    assert main(["calibrate", str(human), "--human", str(labels)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {human}:line 1: a human label, not a line `evoharness label` wrote (no schema_version): the labels "
        "file is calibrate's first argument, the human labels go to --human"]
    assert main(["calibrate", str(labels), "--human", str(labels)]) == 2  # a labels file given as the human one
    assert capsys.readouterr().err.splitlines() == [
        f"error: {labels}:line 1: a line `evoharness label` wrote, not a human label: the labels file is "
        "calibrate's first argument, the human labels go to --human"]


def test_a_file_of_another_kind_or_a_record_missing_a_field_is_one_error_line(labels, tmp_path, capsys):
    human = _human(tmp_path, {"trajectory_id": "a", "failure_class": "F2"})
    runs = tmp_path / "runs.json"  # a tau-bench results file, given as either
    runs.write_text(json.dumps([{"task_id": 0, "reward": 0.0, "info": {}, "traj": []}]))
    old = tmp_path / "old.jsonl"  # a labels line of an older `label` (no schema_version)
    old.write_text(json.dumps({"trajectory_id": "a", "failure_class": "F2", "signals": []}) + "\n")
    no_id = tmp_path / "no_id.jsonl"
    no_id.write_text(json.dumps({"failure_class": "F2", "schema_version": 1}) + "\n")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"trajectory_id": "a", "failure_class": "F2", "schema_version": 2}) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    not_label = "not a label (written by `evoharness label`)"
    for argv, said in [
        ([runs, "--human", human], f"{runs}:record 0: {not_label}: no schema_version (keys: task_id, reward, info, "
                                   "traj)"),
        ([labels, "--human", runs], f"{runs}:record 0: needs a trajectory_id (or id) and a failure_class (or "
                                    "class) (keys: task_id, reward, info, traj)"),
        ([old, "--human", human], f"{old}:line 1: has no schema_version (written by an older `evoharness label`): "
                                  "run it again"),
        ([no_id, "--human", human], f"{no_id}:line 1: {not_label}: trajectory_id: Field required"),
        ([newer, "--human", human], f"{newer}:line 1: has schema_version 2, this evoharness reads 1: run "
                                    "`evoharness label` again"),
        ([empty, "--human", human], f"{empty}: no labels in it (write them with `evoharness label PATH... --out "
                                    "LABELS`)"),
        ([labels, "--human", empty], f"{empty}: no labels in it"),
    ]:
        assert main(["calibrate", *map(str, argv)]) == 2, said
        assert capsys.readouterr().err.splitlines() == [f"error: {said}"]
