"""The labels a run keeps beside its trajectory store (``labels.jsonl`` beside ``trajectories.jsonl``): an export of
the file reuses them under `--labels`' checks (the line's digest, the labeller's fingerprint), labels a run whose
label is missing, stale or not its line's, and never stops on that file. Until the nineteenth session a run kept no
labels and `dataset export -t RUN/trajectories.jsonl` labelled every failed run again."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from evoharness.cli import app
from evoharness.datasets.export import JsonlSource, export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.models import LabelLine
from evoharness.traces.importers import load_paths
from evoharness.traces.store import TrajectoryStore

from .helpers import offline_hf  # noqa: F401 (the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")


def _run_store(shared_data, where, cfg=None) -> TrajectoryStore:
    """The vendored tau-bench runs (6 failed) stored as a run stores them: two batches, labels beside."""
    trajs = list(load_paths([shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"]))
    labeller = Labeller(cfg)
    store = TrajectoryStore(where / "trajectories.jsonl")
    for batch in (trajs[:5], trajs[5:]):
        store.add(batch, labels=lambda t, digest: LabelLine.of(
            labeller.label(t), trajectory_sha256=digest, labeller_fingerprint=labeller.fingerprint).model_dump_json())
    return store


def _export(store, out, **kw):
    s = export_dataset(out, source=SourceKind.all, trajectories=JsonlSource(store.path), **kw)
    return s, (out / "data.jsonl").read_bytes(), (out / "metadata.jsonl").read_bytes()


@pytest.fixture
def cold(shared_data, tmp_path):
    """The export of the same runs with no labels beside them: (summary, data, metadata)."""
    store = _run_store(shared_data, tmp_path / "cold-run")
    store.labels_path.unlink()
    return _export(store, tmp_path / "cold")


def test_the_runs_labels_are_reused_and_the_export_is_the_cold_ones_bytes(shared_data, tmp_path, labelled, cold):
    store = _run_store(shared_data, tmp_path / "run")
    labelled.clear()
    warm = _export(store, tmp_path / "warm")
    assert labelled == []  # no failed run labelled again
    assert (warm[0].labels_reused, warm[0].labels_relabelled) == (6, {})
    assert cold[0].labels_reused == 0 and warm[1:] == cold[1:]


def test_a_run_without_some_labels_an_edited_line_and_a_stale_file_are_labelled(shared_data, tmp_path, labelled,
                                                                                 cold):
    store = _run_store(shared_data, tmp_path / "run")
    lines = store.labels_path.read_bytes().splitlines(keepends=True)
    failed = [i for i, raw in enumerate(lines) if json.loads(raw)["failure_class"] != "healthy"]
    # a crash lost the labels of two failed runs; a line that is no label lies between the others
    kept = [raw for i, raw in enumerate(lines) if i not in failed[:2]]
    kept.insert(3, b'{"not": "a label"}\n')
    store.labels_path.write_bytes(b"".join(kept))
    labelled.clear()
    s, data, meta = _export(store, tmp_path / "gaps")
    assert len(labelled) == 2 and (s.labels_reused, s.labels_relabelled) == (4, {"no_label": 2})
    assert (data, meta) == cold[1:]

    # a failed run edited under its id (its score written as it was): that line's label is not its line's
    traj_lines = store.path.read_bytes().splitlines(keepends=True)
    edited = json.loads(traj_lines[failed[0]])
    traj_lines[failed[0]] = json.dumps(edited).encode() + b"\n"  # the same trajectory, other bytes
    store.path.write_bytes(b"".join(traj_lines))
    store.labels_path.write_bytes(b"".join(lines))
    s, data, _ = _export(store, tmp_path / "edited")
    assert (s.labels_reused, s.labels_relabelled) == (5, {"trajectory_changed": 1})

    # other diagnosis settings: every label is another labeller's
    other = DiagnosisConfig(healthy_threshold=0.999)
    s, *_ = _export(store, tmp_path / "other", diagnosis_cfg=other)
    assert s.labels_reused == 0 and s.labels_relabelled == {"other_labeller": 6}


def test_labels_beside_another_file_name_or_under_labels_are_not_read(shared_data, tmp_path, labelled):
    store = _run_store(shared_data, tmp_path / "run")
    renamed = tmp_path / "run" / "mine.jsonl"  # labels.jsonl beside a file of another name is not its labels
    shutil.copy(store.path, renamed)
    s = export_dataset(tmp_path / "renamed", source=SourceKind.all, trajectories=JsonlSource(renamed))
    assert (s.labels_reused, len(labelled)) == (0, 6)


def test_the_export_command_says_how_many_of_the_runs_labels_it_reused(shared_data, tmp_path, monkeypatch):
    store = _run_store(shared_data, tmp_path / "run")
    monkeypatch.setenv("EVOHARNESS_HOME", str(tmp_path / "home"))
    done = CliRunner().invoke(app, ["dataset", "export", "-t", str(store.path), "--source", "all", "--out",
                                    str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert f"6 labels reused from {store.labels_path}" in done.output
    # --labels names the file to read: the one beside is not
    mine = tmp_path / "mine.jsonl"
    shutil.copy(store.labels_path, mine)
    lines = mine.read_bytes().splitlines(keepends=True)
    mine.write_bytes(b"".join(lines[:-1]))
    done = CliRunner().invoke(app, ["dataset", "export", "-t", str(store.path), "--source", "all", "--labels",
                                    str(mine), "--out", str(tmp_path / "out2")])
    assert done.exit_code != 0 and "ends at line 11" in str(done.exception or done.output)


def _home_with_run(shared_data, tmp_path, monkeypatch) -> tuple:
    """(home, store): the run ``run-abc`` (``_run_store``, with settings.json) under a home's runs, the home set and
    a fresh working directory entered, as a user who names the run by id has them."""
    home = tmp_path / "home"
    store = _run_store(shared_data, home / "runs" / "run-abc")
    (store.path.parent / "settings.json").write_text("{}")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("EVOHARNESS_HOME", str(home))
    return home, store


def test_a_run_id_or_its_directory_as_trajectories_exports_the_runs_file(shared_data, tmp_path, monkeypatch, capsys):
    """`dataset export -t RUN_ID` said 'RUN_ID: trajectory file not found' and `-t RUN_DIR` 'is a directory, not a
    trajectory file', though `diagnose`, `label` and `report` take either: both now read the run's trajectories.jsonl
    (and reuse the labels beside it); an id that is no run is one error line naming the home's runs."""
    from evoharness.cli import main
    from evoharness.errors import InputError
    from evoharness.run_dirs import run_or_path

    home, store = _home_with_run(shared_data, tmp_path, monkeypatch)
    written = {}
    for name, given in (("file", str(store.path)), ("id", "run-abc"), ("dir", str(store.path.parent))):
        assert main(["dataset", "export", "-t", given, "--source", "all", "--out", name]) == 0, capsys.readouterr()
        assert f"6 labels reused from {store.labels_path}" in capsys.readouterr().out
        written[name] = (tmp_path / "cwd" / name / "data.jsonl").read_bytes()
    assert written["id"] == written["dir"] == written["file"] and written["file"].count(b"\n") == 12
    assert main(["dataset", "export", "-t", "run-nope", "--source", "all", "--out", "nope"]) == 2
    with pytest.raises(InputError) as said:  # the line diagnose gives (its wording: tests/test_run_dirs.py)
        run_or_path(home, "run-nope")
    assert capsys.readouterr().err.splitlines() == [f"error: {said.value}"]
    assert "run-abc" in str(said.value) and str(home / "runs") in str(said.value)
    assert not (tmp_path / "cwd" / "nope").exists()


def test_the_python_api_reads_a_run_directory_as_the_cli_does(shared_data, tmp_path):
    """``JsonlSource(RUN_DIR)`` said 'is a directory, not a trajectory file' after `dataset export -t RUN_DIR` read the
    run's trajectories.jsonl (2026-12-07, the review helper): both go through ``run_dirs.trajectory_file`` now, the
    labels beside it offered as for the file; a directory that holds no run is refused as before."""
    from evoharness.errors import InputError

    store = _run_store(shared_data, tmp_path / "run-abc")
    (store.path.parent / "settings.json").write_text("{}")
    source = JsonlSource(store.path.parent)
    assert source.path == store.path and source.labels_beside == store.labels_path
    assert [t.id for t in source] == [t.id for t in JsonlSource(store.path)]
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="is a directory, not a trajectory file"):
        JsonlSource(tmp_path / "plain")


def test_a_run_id_or_its_directory_enqueues_the_runs_file_under_its_id(shared_data, tmp_path, monkeypatch, capsys):
    """`dataset enqueue RUN_ID` said 'RUN_ID: trajectory file not found' though `dataset export -t` takes a run id (or
    its directory): both now queue the run's trajectories.jsonl, under the run's id unless --run-id names another; an
    id that is no run is one error line naming the home's runs, and creates no queue. A directory that holds a
    trajectories.jsonl but no run (`import --out DIR`) is read, under no run id."""
    from evoharness.cli import main

    home, store = _home_with_run(shared_data, tmp_path, monkeypatch)
    assert main(["dataset", "enqueue", "run-nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: run-nope: ") and "run-abc" in err[0], err
    assert not (home / "queue.db").exists()
    imported = tmp_path / "imported"  # what `import --out DIR` writes: read as a run's file, but no run
    imported.mkdir()
    shutil.copy(store.path, imported / "trajectories.jsonl")
    queued = {}
    for name, given, run in (("id", "run-abc", []), ("dir", str(store.path.parent), []),
                             ("file", str(store.path), ["--run-id", "run-abc"]),
                             ("other", "run-abc", ["--run-id", "x"]), ("imported", str(imported), [])):
        url = f"sqlite:///{tmp_path / name}.db"
        assert main(["dataset", "enqueue", given, "--url", url, *run]) == 0, capsys.readouterr()
        assert capsys.readouterr().out.startswith("12 trajectories, 6 content failures, 6 newly queued")
        assert main(["dataset", "status", "--json", "--url", url]) == 0
        queued[name] = json.loads(capsys.readouterr().out)
    assert queued["id"] == queued["dir"] == queued["file"] and queued["id"]["total"] == 6
    assert queued["id"]["by_run"] == {"run-abc": queued["id"]["total"]}
    assert queued["other"]["by_run"] == {"x": queued["id"]["total"]}
    assert queued["imported"]["total"] == 6 and queued["imported"]["by_run"] == {"-": 6}
