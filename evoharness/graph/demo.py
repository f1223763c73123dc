"""`evoharness demo`: the embedded default main job, end to end on one machine."""

from __future__ import annotations

import shutil
from pathlib import Path

from evoharness.config import Settings
from evoharness.graph.runner import RunOutcome, start_run
from evoharness.harness_repo.init import init_harness


def demo_settings(base: Settings, out: Path, env: str, rounds: int, sandbox: str) -> Settings:
    data = base.model_dump()
    data["home"] = out / "state"
    data["run"].update({
        "harness": out / "harness", "env": env, "model": "standin:weak", "max_rounds": rounds,
        "rollouts": 8, "budget": 6000, "checkpointer": "sqlite", "review": False,
    })
    data["roles"] = {**data.get("roles", {}), "kind": "playbook"}
    data["sandbox"] = {**data.get("sandbox", {}), "backend": sandbox}
    return Settings.model_validate(data)


def run_demo(base: Settings, out: Path, env: str = "synthetic", rounds: int = 3,
             sandbox: str = "bwrap") -> RunOutcome:

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings = demo_settings(base, out, env, rounds, sandbox)
    if not (out / "harness" / ".git").exists():
        init_harness(out / "harness")
    outcome = start_run(settings)
    if (outcome.run_dir / "summary.json").exists():
        shutil.copy(outcome.run_dir / "summary.json", out / "summary.json")
    return outcome
