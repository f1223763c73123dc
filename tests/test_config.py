"""Settings: defaults < evoharness.toml < EVOHARNESS_* env < --set overrides."""

from __future__ import annotations

import pytest

from evoharness.config import load_settings
from evoharness.errors import InputError


def test_precedence(tmp_path):
    cfg = tmp_path / "evoharness.toml"
    cfg.write_text("[diagnosis]\nrepeat_min = 4\nfriction_min = 3\n")
    s = load_settings(cfg, environ={})
    assert (s.diagnosis.repeat_min, s.diagnosis.friction_min) == (4, 3)
    s = load_settings(cfg, environ={"EVOHARNESS_DIAGNOSIS__REPEAT_MIN": "5"})
    assert s.diagnosis.repeat_min == 5 and s.diagnosis.friction_min == 3
    s = load_settings(cfg, ["diagnosis.repeat_min=6"], environ={"EVOHARNESS_DIAGNOSIS__REPEAT_MIN": "5"})
    assert s.diagnosis.repeat_min == 6


def test_defaults_without_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(environ={})
    assert s.diagnosis.healthy_threshold == 1.0 and s.diagnosis.routing["F3"] == "harness"


@pytest.mark.parametrize("text,match", [("[diagnosis\n", "invalid TOML"), ("[diagnosis]\nrepeat_min = 1\n",
                                                                            "repeat_min")])
def test_bad_config_is_an_input_error(tmp_path, text, match):
    cfg = tmp_path / "evoharness.toml"
    cfg.write_text(text)
    with pytest.raises(InputError, match=match):
        load_settings(cfg, environ={})
    with pytest.raises(InputError, match="nope.toml: no such file or directory"):  # every command's words since 9ce79d6
        load_settings(tmp_path / "nope.toml", environ={})


def test_removed_keys_name_their_replacement_and_saved_runs_carry_over(tmp_path):
    from evoharness.config import REMOVED_KEYS, Settings, migrate_saved

    cfg = tmp_path / "evoharness.toml"
    cfg.write_text("[run]\nheldout_tasks = 4\n")
    with pytest.raises(InputError, match="run.heldout_tasks was removed: use run.heldout_limit"):
        load_settings(cfg, environ={})
    cfg.write_text("[agent]\n")
    with pytest.raises(InputError, match="agent was removed: use run.model"):
        load_settings(cfg, environ={})
    # a run saved by an older version (settings.json) resumes with the same values under the new keys
    old = {"agent": {}, "run": {"dev_tasks": 8, "heldout_tasks": 4, "ceiling_process_share": 0.05},
           "diagnosis": {"ceiling_process_share": 0.1},
           "verification": {"rollouts": 8, "anchor_rollouts": 8, "budget": 100.0, "z": 2.5}}  # verify-only keys
    s = Settings.model_validate(migrate_saved(old))
    assert (s.run.dev_limit, s.run.heldout_limit, s.diagnosis.ceiling_process_share) == (8, 4, 0.05)
    assert s.verification.z == 2.5 and not hasattr(s.verification, "rollouts")
    cfg.write_text("[verification]\nrollouts = 8\n")
    with pytest.raises(InputError, match="verification.rollouts was removed: use `evoharness verify --rollouts`"):
        load_settings(cfg, environ={})
    assert set(REMOVED_KEYS) >= {"run.dev_tasks", "run.heldout_tasks", "agent", "run.ceiling_process_share"}


def test_a_roles_count_that_was_never_read_names_the_one_that_is(tmp_path, capsys):
    """roles.max_candidates_per_round ("patterns the analyst returns per round") was read by nothing: the analyst
    returns up to run.max_candidates, so setting it changed nothing, silently. Test fails before (exit 0)."""
    from evoharness.cli import main
    from evoharness.config import Settings, migrate_saved

    assert main(["--set", "roles.max_candidates_per_round=5", "noise"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --set: roles.max_candidates_per_round was removed: use run.max_candidates (the analyst returns up "
        "to that many patterns a round; this key was never read)"]
    saved = Settings.model_validate(migrate_saved({"roles": {"max_candidates_per_round": 5, "max_retries": 3}}))
    assert saved.roles.max_retries == 3  # a run saved with it resumes
    # verification.paired_alpha: the paired gate's level, but no strategy's gates hold the paired gate
    assert main(["--set", "verification.paired_alpha=0.01", "noise"]) == 2
    assert "verification.paired_alpha was removed" in capsys.readouterr().err
    saved = Settings.model_validate(migrate_saved({"verification": {"paired_alpha": 0.01, "z": 2.5}}))
    assert saved.verification.z == 2.5


def test_a_config_that_is_no_toml_file_is_one_error_line(tmp_path, capsys):
    """A FIFO hung `--config`, /dev/zero grew memory without end, bytes not UTF-8 and deep nesting were tracebacks
    (UnicodeDecodeError, RecursionError)."""
    import os

    from evoharness.cli import main

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    (tmp_path / "bin.toml").write_bytes(b"a = 1\n\xff\xfe\n")
    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    cases = {fifo: "not a regular file (a FIFO, socket or device is refused); expected a config file",
             "/dev/zero": "not a regular file (a FIFO, socket or device is refused); expected a config file",
             tmp_path: "is a directory, not a config file",
             tmp_path / "bin.toml": "not UTF-8 text (byte 7); a config file is TOML",
             tmp_path / "deep.toml": "nested deeper than 100 levels (refused before parsing)"}
    for path, reason in cases.items():
        assert main(["--config", str(path), "noise"]) == 2, path
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {reason}"]


def _float_keys(model, prefix=""):
    """Every setting whose value is a float (or a float or None), as dotted keys."""
    from pydantic import BaseModel

    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _float_keys(kind, f"{prefix}{name}.")
        elif kind in (float, float | None):
            yield f"{prefix}{name}"


@pytest.mark.parametrize("value", ["inf", "1e999", "nan", "-inf"])
def test_no_setting_takes_a_number_that_is_not_finite(tmp_path, capsys, value):
    """`--set run.budget=1e999` (TOML reads it as infinity) was taken: the run measured its anchor, then its first
    verification ended in a traceback (ValueError: cannot convert float NaN to integer, exit 1). 22 float settings
    (timeouts, sigma_floor, z, max_body_mb, ...) took inf, most with no bound above, and some took nan."""
    from evoharness.cli import main
    from evoharness.config import Settings

    keys = list(_float_keys(Settings))
    assert "run.budget" in keys and "sandbox.limits.wall_seconds" in keys and len(keys) >= 25
    for key in keys:
        with pytest.raises(InputError, match=rf"{key}: "):
            load_settings(None, [f"{key}={value}"], environ={})
    assert main(["--set", f"run.budget={value}", "noise", "--sigma", "0.1", "--rollouts", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: settings: run.budget: ")


def test_a_config_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Windows Notepad saves UTF-8 with a byte-order mark: it was 'invalid TOML: Invalid statement (at line 1, column
    1)', where every trace reader skips one."""
    cfg = tmp_path / "evoharness.toml"
    cfg.write_bytes(b"\xef\xbb\xbf[run]\nmax_rounds = 2\n")
    assert load_settings(cfg).run.max_rounds == 2


@pytest.mark.parametrize("where", ["--set", "file", "environment"])
@pytest.mark.parametrize(("value", "says"), [("1" * 5000, "a number over 4,300 digits"),
                                             ("[" * 5000 + "]" * 5000, "nested too deeply")])
def test_a_huge_integer_or_deep_nesting_in_any_setting_is_one_error_line(tmp_path, monkeypatch, capsys, where, value,
                                                                          says):
    """A 5,000-digit integer as a setting (`--set run.seed=111...`, in evoharness.toml, or as EVOHARNESS_RUN__SEED)
    was a ValueError traceback from tomllib (Python's int/str conversion limit), and 5,000 nested brackets given with
    --set or the environment a RecursionError: found by scripts/fuzz_cli.py (eighteenth session)."""
    from evoharness.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["noise", "--sigma", "0.02"]
    if where == "--set":
        argv = ["--set", f"run.seed={value}", *argv]
    elif where == "file":
        if value.startswith("["):
            says = "nested deeper than 100 levels"  # a file's nesting is refused before parsing (check_nesting)
        (tmp_path / "c.toml").write_text(f"[run]\nseed = {value}\n")
        argv = ["--config", str(tmp_path / "c.toml"), *argv]
    else:
        monkeypatch.setenv("EVOHARNESS_RUN__SEED", value)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and says in err, err


def test_a_setting_whose_bytes_are_not_utf8_is_one_error_line(tmp_path, monkeypatch, capsys):
    """A shell passes bytes that are not UTF-8 as ``\\udc80``-``\\udcff``: a `--set KEY=$'\\xff'` was a
    UnicodeEncodeError traceback out of pydantic (found by scripts/fuzz_cli.py); so was such an environment
    variable. Now one line naming where the value was given."""
    from evoharness.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"--set run\.seed: not UTF-8 text"):
        load_settings(overrides=["run.seed=\udcff"], local_file=False)
    with pytest.raises(InputError, match=r"EVOHARNESS_RUN__ENV: not UTF-8 text"):
        load_settings(environ={"EVOHARNESS_RUN__ENV": "caf\udce9"}, local_file=False)
    assert main(["--set", "verification.sequential_stop_gates=\udcff", "dataset", "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set verification.sequential_stop_gates: not UTF-8 text") and len(
        err.splitlines()) == 1, err
