"""A folder of many SWE-agent / mini-swe-agent / AgentRx runs is listed once, not once per run (a folder of N
runs took N listings of N entries: 1,000 SWE-agent ``.traj`` files 17 CPU-s), and a result file added to a
folder already listed is still found."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from evoharness.traces.importers import dirscan, load_paths

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
SWE = FIXTURES / "swe_agent" / "experiments" / "trajs" / "django__django-11477.traj"
MINI = FIXTURES / "mini_swe_v2" / "toolcall" / "django__django-11477" / "django__django-11477.traj.json"
TAU = FIXTURES / "agentrx_tau"
N = 12


def _settle(*folders: Path) -> None:
    """Date the folders an hour back: a listing is remembered only for a folder unchanged for a while."""
    old = os.stat(folders[0]).st_mtime_ns - 3600 * 10**9
    for d in folders:
        os.utime(d, ns=(old, old))


@pytest.fixture
def listings(monkeypatch):
    """How many times each folder was listed (``os.scandir``, which ``Path.glob`` uses too)."""
    seen: dict[str, int] = {}
    real = os.scandir

    def counting(path="."):
        key = os.path.realpath(os.fspath(path))
        seen[key] = seen.get(key, 0) + 1
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    monkeypatch.setattr(dirscan, "_cache", type(dirscan._cache)())
    return seen


def _swe_folder(tmp_path: Path) -> tuple[Path, list[str]]:
    trajs = tmp_path / "exp" / "trajs"
    trajs.mkdir(parents=True)
    ids = [f"proj__proj-{i}" for i in range(N)]
    for i in ids:
        shutil.copyfile(SWE, trajs / f"{i}.traj")
    (tmp_path / "exp" / "results").mkdir()
    (tmp_path / "exp" / "results" / "results.json").write_text(
        json.dumps({"generated": ids, "applied": ids, "resolved": ids[::2]}))
    _settle(trajs, trajs.parent, trajs.parent / "results")
    return trajs, ids


def test_a_folder_of_swe_agent_runs_is_listed_once_and_every_run_scored(tmp_path, listings):
    trajs, ids = _swe_folder(tmp_path)
    scores = {t.task_id: t.score for t in load_paths([trajs])}
    assert scores == {i: (1.0 if k % 2 == 0 else 0.0) for k, i in enumerate(ids)}
    # twice by the directory walk (rglob), once for the results beside the runs (was once per run: N + 2)
    assert listings[str(trajs.resolve())] <= 3
    assert listings[str((trajs.parent / "results").resolve())] == 1


def test_a_folder_of_mini_swe_agent_runs_is_listed_once(tmp_path, listings):
    root = tmp_path / "runs"
    data = json.loads(MINI.read_text())
    ids = [f"proj__proj-{i}" for i in range(N)]
    for i in ids:
        (root / i).mkdir(parents=True)
        (root / i / f"{i}.traj.json").write_text(json.dumps({**data, "instance_id": i}))
    (root / "sb-cli-reports").mkdir()
    (root / "sb-cli-reports" / "verified__test__r1.json").write_text(
        json.dumps({"total_instances": N, "resolved_ids": ids[:3], "unresolved_ids": ids[3:]}))
    _settle(root, root / "sb-cli-reports", *(root / i for i in ids))
    scores = {t.task_id: t.score for t in load_paths([root])}
    assert scores == {i: (1.0 if k < 3 else 0.0) for k, i in enumerate(ids)}
    assert listings[str(root.resolve())] <= 3  # the walk twice, the results once (was N + 2)


def test_a_folder_of_agentrx_tau_runs_is_listed_once_with_labels_joined(tmp_path, listings):
    data = tmp_path / "data"
    (data / "tau_dataset").mkdir(parents=True)
    record = json.loads((TAU / "tau_dataset" / "2.json").read_text())
    truth = json.loads((TAU / "ground_truth" / "tau_ground_truth.json").read_text())
    for i in range(N):
        (data / "tau_dataset" / f"{i}.json").write_text(json.dumps({**record, "task_id": i}))
    shutil.copytree(TAU / "ground_truth", data / "ground_truth")
    (data / "ground_truth" / "tau_ground_truth.json").write_text(
        json.dumps([{**truth[0], "trajectory_id": str(i)} for i in range(0, N, 3)]))
    _settle(data / "tau_dataset", data, data / "ground_truth")
    labelled = {t.task_id: "human_failures" in t.meta for t in load_paths([data / "tau_dataset"])}
    assert labelled == {str(i): i % 3 == 0 for i in range(N)}
    assert listings[str((data / "tau_dataset").resolve())] <= 3  # the walk twice, labels once (was N + 2)


def test_a_result_file_added_to_a_folder_already_listed_is_found(tmp_path, listings):
    trajs, ids = _swe_folder(tmp_path)
    (trajs.parent / "results" / "results.json").unlink()
    _settle(trajs.parent / "results")
    assert {t.score for t in load_paths([trajs])} == {None}  # remembered: no results there
    (trajs.parent / "results" / "other.json").write_text(
        json.dumps({"resolved_ids": ids, "unresolved_ids": []}))  # the folder changes: listed again
    assert {t.score for t in load_paths([trajs])} == {1.0}


def test_a_folder_changed_just_now_is_not_remembered(tmp_path, listings):
    d = tmp_path / "fresh"
    d.mkdir()
    (d / "a_ground_truth.json").write_text("[]")
    assert [p.name for p in dirscan.matching(d, _gt)] == ["a_ground_truth.json"]
    assert [p.name for p in dirscan.matching(d, _gt)] == ["a_ground_truth.json"]
    assert listings[str(d.resolve())] == 2  # unsettled: listed each time
    assert dirscan.matching(tmp_path / "missing", _gt) == [] and dirscan.matching(d / "a_ground_truth.json", _gt) == []


def _gt_name(name: str) -> bool:
    return name.endswith("ground_truth.json")


_gt = dirscan.Keep(_gt_name)


def test_a_listing_evicted_by_another_thread_mid_look_up_is_no_error(tmp_path, monkeypatch):
    """The service imports in threads (run_in_threadpool): a thread whose remembered listing another thread
    evicted between the look-up and its move to the end raised KeyError (one request's import failed with a
    traceback). Here the other thread runs exactly there, and gets the cache only after this one is done."""
    import threading

    folders = [tmp_path / f"d{i}" for i in range(3)]
    for d in folders:
        d.mkdir()
        (d / "x_ground_truth.json").write_text("[]")
    _settle(*folders)
    monkeypatch.setattr(dirscan, "MAX_DIRS", 1)
    other_done = threading.Event()

    class Interleaved(type(dirscan._cache)):
        def move_to_end(self, key, last=True):
            if key[0] == str(folders[0]) and not other_done.is_set():  # this thread's hit on folders[0]
                other = threading.Thread(target=lambda: [dirscan.matching(d, _gt) for d in folders[1:]]
                                         + [other_done.set()])
                other.start()
                other.join(timeout=0.5)  # unguarded, it evicts folders[0] now; guarded, it waits for this thread
            super().move_to_end(key, last)

    monkeypatch.setattr(dirscan, "_cache", Interleaved())
    assert [p.name for p in dirscan.matching(folders[0], _gt)] == ["x_ground_truth.json"]  # listed, remembered
    assert [p.name for p in dirscan.matching(folders[0], _gt)] == ["x_ground_truth.json"]  # the hit
    assert other_done.wait(5)


def test_the_directory_walk_keeps_rglobs_order(tmp_path):
    """iter_files walks folder by folder (memory: one folder's names) in sorted(rglob)'s order."""
    from evoharness.traces.importers import _walk

    for rel in ("a/x.json", "a.json", "a/b/c.json", "a-b/y.json", "B.json", ".h/z.json", "a/.k.json", "d/e/f/g.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "a", target_is_directory=True)
    assert list(_walk(tmp_path)) == sorted(tmp_path.rglob("*"))


def _mini_run(tmp_path: Path) -> tuple[Path, Path]:
    """A mini-swe-agent run in out/ and an aggregate report beside out/, still empty (the harness opened it)."""
    f = tmp_path / "out" / "a__a-1" / "a__a-1.traj.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({**json.loads(MINI.read_text()), "instance_id": "a__a-1"}))
    report = tmp_path / "m.run1.json"
    report.write_text("")
    return f, report


def _write_in_place(f: Path, resolved: bool) -> None:
    with f.open("r+b") as fh:  # same file, same name: the folder's mtime does not change
        fh.truncate(0)
        fh.write(json.dumps({"total_instances": 1, "resolved_ids": ["a__a-1"] if resolved else [],
                             "unresolved_ids": [] if resolved else ["a__a-1"]}).encode())


def test_a_result_file_rewritten_in_place_is_seen_by_the_same_process(tmp_path, listings):
    """A long-lived process (the service, a run loop) listed the folder while the report was empty and kept that
    listing while the folder's mtime stayed the same: the report, written in place later, was never seen."""
    f, report = _mini_run(tmp_path)
    _settle(tmp_path, tmp_path / "out", f.parent)
    assert [t.score for t in load_paths([f])] == [None]
    stamp = os.stat(tmp_path).st_mtime_ns
    _write_in_place(report, resolved=True)
    assert os.stat(tmp_path).st_mtime_ns == stamp
    assert [t.score for t in load_paths([f])] == [1.0]
    assert listings[str(tmp_path.resolve())] == 1  # not listed again: the one file's stamp was looked at


def test_a_rewrite_within_the_same_mtime_tick_and_of_the_same_size_is_seen(tmp_path, listings):
    """(inode, mtime, size) cannot tell such a rewrite: a file changed within SETTLED_NS is judged afresh."""
    f, report = _mini_run(tmp_path)
    _write_in_place(report, resolved=True)
    _settle(tmp_path, tmp_path / "out", f.parent)
    assert [t.score for t in load_paths([f])] == [1.0]
    st = os.stat(report)
    _write_in_place(report, resolved=False)  # same length
    os.utime(report, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(report).st_size, os.stat(report).st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert [t.score for t in load_paths([f])] == [0.0]


def _many_candidates(tmp_path: Path, monkeypatch, report_text: str) -> tuple[Path, Path, list[int]]:
    """A run whose folder holds more *.json files than MAX_WATCHED (settled ones), and a clock to move."""
    f, report = _mini_run(tmp_path)
    report.write_text(report_text)
    others = [tmp_path / f"other{i}.json" for i in range(3)]
    for p in others:
        p.write_text("{}")
    for p in (report, *others):  # settled: only an empty file is watched in such a folder
        if p.stat().st_size:
            os.utime(p, ns=(p.stat().st_mtime_ns - 3600 * 10**9,) * 2)
    _settle(tmp_path, tmp_path / "out", f.parent)
    monkeypatch.setattr(dirscan, "MAX_WATCHED", 2)
    clock = [time.time_ns()]
    monkeypatch.setattr(dirscan, "time", type("Clock", (), {"time_ns": staticmethod(lambda: clock[0])}))
    return f, report, clock


def test_a_folder_of_many_candidates_is_listed_again_once_its_listing_is_old(tmp_path, listings, monkeypatch):
    """Over MAX_WATCHED files to re-check, a stat of each per look-up would be N x N again: such a listing
    expires after REFRESH_NS instead, and a settled file with content rewritten in place waits for that."""
    f, report, clock = _many_candidates(tmp_path, monkeypatch, '{"note": "not results yet"}')
    assert [t.score for t in load_paths([f])] == [None]
    _write_in_place(report, resolved=True)
    assert [t.score for t in load_paths([f])] == [None]  # within REFRESH_NS: the listing as it was
    clock[0] += dirscan.REFRESH_NS + 1
    assert [t.score for t in load_paths([f])] == [1.0]
    assert listings[str(tmp_path.resolve())] == 2


def test_in_a_folder_of_many_candidates_an_empty_report_written_later_is_seen_at_once(tmp_path, listings,
                                                                                      monkeypatch):
    """The harness opens its report empty and writes it at the end: in a folder of more than MAX_WATCHED *.json
    files that write was seen only once the listing was REFRESH_NS (10 s) old; the empty file is watched now."""
    f, report, clock = _many_candidates(tmp_path, monkeypatch, "")
    assert [t.score for t in load_paths([f])] == [None]
    _write_in_place(report, resolved=True)
    assert [t.score for t in load_paths([f])] == [1.0]
    assert listings[str(tmp_path.resolve())] == 1  # the listing kept: one stat of the watched file


def test_a_file_rewritten_while_it_is_being_judged_is_judged_again(tmp_path):
    """The stamp is taken before the content is read: a write landing between the two (here: inside the check)
    leaves a stamp that no longer matches, so the next look-up judges the file again."""
    d = tmp_path / "d"
    d.mkdir()
    f = d / "r.json"
    f.write_text("{}")
    old = f.stat().st_mtime_ns - 3600 * 10**9
    os.utime(f, ns=(old, old))
    _settle(d)
    calls = []

    def content(p: Path) -> bool:
        calls.append(p.read_text())
        if len(calls) == 1:  # another process rewrites it right after this read, its mtime an hour back
            p.write_text('{"resolved_ids": []}')
            os.utime(p, ns=(old, old))
            return False
        return "resolved_ids" in p.read_text()

    keep = dirscan.Keep(lambda name: name.endswith(".json"), content)
    assert dirscan.matching(d, keep) == []
    assert dirscan.matching(d, keep) == [f]
