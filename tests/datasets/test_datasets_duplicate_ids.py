"""A trajectory id given twice is one row of the dataset: the first trajectory of that id.

`import` writes two runs of the same id (two results files of one name) and warns; the queue and the service's
ingest store already keep the first of an id. An export wrote both, two rows of one id in a training set.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from evoharness.cli import main
from evoharness.config import Settings
from evoharness.datasets.export import JsonlSource, export_dataset, read_manifest
from evoharness.datasets.models import SourceKind
from evoharness.service.app import create_app
from evoharness.traces.store import write_trajectories
from tests.service.helpers import trajectory

from .helpers import make_traj, read_jsonl


def _file(tmp_path, trajs):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, trajs)
    return path


def test_the_cli_export_writes_the_first_trajectory_of_an_id_and_says_so(tmp_path, capsys):
    path = _file(tmp_path, [make_traj("a", final="first run of a"), make_traj("b"),
                            make_traj("a", final="second run of a"), make_traj("a", final="third run of a")])
    out = tmp_path / "out"
    assert main(["dataset", "export", "-t", str(path), "--source", "all", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    meta = read_jsonl(out / "metadata.jsonl")
    assert [m["id"] for m in meta] == ["a", "b"]
    assert read_jsonl(out / "data.jsonl")[0]["messages"][-1]["content"] == "first run of a"
    assert "wrote 2 records" in printed.out and "2 skipped" in printed.out
    assert "warning: 2 trajectories" in printed.err and "only the first of each id was exported" in printed.err
    assert read_manifest(out).skipped == {"duplicate_id": 2}
    assert "duplicate_id" in (out / "README.md").read_text()


def test_the_first_trajectory_of_an_id_decides_whatever_the_source(tmp_path):
    """Healthy export or all: the later run of an id is never the one exported, so the healthy set is a subset
    of the full one (a failed first run and a healthy rerun of one id: the id is not in the healthy set)."""
    path = _file(tmp_path, [make_traj("a", score=0.0), make_traj("a", score=1.0), make_traj("b", score=1.0)])
    healthy = export_dataset(tmp_path / "h", source=SourceKind.healthy, trajectories=JsonlSource(path))
    assert [m["id"] for m in read_jsonl(tmp_path / "h" / "metadata.jsonl")] == ["b"]
    assert healthy.skipped == {"duplicate_id": 1}
    every = export_dataset(tmp_path / "all", source=SourceKind.all, trajectories=JsonlSource(path))
    assert [(m["id"], m["score"]) for m in read_jsonl(tmp_path / "all" / "metadata.jsonl")] == [("a", 0.0),
                                                                                              ("b", 1.0)]
    assert every.records == 2


def test_labels_of_a_file_with_an_id_twice_still_line_up(tmp_path, capsys):
    """`label` writes a line per trajectory, the duplicate's too: the export reads it in step and skips it."""
    path = _file(tmp_path, [make_traj("a", score=0.2), make_traj("a", score=0.3), make_traj("b", score=0.2)])
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(path), "--out", str(labels)]) == 0
    assert main(["dataset", "export", "-t", str(path), "--source", "all", "--labels", str(labels),
                 "--out", str(tmp_path / "o")]) == 0
    assert "2 labels reused" in capsys.readouterr().out
    assert [(m["id"], m["score"]) for m in read_jsonl(tmp_path / "o" / "metadata.jsonl")] == [("a", 0.2),
                                                                                             ("b", 0.2)]


def test_the_service_export_of_a_batch_with_an_id_twice_has_one_row_of_it(tmp_path):
    """POST /trajectories keeps the first of an id (the ingest store's UNIQUE id), so POST /datasets/export
    writes one row of it, the first posted."""
    token = "s3cret-token-0123456789"
    auth = {"Authorization": f"Bearer {token}"}
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    first, again = trajectory("e1", "healthy", task="t1"), trajectory("e1", "healthy", task="t2")
    with TestClient(create_app(settings, token, quiet=True)) as c:
        assert c.post("/trajectories", json=[first, trajectory("e2", "healthy"), again],
                      headers=auth).status_code == 200
        r = c.post("/datasets/export", json={"source": "all", "render_under": "trajectory", "name": "x"},
                   headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["records"] == 2
    meta = read_jsonl(tmp_path / "home" / "exports" / "x" / "metadata.jsonl")
    assert [(m["id"], m["task_id"]) for m in meta] == [("e1", "t1"), ("e2", "task-1")]


def test_the_export_summary_counts_each_reason_a_trajectory_was_skipped_for(tmp_path, capsys):
    """It said '5 skipped' and no more (the reasons were in manifest.json only); now the reasons, most first, three
    at most, an odd one (a role of the trace's own) escaped on the terminal."""
    odd = make_traj("d", task="t3")
    odd.messages[1]["role"] = "robot\x1b[31m"
    trajs = [make_traj("a", score=1.0), make_traj("a"), make_traj("a"), make_traj("b", task="t2", score=0.0), odd,
             make_traj("c", task="t1"), make_traj("e", task="t1")]
    out = tmp_path / "out"
    argv = ["dataset", "export", "-t", str(_file(tmp_path, trajs)), "--source", "all", "--out", str(out)]
    assert main([*argv, "--min-score", "0.5", "--max-per-task", "2"]) == 0
    line = capsys.readouterr().out.splitlines()[0]  # the wrote line (the token lengths follow it)
    assert read_manifest(out).skipped == {"below_min_score": 1, "duplicate_id": 2, "over_max_per_task": 1,
                                          "unknown_role_robot\x1b[31m": 1}
    assert line.endswith("; 0 held-out excluded, 5 skipped (2 duplicate id, 1 below min score, 1 over max per task, "
                         "1 more reason in manifest.json)"), line
    assert main([*argv[:-2], "--out", str(tmp_path / "two"), "--task", "t3"]) == 0
    line = capsys.readouterr().out.splitlines()[0]  # the wrote line (the token lengths follow it)
    assert line.endswith("0 held-out excluded, 3 skipped (2 duplicate id, 1 unknown role robot\\x1b[31m)"), line
