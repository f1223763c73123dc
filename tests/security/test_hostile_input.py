"""Importers and detectors on hostile input: FIFOs, devices, huge integers, the quadratic id-token case."""

from __future__ import annotations

import os
import time

import pytest

from evoharness.cli import main
from evoharness.diagnosis.detectors import claim_tokens


def test_claim_tokens_are_linear_time():
    start = time.monotonic()
    for hostile in ("a-" * 60_000, "1-" * 60_000, "a1" * 60_000 + "\u00e9", "-" * 120_000 + "1"):  # 120 KB each
        claim_tokens(hostile)
    assert time.monotonic() - start < 2  # the old backtracking regex took minutes on the first


def test_a_120kb_final_answer_labels_quickly():
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.traces.models import Trajectory

    answer = "a-" * 60_000
    traj = Trajectory(id="t", task_id="x", messages=[{"role": "user", "content": "q"},
                                                     {"role": "assistant", "content": answer}],
                      final_answer=answer, termination="delivered", score=0.0)
    start = time.monotonic()
    Labeller().label(traj)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "big_int", "deep"])
def test_diagnose_refuses_with_one_error_line(tmp_path, capsys, kind):
    if kind == "fifo":
        path = tmp_path / "t.json"
        os.mkfifo(path)
    elif kind == "dev_zero":
        path = "/dev/zero"
    elif kind == "big_int":
        path = tmp_path / "t.json"
        path.write_text("1" * 5000)
    else:
        path = tmp_path / "t.jsonl"
        path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err


@pytest.mark.parametrize("value", ["1e999", "Infinity"])
def test_an_infinite_wall_time_is_refused_not_written_as_null(tmp_path, capsys, value):
    """A canonical trajectory whose usage.wall_seconds was 1e999 (or Infinity) was taken (a float, >= 0), then
    written as null (pydantic writes an infinity so), and the file `import` wrote could not be read back
    ('usage.wall_seconds: Input should be a valid number'). Found by scripts/fuzz_service.py through the service."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "t", "task_id": "x", "messages": [{"role": "user", "content": "q"}], '
                   f'"usage": {{"wall_seconds": {value}}}}}\n')
    out = tmp_path / "out.jsonl"
    assert main(["import", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "wall_seconds" in err[0], err
    assert not out.exists()


def test_a_null_wall_time_an_import_wrote_before_the_refusal_reads_back(tmp_path, capsys):
    """Until 9455885 `import` wrote an infinite usage.wall_seconds as null, and no reader took that file back
    ('usage.wall_seconds: Input should be a valid number', exit 2). Null now reads as 0.0, not measured."""
    src = tmp_path / "old.jsonl"
    src.write_text('{"id": "t", "task_id": "x", "messages": [{"role": "user", "content": "q"}], '
                   '"usage": {"steps": 0, "wall_seconds": null}}\n')
    out = tmp_path / "out.jsonl"
    assert main(["import", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    assert '"wall_seconds":0.0' in out.read_text()
    assert main(["diagnose", str(src)]) == 0, capsys.readouterr().err
