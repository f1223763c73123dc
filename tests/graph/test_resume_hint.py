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


def test_the_services_hint_names_its_home(tmp_path, down):
    """The service's paused run said "restart the service (or `evoharness run --resume ID`)": from a shell, that looks
    under the default home, not the service's."""
    import shlex
    import threading

    from evoharness.graph.progress import Progress
    from evoharness.service.driver import drive
    from tests.graph.conftest import run_settings

    settings = run_settings(tmp_path).model_copy(update={"home": tmp_path / "service home"})
    run_dir = settings.home / "runs" / "run-x"
    run_dir.mkdir(parents=True)
    with pytest.raises(InfraError) as e:
        drive(settings, "run-x", run_dir, {"run_id": "run-x"}, Progress(quiet=True), threading.Event())
    home = shlex.quote(f"home={tmp_path / 'service home'}")
    assert str(e.value).endswith(f"restart the service (or `evoharness --set {home} run --resume run-x`)"), e.value
