"""A paused run's hint is typed as the run was started: `evoharness --set home=DIR run` that paused (an endpoint down,
a full disk) said "then `evoharness run --resume ID`", which looks under the default home and finds no such run."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.cli_support import command_name
from evoharness.errors import InfraError
from evoharness.harness_repo.init import init_harness


@pytest.fixture
def down(monkeypatch):
    import evoharness.graph.runner as runner

    class Services:
        def close(self) -> None:
            pass

    def graph(*_a, **_k):
        raise InfraError("model endpoint down for all 4 rollouts: unreachable after 4 attempts")

    monkeypatch.setattr(runner, "build_services", lambda *_a, **_k: Services())
    monkeypatch.setattr(runner, "build_graph", graph)


def _global(tmp_path) -> list[str]:
    init_harness(tmp_path / "harness")
    return ["--set", f"home={tmp_path / 'my home'}", "--set", f"run.harness={tmp_path / 'harness'}",
            "--set", "run.env=synthetic", "--set", "run.model=scripted:weak"]


def test_a_paused_runs_hint_carries_the_settings_it_was_started_with(tmp_path, capsys, down):
    given = _global(tmp_path)
    assert main([*given, "run", "--run-id", "run-x"]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: run run-x paused: model endpoint down"), line
    assert line.endswith(f"then `{command_name()} --set 'home={tmp_path / 'my home'}' --set "
                         f"run.harness={tmp_path / 'harness'} --set run.env=synthetic --set run.model=scripted:weak "
                         f"run --resume run-x`"), line


def test_a_resumed_run_that_pauses_again_says_the_same(tmp_path, capsys, down):
    given = _global(tmp_path)
    assert main([*given, "run", "--run-id", "run-x"]) == 2
    capsys.readouterr()
    assert main([*given[:2], "run", "--resume", "run-x"]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.endswith(f"then `{command_name()} --set 'home={tmp_path / 'my home'}' run --resume run-x`"), line
