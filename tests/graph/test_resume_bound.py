"""A run saved with a value a later version bounds lower (run.rollouts 5000, before the 1,000 bound) cannot resume as
it is: one error line names the run, the file, the value and how to go on. It was 'error: Settings: run.rollouts:
Input should be less than or equal to 1000 (got 5000); 1 more', naming neither the run nor a way on."""

from __future__ import annotations

import json

import pytest

from evoharness.cli import main
from evoharness.config import load_settings
from evoharness.graph.runner import runs_dir, save_run_settings


@pytest.fixture
def saved(tmp_path):
    settings = load_settings(None, [f"home={tmp_path / 'home'}", f"run.harness={tmp_path / 'h'}"], environ={})
    run_dir = runs_dir(settings) / "run-y"
    save_run_settings(run_dir, settings)
    path = run_dir / "settings.json"
    data = json.loads(path.read_text())
    data["run"]["rollouts"] = 5000
    path.write_text(json.dumps(data))
    return tmp_path / "home", path


@pytest.mark.parametrize("argv", [["run", "--resume", "run-y"], ["approve", "candidate/x", "--run", "run-y"]])
def test_a_value_above_a_lowered_bound_says_which_and_how_to_go_on(saved, argv, capsys):
    home, path = saved
    assert main(["--set", f"home={home}", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: run-y: its saved settings (")
    assert str(path) in err and "run.rollouts = 5000" in err and "less than or equal to 1000" in err
    assert "set run.rollouts within the bound in that file" in err


def test_a_run_whose_saved_settings_are_no_json_says_so(saved, capsys):
    home, path = saved
    path.write_text("{not json")
    assert main(["--set", f"home={home}", "run", "--resume", "run-y"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: run run-y's saved settings are not JSON") and err.count("\n") == 1


@pytest.mark.parametrize("body", ["[]", "null", '"settings"', "3"])
def test_a_run_whose_saved_settings_are_no_json_object_says_so(saved, body, capsys):
    """JSON that is not an object was a traceback (AttributeError: 'list' object has no attribute 'items')."""
    home, path = saved
    path.write_text(body)
    assert main(["--set", f"home={home}", "run", "--resume", "run-y"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: run run-y's saved settings are not a JSON object") and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["report", "run-y"], ["evaluate", "--run", "run-y"], ["ablate", "run-y"]])
def test_the_reports_say_it_in_one_line_too(saved, argv, tmp_path, capsys):
    """report / evaluate / ablate read the same file: a pydantic ValidationError of four lines ('1 validation error
    for Settings / run.rollouts / Input should be ... / For further information visit ...')."""
    home, path = saved
    main(["--set", f"home={home}", *argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert err.startswith("error: run-y: its saved settings (") and err.count("\n") == 1, err
    assert "run.rollouts = 5000" in err


@pytest.mark.parametrize(("value", "must"), [("many", "set run.rollouts to a valid integer in that file"),
                                             ([3], "set run.rollouts to a valid integer in that file")])
def test_a_value_of_the_wrong_type_says_what_it_must_be_not_a_bound(saved, value, must, capsys):
    """A type error is no bound: 'set run.rollouts within the bound' told the user to look for one."""
    home, path = saved
    data = json.loads(path.read_text())
    data["run"]["rollouts"] = value
    path.write_text(json.dumps(data))
    assert main(["--set", f"home={home}", "run", "--resume", "run-y"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: run-y: its saved settings (")
    assert must in err and "bound" not in err, err
