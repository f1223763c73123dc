"""A run whose model spec no scheme builds is refused with one error line before anything is made.

``run --set run.model=nosuch:x`` ran: every rollout failed in the worker ('unknown model spec'), was labelled
F2.harness_error and handed to the analyst as harness friction, and the run ended with exit 0 and budget spent.
A roles.model the roles cannot take made a run (settings saved, harness initialised) that failed when its roles
were built, and failed again on every ``--resume`` (which keeps the saved settings)."""

from __future__ import annotations

import pytest

from evoharness.cli import main


@pytest.mark.parametrize(("setting", "said"), [
    ("run.model=nosuch:x", "error: run.model: unknown model spec 'nosuch:x'"),
    ("run.model=openai", "error: run.model: unknown model spec 'openai'"),
])
def test_an_agent_model_no_scheme_builds_is_one_error_line_and_no_run(tmp_path, capsys, setting, said):
    code = main(["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'harness'}",
                 "--set", "sandbox.backend=inprocess", "--set", setting, "run"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(said) and err.count("\n") == 1
    assert not (tmp_path / "state").exists() and not (tmp_path / "harness").exists()


@pytest.mark.parametrize(("spec", "said"), [
    ("nosuch:x", "error: roles.model: unknown model spec 'nosuch:x'"),
    ("standin:weak", "error: roles.model: 'standin:weak' is an agent model"),
])
def test_a_roles_model_the_roles_cannot_take_is_one_error_line_and_no_run(tmp_path, capsys, spec, said):
    code = main(["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'harness'}",
                 "--set", "sandbox.backend=inprocess", "--set", "roles.kind=llm", "--set", f"roles.model={spec}",
                 "run"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(said) and err.count("\n") == 1
    assert not (tmp_path / "state").exists() and not (tmp_path / "harness").exists()


@pytest.mark.parametrize(("setting", "valid", "other_sides"), [
    ("roles.model=nosuch:x", ["scripted:FILE.json", "openai:URL#model", "openai:MODEL"],
     ["standin:", "gateway:", "scripted:weak", "scripted:oracle"]),
    ("roles.model=standin:weak", ["scripted:FILE.json", "openai:URL#model", "openai:MODEL"],
     ["gateway:", "scripted:weak", "scripted:oracle"]),
    ("run.model=nosuch:x", ["standin:weak", "scripted:weak", "openai:URL#model", "gateway:"],
     ["scripted:FILE.json", "openai:MODEL"]),
])
def test_a_model_spec_error_lists_only_the_forms_that_setting_takes(tmp_path, capsys, setting, valid, other_sides):
    """`roles.model=nosuch:x` was told 'one of: standin:weak | standin:strong (agent); ...; gateway:...' -- every
    scheme, the agent-only ones too, which the roles refuse in turn; and 'the roles take' listed scripted:weak. Now
    each error lists the spec forms of its own setting only."""
    code = main(["--set", f"home={tmp_path / 'state'}", "--set", f"run.harness={tmp_path / 'harness'}",
                 "--set", "sandbox.backend=inprocess", "--set", "roles.kind=llm", "--set", setting, "run"])
    [err] = capsys.readouterr().err.splitlines()
    assert code == 2 and err.startswith(f"error: {setting.partition('=')[0]}: ")
    listed = err.rpartition("one of: " if "one of: " in err else " take")[2]
    assert all(form in listed for form in valid), err
    assert not [form for form in other_sides if form in listed], err
