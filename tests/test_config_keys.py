"""Unknown settings (file, environment, --set) and unknown edit targets are errors naming the valid ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness import config
from evoharness.cli import main
from evoharness.config import Settings, load_settings
from evoharness.config_keys import known_keys
from evoharness.errors import InputError

REPO = Path(__file__).resolve().parents[1]


def test_every_declared_key_is_accepted_and_the_example_config_loads(tmp_path):
    keys = known_keys(Settings)
    assert "diagnosis.repeat_min" in keys and "sandbox.docker" in keys
    load_settings(REPO / "ops" / "evoharness.example.toml", environ={})
    load_settings(None, ["diagnosis.routing.F3=weights"], environ={})  # inside a free-form table


@pytest.mark.parametrize(("override", "expected"), [
    ("diagnosis.repeat_minn=2", "unknown setting diagnosis.repeat_minn; did you mean diagnosis.repeat_min?"),
    ("run.repeat_min=2", "unknown setting run.repeat_min; did you mean diagnosis.repeat_min?"),
    ("diagnosys.repeat_min=2", "unknown setting diagnosys.repeat_min; did you mean diagnosis.repeat_min?"),
    ("diagnosis.zzzzzz=2", "valid keys in [diagnosis]: "),
])
def test_unknown_override_names_the_closest_key(override, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="^--set: ") as e:
        load_settings(None, [override], environ={})
    assert expected in str(e.value)


def test_unknown_file_key_names_the_file_and_the_closest_key(tmp_path):
    cfg = tmp_path / "evoharness.toml"
    cfg.write_text("[sandbox]\nbackend = 'none'\n[sandbox.gateway]\nretriez = 2\n")
    with pytest.raises(InputError) as e:
        load_settings(cfg, environ={})
    assert str(e.value).startswith(f"{cfg}: unknown setting sandbox.gateway.retriez; did you mean sandbox.gateway.")


def test_environment_variables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="did you mean EVOHARNESS_DIAGNOSIS__REPEAT_MIN[?]"):
        load_settings(None, environ={"EVOHARNESS_DIAGNOSIS__REPEAT_MINN": "2"})
    with pytest.raises(InputError, match="EVOHARNESS_RUN_BUDGET is not a setting; did you mean EVOHARNESS_RUN__BUDGET"):
        load_settings(None, environ={"EVOHARNESS_RUN_BUDGET": "2"})
    # variables of other parts (token, config path, test switches, image names) are not settings
    s = load_settings(None, environ={"EVOHARNESS_API_TOKEN": "x" * 20, "EVOHARNESS_TEST_DOCKER": "1",
                                     "EVOHARNESS_SANDBOX_IMAGE": "img", "EVOHARNESS_LOG_LEVEL": "info"})
    assert s.log_level == "info"


def test_a_removed_key_names_its_replacement(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for old, instead in config.REMOVED_KEYS.items():  # the real table (Settings trimming keeps it)
        with pytest.raises(InputError, match=f"{old} was removed: use {instead.split()[0]}"):
            load_settings(None, [f"{old}=1"], environ={})
    monkeypatch.setattr(config, "REMOVED_KEYS", {"run.old_knob": "run.new_knob"})
    with pytest.raises(InputError, match="run.old_knob was removed: use run.new_knob"):
        load_settings(None, ["run.old_knob=1"], environ={})


def test_a_key_inside_a_removed_section_names_its_replacement(tmp_path, monkeypatch):
    """`[agent]` was removed whole: `--set agent.max_steps=3` or EVOHARNESS_AGENT__MAX_STEPS said 'unknown setting
    ...; valid keys at the top level: ...' where a config file's `[agent]` named run.model and policies.yaml."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="--set: agent.max_steps was removed: use run.model"):
        load_settings(None, ["agent.max_steps=3"], environ={})
    with pytest.raises(InputError, match="EVOHARNESS_AGENT__MAX_STEPS was removed: use run.model"):
        load_settings(None, environ={"EVOHARNESS_AGENT__MAX_STEPS": "3"})


def test_cli_unknown_set_and_unknown_target(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["dataset", "status", "--set", "diagnosis.repeat_minn=2"]) == 2
    assert capsys.readouterr().err == (
        "error: --set: unknown setting diagnosis.repeat_minn; did you mean diagnosis.repeat_min?\n")
    assert main(["init", "h"]) == 0
    cases = [("F9.bogus", "valid: F2.blocked_call, "), ("F3.repeated_actoin", "did you mean F3.repeated_action?")]
    for target, hint in cases:
        (tmp_path / "e.json").write_text(json.dumps(
            {"message": "m", "targets": target, "changes": [{"path": "lessons.md", "content": "x"}]}))
        capsys.readouterr()
        assert main(["candidate", "new", "--harness", "h", "--edit", "e.json"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: e.json: targets: unknown signal '{target}'; {hint}") and err.count("\n") == 1
