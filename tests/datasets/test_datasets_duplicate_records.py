"""A record identical to an earlier one of the export (the same run imported twice under another name, two runs that
went alike) is skipped as `duplicate_record` and counted in the card, manifest and CLI line; `--keep-duplicates`
writes it and still counts it. Until the seventeenth session both were written, and nothing said so."""

from __future__ import annotations

from evoharness.cli import main
from evoharness.datasets.export import export_dataset, read_manifest
from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind
from evoharness.traces.store import write_trajectories

from .helpers import make_traj, read_jsonl


def _twice() -> list:
    """Three runs of task-a and one of task-b; run r1 imported again under another name (id r1-again)."""
    r1 = make_traj("r1", "task-a")
    return [r1, make_traj("r2", "task-a"), r1.model_copy(update={"id": "r1-again"}), make_traj("r3", "task-b")]


def test_an_identical_record_is_written_once_and_counted(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_twice())
    assert s.records == 3 and s.skipped == {"duplicate_record": 1} and s.duplicate_records == 1
    assert [m["id"] for m in read_jsonl(tmp_path / "metadata.jsonl")] == ["r1", "r2", "r3"]  # the first one
    rows = read_jsonl(tmp_path / "data.jsonl")
    assert len({str(r) for r in rows}) == 3
    card = (tmp_path / "README.md").read_text()
    assert ("- **Duplicates:** 1 records are identical to an earlier one (messages and tools, system message "
            "included); dropped (`--keep-duplicates` keeps them)") in card
    m = read_manifest(tmp_path)
    assert m.duplicate_records == 1 and m.duplicates_kept is False


def test_keep_duplicates_writes_them_and_still_counts_them(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_twice(), keep_duplicates=True)
    assert s.records == 4 and s.skipped == {} and s.duplicate_records == 1 and s.duplicates_kept
    rows = read_jsonl(tmp_path / "data.jsonl")
    assert rows[2] == rows[0]
    assert "1 records are identical to an earlier one (messages and tools, system message included); kept" in (
        tmp_path / "README.md").read_text()


def test_a_record_that_differs_only_in_its_system_message_is_not_a_duplicate(tmp_path):
    r1 = make_traj("r1", "task-a")
    other = make_traj("r1", "task-a", system="You are another agent.").model_copy(update={"id": "r1-b"})
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=[r1, other])
    assert s.records == 2 and s.duplicate_records == 0
    assert "- **Duplicates:** none (no record is identical to an earlier one)" in (tmp_path / "README.md").read_text()


def test_a_duplicate_takes_no_place_of_a_task_cap_nor_of_the_placebo(tmp_path):
    r1, r2, again, r3 = _twice()
    capped = export_dataset(tmp_path / "cap", source=SourceKind.all, trajectories=[r1, again, r2, r3],
                            filters=ExportFilters(max_per_task=2))  # the copy comes before r2 of the same task
    assert [m["id"] for m in read_jsonl(tmp_path / "cap" / "metadata.jsonl")] == ["r1", "r2", "r3"]
    assert capped.skipped == {"duplicate_record": 1}
    placebo = export_dataset(tmp_path / "p", source=SourceKind.all, trajectories=_twice(), placebo=True)
    assert placebo.records == 3 and placebo.duplicate_records == 1  # the control set has the real set's records


def test_the_cli_says_how_many_it_skipped_or_kept(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, _twice())
    assert main(["dataset", "export", "-t", str(src), "--source", "all", "--out", str(tmp_path / "a")]) == 0
    assert "; 0 held-out excluded, 1 skipped (1 duplicate record)" in capsys.readouterr().out
    assert main(["dataset", "export", "-t", str(src), "--source", "all", "--out", str(tmp_path / "b"),
                 "--keep-duplicates", "--format", "sharegpt"]) == 0
    assert "wrote 4 records (sharegpt)" in (out := capsys.readouterr().out) and "1 duplicate record kept" in out
    assert read_manifest(tmp_path / "b").format == ExportFormat.sharegpt


def test_records_written_apart_are_not_duplicates_a_nan_and_a_null_in_a_tool_schema(tmp_path):
    """Identical means the record as written. A tool declaration holding a NaN is written as to_json writes it
    (``NaN``) and one holding null as ``null``; the duplicate check serialised the record by orjson, which writes both
    as ``null``, so the second run was dropped as a copy of the first though their lines differ. The check now hashes
    the line the writer writes (made once, for both), so both are written."""
    import math

    runs = []
    for tid, default in (("nan", math.nan), ("null", None)):
        t = make_traj("r", "task-a")
        t.meta["tools"][0]["function"]["parameters"]["properties"]["n"]["default"] = default
        runs.append(t.model_copy(update={"id": tid}))
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=runs)
    assert (s.records, s.duplicate_records) == (2, 0)
    lines = (tmp_path / "data.jsonl").read_bytes().splitlines()
    assert b'"default":NaN' in lines[0] and b'"default":null' in lines[1]
