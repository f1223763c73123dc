"""A bad EVOHARNESS_* setting in the environment is one error line for every command, also those that read no
settings (`schema`, `noise`, `import` ignored it and exited 0); variables that are no settings are left alone."""

from __future__ import annotations

import json

import pytest

from evoharness.cli import main

COMMANDS = [["schema", "trajectory"], ["noise"], ["import", "IN", "--out", "OUT"]]


def _argv(argv: list[str], tmp_path) -> list[str]:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "task_id": "t", "messages": []}) + "\n")
    return [str(src) if a == "IN" else str(tmp_path / "out.jsonl") if a == "OUT" else a for a in argv]


@pytest.mark.parametrize("argv", COMMANDS)
@pytest.mark.parametrize(("var", "value", "says"), [
    ("EVOHARNESS_DIAGNOSIS__NO_SUCH", "1", "error: environment: unknown setting EVOHARNESS_DIAGNOSIS__NO_SUCH"),
    ("EVOHARNESS_RUN_BUDGET", "3", "error: environment: EVOHARNESS_RUN_BUDGET is not a setting; did you mean"),
    ("EVOHARNESS_RUN__BUDGET", "abc", "error: settings: run.budget: Input should be a valid number"),
    ("EVOHARNESS_CONFIG", "no-such.toml", "error: no-such.toml: no such file or directory"),
])
def test_a_bad_setting_in_the_environment_is_one_error_line(argv, var, value, says, tmp_path, monkeypatch,
                                                            capsys):
    argv = _argv(argv, tmp_path)
    monkeypatch.setenv(var, value)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1
    assert not (tmp_path / "out.jsonl").exists()
    assert main([argv[0], "--help"]) == 0  # help is still shown


@pytest.mark.parametrize("argv", COMMANDS)
def test_other_evoharness_variables_and_good_settings_change_nothing(argv, tmp_path, monkeypatch, capsys):
    argv = _argv(argv, tmp_path)
    monkeypatch.setenv("EVOHARNESS_API_TOKEN", "x")
    monkeypatch.setenv("EVOHARNESS_TEST_SOMETHING", "1")
    monkeypatch.setenv("EVOHARNESS_RUN__BUDGET", "5")
    assert main(argv) == 0, capsys.readouterr().err


@pytest.mark.parametrize("argv", COMMANDS)
def test_a_setting_in_the_environment_does_not_make_a_command_that_reads_none_read_evoharness_toml(
        argv, tmp_path, monkeypatch, capsys):
    argv = _argv(argv, tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evoharness.toml").write_text("[run\nbudget = \n")  # broken: only commands that use settings read it
    monkeypatch.setenv("EVOHARNESS_RUN__BUDGET", "5")
    assert main(argv) == 0, capsys.readouterr().err
    monkeypatch.setenv("EVOHARNESS_RUN__BUDGET", "abc")  # the environment's own settings are still checked
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: settings: run.budget: Input should be a valid number")
    monkeypatch.setenv("EVOHARNESS_RUN__BUDGET", "5")
    assert main(["diagnose", str(tmp_path / "in.jsonl")]) == 2  # a command that uses settings reads the file
    assert capsys.readouterr().err.startswith("error: evoharness.toml: ")
