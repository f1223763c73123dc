"""`run --resume` of a finished run whose directory was copied (or moved) elsewhere prints where the run and its
harness are now, and says it is a copy. It printed the summary.json written where the run was recorded: the
original's harness repository, run directory and files, as though they were this run's."""

from __future__ import annotations

import shutil

from evoharness.cli import main
from evoharness.harness_repo.init import init_harness
from tests.graph.review_run import review_run_opts


def _tail(out: str) -> list[str]:
    return out[out.index("Harness repo:"):].splitlines()


def test_a_copied_or_moved_run_prints_where_it_is_now(tmp_path, capsys):
    demo, copy, moved = tmp_path / "demo", tmp_path / "copy", tmp_path / "moved"
    init_harness(demo / "h")
    assert main(["run", "--run-id", "run-a", *review_run_opts(demo / "state", demo / "h")]) == 0, capsys.readouterr()
    capsys.readouterr()
    shutil.copytree(demo, copy)
    assert main(["--set", f"home={copy / 'state'}", "run", "--resume", "run-a"]) == 0
    here, recorded = copy / "state" / "runs" / "run-a", demo / "state" / "runs" / "run-a"
    lines = _tail(capsys.readouterr().out)
    assert lines[0].startswith(f"Harness repo: {copy / 'h'}  (main "), lines
    assert lines[1:4] == [f"  run_dir: {here}", f"  trajectories: {here / 'trajectories.jsonl'}",
                          f"  summary: {here / 'summary.json'}"], lines
    assert lines[4] == (f"  (a copy: the run was recorded at {recorded}; the paths above are where it is now, its "
                        "summary.json names the recorded ones)"), lines
    assert main(["--set", f"home={demo / 'state'}", "run", "--resume", "run-a"]) == 0  # the original: as recorded
    lines = _tail(capsys.readouterr().out)
    assert lines[0].startswith(f"Harness repo: {demo / 'h'}  (main ") and lines[1] == f"  run_dir: {recorded}"
    assert len(lines) == 4, lines

    shutil.rmtree(copy)
    shutil.move(demo, moved)
    assert main(["--set", f"home={moved / 'state'}", "run", "--resume", "run-a"]) == 0
    lines = _tail(capsys.readouterr().out)
    assert lines[0].startswith(f"Harness repo: {moved / 'h'}  (main ") and lines[4].startswith("  (moved: "), lines
