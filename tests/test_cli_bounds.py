"""Count options past any sane value are one `error:` line and exit 2 before any work (fix, third session):
`demo --rounds 99999999999999999999999` ran a whole demo, `dataset enqueue --round` that large was a SQLite
OverflowError traceback, and `rollout --workers 100000` would start that many sandboxes at once. `rollout --seed`
past 32 bits or negative made every rollout a failed one (the endpoint refuses the seed), and a huge --tasks
meant all tasks, silently (fix, fourth session)."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.traces.store import write_trajectories
from tests.datasets.helpers import make_traj

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(("args", "line"), [
    (["demo", "--rounds", HUGE], f"error: --rounds must be 1 to 100, not {int(HUGE):,}"),
    (["demo", "--rounds", "-1"], "error: --rounds must be 1 to 100, not -1"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--workers", "100000"],
     "error: --workers must be 1 to 256, not 100,000"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--workers", "0"],
     "error: --workers must be 1 to 256, not 0"),
    (["candidate", "new", "--harness", "h", "--edit", "e.json", "--round", HUGE],
     f"error: --round must be 0 to 10,000, not {int(HUGE):,}"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--set", "sandbox.workers=1000"],
     "error: settings: sandbox.workers: Input should be less than or equal to 256"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--seed", HUGE],
     f"error: --seed must be 0 to 2,147,483,647, not {int(HUGE):,}"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--seed", "-5"],
     "error: --seed must be 0 to 2,147,483,647, not -5"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--seed", "2147483647", "-k", "3"],
     "error: --seed must be 0 to 2,147,483,645 with 3 rollouts (rollout k uses seed+k, up to 2,147,483,647), "
     "not 2,147,483,647"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--tasks", HUGE],
     f"error: --tasks must be 0 to 100,000 (0 = all), not {int(HUGE):,}"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--tasks", "-3"],
     "error: --tasks must be 0 to 100,000 (0 = all), not -3"),
    (["evaluate", "--harness", "h", "--out", "e.json", "--tasks", HUGE],
     f"error: --tasks must be 0 to 100,000 (0 = all), not {int(HUGE):,}"),
    (["evaluate", "--harness", "h", "--out", "e.json", "--tasks", "-1"],
     "error: --tasks must be 0 to 100,000 (0 = all), not -1"),
    (["run", "--set", f"run.max_rounds={HUGE}"],
     "error: settings: run.max_rounds: Input should be less than or equal to 10000"),
])
def test_a_count_past_its_limit_is_one_error_line_before_any_work(args, line, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [line] and "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == []  # no demo-out/, no output file, no harness


def test_enqueue_round_past_its_limit_queues_nothing(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [make_traj("a", score=0.0)])
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    assert main(["dataset", "enqueue", str(path), "--url", url, "--round", HUGE]) == 2  # an OverflowError before
    assert capsys.readouterr().err == f"error: --round must be 0 to 10,000, not {int(HUGE):,}\n"
    assert main(["dataset", "enqueue", str(path), "--url", url, "--round", "10000"]) == 0
    assert capsys.readouterr().out.startswith("1 trajectories, ")
