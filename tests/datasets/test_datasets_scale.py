"""The export streams: its memory does not grow with the number of rows; the benchmark runs."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import structlog

from evoharness.datasets.export import JsonlSource, export_dataset
from evoharness.datasets.models import SourceKind
from evoharness.traces.store import write_trajectories

from .helpers import make_traj

ROOT = Path(__file__).resolve().parents[2]


def _peak_bytes(tmp_path: Path, n: int) -> int:
    src = tmp_path / f"t{n}.jsonl"
    write_trajectories(src, (make_traj(f"id-{i}", f"task-{i % 50}", calls=2) for i in range(n)))
    tracemalloc.start()
    try:
        s = export_dataset(tmp_path / f"out{n}", source=SourceKind.healthy, trajectories=JsonlSource(src))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        structlog.reset_defaults()
    assert s.records == n
    return peak


def test_export_memory_does_not_grow_with_rows(tmp_path):
    small, large = _peak_bytes(tmp_path, 200), _peak_bytes(tmp_path, 2000)
    assert large < small * 1.5 + 256 * 1024, (small, large)  # 10x the rows, about the same memory


def test_benchmark_prints_peak_and_rate(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_scale.py"), "--n", "300"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_this_checkout())
    assert proc.returncode == 0, proc.stderr
    assert "exported rows: 270" in proc.stdout  # 10% of tasks are held out
    assert "peak RSS:" in proc.stdout and "rows/s:" in proc.stdout


def test_benchmark_times_fresh_export_processes(tmp_path):
    """``export_scale.py --fresh``: each timed export a whole `evoharness dataset export` process (a cold start). A
    tiny run with --labels and a run directory: the command's own count of rows (the held-out tenth excluded) is
    printed with its CPU and peak RSS (a process's, tens of MB: imports counted)."""
    import re

    for extra in ((), ("--labels",), ("--run",)):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_scale.py"), "--n", "20", "--repeat",
                               "1", "--fresh", *extra], capture_output=True, text=True, timeout=240, cwd=tmp_path,
                              env=_this_checkout())
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "exported rows: 18 " in proc.stdout and "fresh process each" in proc.stdout, proc.stdout
        rss = re.search(r"this \(.*\): rows per CPU-second [\d,]+; CPU s per process [\d.]+; peak RSS (\d+) MB",
                        proc.stdout)
        assert rss and int(rss.group(1)) > 20, proc.stdout


def test_benchmark_passes_max_tokens_to_the_export(tmp_path):
    """``export_scale.py --max-tokens N`` (to time and size an export with the limit): the synthetic rows are ~350
    tokens by the byte estimate, so 340 skips every one and 400 none, and the count is printed."""
    for limit, rows in ((340, 0), (400, 36)):
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_scale.py"), "--n", "40", "--repeat",
                               "1", "--max-tokens", str(limit)],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_this_checkout())
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"exported rows: {rows}  held-out excluded: 4" in proc.stdout, proc.stdout
        assert f"over --max-tokens: {36 - rows}" in proc.stdout, proc.stdout


def test_benchmark_renders_under_a_seed_harness_with_render_under(tmp_path):
    """``export_scale.py --render-under seed`` (the export's prompt render, timed with its render process) ran in
    no test. A tiny run: its rows are printed and each row's system prompt is the seed harness's template rendered
    for that row's task, not the trajectory's own ("You are the agent.")."""
    import json

    keep = tmp_path / "keep"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_scale.py"), "--n", "20",
                           "--render-under", "seed", "--repeat", "1", "--keep", str(keep)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_this_checkout())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "exported rows: 18  held-out excluded: 2" in proc.stdout, proc.stdout  # tasks 9 and 19 are held out
    assert "render under: seed (0 fell back)" in proc.stdout and "rows/s:" in proc.stdout, proc.stdout
    rows = [json.loads(line) for line in (keep / "data.jsonl").read_text().splitlines()]
    meta = [json.loads(line) for line in (keep / "metadata.jsonl").read_text().splitlines()]
    assert len(rows) == len(meta) == 18
    for row, m in zip(rows, meta, strict=True):
        system = row["messages"][0]
        assert system["role"] == "system" and system["content"] != "You are the agent.", system
        assert f"## Task\nTask {m['task_id']}\n" in system["content"], system


def _this_checkout() -> dict[str, str]:
    """The script imports this checkout's evoharness (from a worktree, the venv's editable install is another's,
    and the script refuses: benchrepeat.same_checkout)."""
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_benchmark_times_the_services_sweep_with_sweep(tmp_path):
    """``export_scale.py --sweep`` times the service's sweep of an ingest store into a new training queue: the rows are
    the trajectories queued (the synthetic file's failed runs, every fifth, content failures), each under the label
    the store kept (this tree labels none of them again)."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_scale.py"), "--n", "100", "--sweep",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=_this_checkout())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "exported rows: 20 " in proc.stdout and "labels reused: 20" in proc.stdout, proc.stdout
    assert "labelled again" not in proc.stdout and "rows/s:" in proc.stdout, proc.stdout
