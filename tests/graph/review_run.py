"""The settings of the small reviewed run several graph tests start (`run --review` on the synthetic env with the
scripted model and playbook roles, one round): one list, not a copy per test."""

from __future__ import annotations

from pathlib import Path


def review_run_opts(home: Path | str, harness: Path | str = "h", *extra: str) -> list[str]:
    """``--set`` options for that run, with ``home``, ``run.harness`` and any ``extra`` KEY=VALUE settings."""
    sets = [f"home={home}", f"run.harness={harness}", "run.env=synthetic", "run.model=scripted:weak",
            "run.rollouts=8", "run.dev_limit=8", "run.heldout_limit=3", "run.max_rounds=1",
            "sandbox.backend=inprocess", "roles.kind=playbook", "log_level=error", *extra]
    return [arg for kv in sets for arg in ("--set", kv)]
