"""`dataset export --labels` reuses a label only when it provably belongs to the trajectory line and to the export's
labeller: ``evoharness label`` writes the SHA-256 of the line each trajectory was read from and the rule labeller's
fingerprint (its code and diagnosis settings); any other label's trajectory is labelled again, counted by reason.
Until the seventeenth session a label was taken as given whenever its trajectory id lined up: a trajectory edited
under its id, or labels made under other settings (a failed run labelled Healthy), kept the old class."""

from __future__ import annotations

import hashlib
import json

import pytest

from evoharness.cli import main
from evoharness.datasets.export import JsonlSource, export_dataset, read_manifest, reusable
from evoharness.datasets.models import SourceKind
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import LabelHead
from evoharness.traces.store import keeping_lines, line_digest, read_trajectories, write_trajectories

from .helpers import make_traj, offline_hf, read_jsonl  # noqa: F401 (offline_hf: the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")


def _file(tmp_path, trajs=None):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs or [make_traj(f"x{i}", task=f"t{i % 3}", score=1.0 if i % 2 else 0.2)
                                      for i in range(6)])
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(src), "--out", str(labels)]) == 0
    return src, labels


def _export(tmp_path, name, src, *extra):
    """The directory of a successful ``dataset export --source all`` into ``tmp_path / name``."""
    assert main(["dataset", "export", "-o", str(tmp_path / name), "--source", "all", "-t", str(src), *extra]) == 0
    return tmp_path / name


def _same_dataset(a, b) -> bool:
    return all((a / f).read_bytes() == (b / f).read_bytes() for f in ("data.jsonl", "metadata.jsonl"))


def test_label_writes_each_lines_digest_and_the_labellers_fingerprint(tmp_path):
    src, labels = _file(tmp_path)
    lines = [ln for ln in src.read_bytes().split(b"\n") if ln]
    rows = read_jsonl(labels)
    assert [r["trajectory_sha256"] for r in rows] == [hashlib.sha256(ln).hexdigest() for ln in lines]
    assert {r["labeller_fingerprint"] for r in rows} == {Labeller().fingerprint}
    assert Labeller().fingerprint.startswith("rules-sha256:")
    # the settings are part of it (their order is not); custom detectors have none
    assert Labeller(DiagnosisConfig(healthy_threshold=0.5)).fingerprint != Labeller().fingerprint
    routing = DiagnosisConfig(routing={"F1": "weights", "F4": "weights"}).model_dump()["routing"]
    reordered = DiagnosisConfig(routing=dict(reversed(list(routing.items()))))
    assert Labeller(reordered).fingerprint == Labeller(DiagnosisConfig(routing=routing)).fingerprint
    assert Labeller(detectors=[]).fingerprint is None


def test_fresh_labels_are_reused_and_the_export_is_the_same_bytes(tmp_path, capsys, labelled):
    src, labels = _file(tmp_path)
    cold = _export(tmp_path, "cold", src)
    assert sorted(labelled) == ["x0", "x2", "x4"]
    labelled.clear()
    warm = _export(tmp_path, "warm", src, "--labels", str(labels))
    assert labelled == []  # no failed run labelled again
    assert "3 labels reused" in capsys.readouterr().out
    assert _same_dataset(cold, warm)
    assert (cold / "README.md").read_text().split("- **Created:**")[0] == \
        (warm / "README.md").read_text().split("- **Created:**")[0]
    m = read_manifest(warm)
    assert (m.labels_reused, m.labels_relabelled) == (3, {})


def test_an_edited_trajectory_is_labelled_again_not_given_its_old_class(tmp_path, capsys, labelled):
    src, labels = _file(tmp_path)
    # x0's line edited under its id after labelling: it ran out of steps, no final answer (F3, not F4 poor delivery)
    lines = src.read_text().splitlines()
    first = json.loads(lines[0])
    first.update(final_answer=None, termination="step_budget")
    src.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    cold = _export(tmp_path, "cold", src)
    classes = {m["id"]: m["failure_class"] for m in read_jsonl(cold / "metadata.jsonl")}
    assert classes["x0"] == "F3" and json.loads(labels.read_text().splitlines()[0])["failure_class"] == "F4"
    capsys.readouterr()
    labelled.clear()
    warm = _export(tmp_path, "warm", src, "--labels", str(labels))
    assert labelled == ["x0"]
    assert "2 labels reused, 1 labelled again" in capsys.readouterr().out
    assert _same_dataset(cold, warm)  # before: x0 exported as F4 (its old label)
    assert read_manifest(warm).labels_relabelled == {"trajectory_changed": 1}


def test_labels_made_under_other_settings_are_not_taken(tmp_path, capsys, labelled):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj(f"x{i}", task=f"t{i % 3}", score=1.0 if i % 2 else 0.2) for i in range(6)])
    labels = tmp_path / "labels.jsonl"
    # a threshold of 0.1 calls the failed runs (score 0.2) Healthy
    assert main(["--set", "diagnosis.healthy_threshold=0.1", "label", str(src), "--out", str(labels)]) == 0
    assert {r["failure_class"] for r in read_jsonl(labels)} == {"healthy"}
    cold = _export(tmp_path, "cold", src)
    capsys.readouterr()
    warm = _export(tmp_path, "warm", src, "--labels", str(labels))
    assert "0 labels reused, 3 labelled again" in capsys.readouterr().out
    assert _same_dataset(cold, warm)  # before: the three failed runs exported as Healthy
    assert read_manifest(warm).labels_relabelled == {"other_labeller": 3}
    # nor does a healthy export take them: before, it wrote the failed runs as healthy training data
    assert main(["dataset", "export", "-o", str(tmp_path / "h"), "-t", str(src), "--labels", str(labels)]) == 0
    assert {m["id"] for m in read_jsonl(tmp_path / "h" / "metadata.jsonl")} == {"x1", "x3", "x5"}


def test_labels_without_a_fingerprint_or_digest_are_labelled_again(tmp_path, capsys):
    src, labels = _file(tmp_path)
    cold = _export(tmp_path, "cold", src)
    rows = read_jsonl(labels)
    cases = {"no_fingerprint": [{k: v for k, v in r.items() if k != "labeller_fingerprint"} for r in rows],
             "no_digest": [{**r, "trajectory_sha256": None} for r in rows]}
    for why, lines in cases.items():
        labels.write_text("".join(json.dumps(r) + "\n" for r in lines))
        capsys.readouterr()
        warm = _export(tmp_path, why, src, "--labels", str(labels))
        assert f"0 labels reused, 3 labelled again (their label was not provably this trajectory's and this " \
               f"labeller's: {why} 3)" in capsys.readouterr().out
        assert _same_dataset(cold, warm)
        assert read_manifest(warm).labels_relabelled == {why: 3}


def test_a_label_of_a_file_of_another_format_has_no_digest(tmp_path):
    trajs = [make_traj("x0", score=0.2), make_traj("x1", score=0.2)]
    listed = tmp_path / "t.json"  # a JSON list of canonical trajectories: no line per trajectory
    listed.write_text(json.dumps([t.model_dump(mode="json") for t in trajs]))
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(listed), "--out", str(labels)]) == 0
    assert [r["trajectory_sha256"] for r in read_jsonl(labels)] == [None, None]


def test_a_lines_digest_leaves_its_line_end_out(tmp_path, capsys, labelled):
    src, labels = _file(tmp_path)
    assert line_digest(b'{"a":1}\r\n') == line_digest(b'{"a":1}\n') == line_digest(b'{"a":1}') \
        == hashlib.sha256(b'{"a":1}').hexdigest()
    crlf = tmp_path / "crlf.jsonl"  # the same trajectories with Windows line ends and no last one
    crlf.write_bytes(src.read_bytes().rstrip(b"\n").replace(b"\n", b"\r\n"))
    _export(tmp_path, "o", crlf, "--labels", str(labels))
    assert "3 labels reused" in capsys.readouterr().out and labelled == []


def test_a_source_that_is_no_file_reuses_nothing(tmp_path, labelled):
    src, labels = _file(tmp_path)
    listed = list(JsonlSource(src))  # the same trajectories, but from no file line
    s = export_dataset(tmp_path / "o", source=SourceKind.all, trajectories=listed, labels=labels)
    assert (s.labels_reused, s.labels_relabelled) == (0, {"no_line": 3})
    assert sorted(labelled) == ["x0", "x2", "x4"]


def test_reusable_says_why_not_and_hashes_only_a_label_of_this_labeller(monkeypatch):
    line = b'{"id": "x"}\n'
    good = {"trajectory_id": "x", "failure_class": "F4", "trajectory_sha256": line_digest(line),
            "labeller_fingerprint": "rules-sha256:me"}
    table = [
        ({}, None),
        ({"labeller_fingerprint": None}, "no_fingerprint"),
        ({"labeller_fingerprint": "rules-sha256:other"}, "other_labeller"),
        ({"trajectory_sha256": None}, "no_digest"),
        ({"trajectory_sha256": line_digest(b'{"id": "y"}')}, "trajectory_changed"),
    ]
    for change, why in table:
        assert reusable(LabelHead.read({**good, **change}), "rules-sha256:me", line) == why, change
    assert reusable(LabelHead.read(good), "rules-sha256:me", None) == "no_line"
    assert reusable(LabelHead.read(good), None, line) == "other_labeller"  # an export labeller with none


def test_a_kept_line_is_only_its_own_trajectorys(tmp_path):
    src, _ = _file(tmp_path)
    lines = [ln + b"\n" for ln in src.read_bytes().split(b"\n") if ln]
    with keeping_lines() as kept:
        got = [(t, kept.line_of(t)) for t in read_trajectories(src)]
    assert [raw for _, raw in got] == lines
    assert kept.line_of(got[0][0]) is None  # not the last one read
    assert kept.line_of(got[-1][0].model_copy()) is None  # an equal trajectory, not that one
    outside = [kept.line_of(t) for t in read_trajectories(src)]  # read outside the block: no line kept
    assert outside == [None] * len(lines)
