"""`verification.strategy` naming no registered strategy is refused when the settings are read, by every command:
`run` said 'unknown strategy' only when it verified its first candidate, after the seed anchor and the held-out
evaluation were paid (found by the review helper, 2026-12-07: 40 rollouts at the demo's settings)."""

from __future__ import annotations

from evoharness.cli import main
from evoharness.verification.selection import STRATEGIES
from tests.graph.test_run_id import RUN


def test_run_with_an_unknown_strategy_is_refused_before_any_rollout(tmp_path, capsys):
    home = tmp_path / "state"
    code = main(["--set", f"home={home}", "--set", f"run.harness={tmp_path / 'h'}", *RUN,
                 "--set", "verification.strategy=behaviour", "run", "--run-id", "r"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"unknown strategy 'behaviour' (valid: {', '.join(STRATEGIES.names())})" in err[0], err
    assert not home.exists() or not any(p.stat().st_size for p in home.rglob("trajectories.jsonl"))


def test_every_registered_strategy_is_a_valid_setting(tmp_path, capsys):
    for name in STRATEGIES.names():
        assert main(["--set", f"verification.strategy={name}", "--set", f"home={tmp_path}", "dataset", "status"]) == 0
        capsys.readouterr()
