"""What a resumed run does not take from the settings it was resumed with.

A run keeps the settings it started with (its ``settings.json``): a `run --resume` with another `--set
run.max_rounds=1`, a `--config` whose budget or environment was edited since, ran the run on its saved ones without
a word. The differences are now listed in a note on stderr, so the operator sees what was not applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evoharness.config import Settings

SECTIONS = ("run", "verification", "roles", "sandbox", "diagnosis")
SKIPPED = {("run", "harness"), ("run", "evidence")}  # paths made absolute / fixed at start, said elsewhere


def not_applied(given: Settings, saved: Settings) -> list[str]:
    """``section.key=given (the run's: saved)`` for each setting of the run's sections that the resume was given
    (a config file, an ``EVOHARNESS_*`` variable, ``--set``) and that differs. A default is not given: a bare
    ``run --resume ID`` of a run started with ``--set run.max_rounds=1`` listed ``run.max_rounds=3`` as not applied."""
    out = []
    for section in SECTIONS:
        given_section = getattr(given, section)
        mine = given_section.model_dump(mode="json")
        theirs = getattr(saved, section).model_dump(mode="json")
        for key in sorted(mine):
            if key not in given_section.model_fields_set:
                continue
            if (section, key) in SKIPPED or mine[key] == theirs.get(key):
                continue
            if key == "model" and isinstance(mine[key], str) and str(theirs.get(key)).startswith(mine[key]):
                continue  # openai:URL resolved to its one model at start
            out.append(f"{section}.{key}={_short(mine[key])} (the run's: {_short(theirs.get(key))})")
    return out


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def saved_settings(path: Path, run_id: str) -> Settings:
    """The run's settings as saved at its start (``path``: its settings.json, migrated). A value this version refuses
    (a bound lowered since: ``run.rollouts`` 5000 of a run saved before the 1,000 bound) is one ``InputError`` saying
    which, why and how to go on; it was 'Settings: run.rollouts: Input should be ... (got 5000)', naming no run."""
    from pydantic import ValidationError

    from evoharness.config import migrate_saved
    from evoharness.errors import InputError

    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(str(path), f"run {run_id}'s saved settings are not JSON ({e})") from None
    except RecursionError:  # a traceback for every command that reads a run
        raise InputError(str(path), f"run {run_id}'s saved settings are not JSON (nested too deeply)") from None
    if not isinstance(data, dict):  # a list or null was an AttributeError traceback in migrate_saved
        raise InputError(str(path), f"run {run_id}'s saved settings are not a JSON object")
    try:
        return Settings.model_validate(migrate_saved(data))
    except ValidationError as e:
        errs = e.errors()
        first = errs[0]
        key = ".".join(str(x) for x in first["loc"]) or "settings"
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise InputError(run_id, f"its saved settings ({path}) hold {key} = {_short(first.get('input'))}, which this "
                         f"version refuses: {first['msg']}{more}. A run keeps the settings it started with: "
                         f"{_fix(key, first)} in that file (later rounds use it), or resume it with the version that "
                         "started it") from None


_BOUNDS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_short", "too_long"}


def _fix(key: str, error: dict) -> str:
    """What to do to the saved value: 'set KEY within the bound' for a bound, 'set KEY to a valid integer' (what
    pydantic says it should be) for a type or choice, 'correct KEY' where it says neither."""
    if error.get("type") in _BOUNDS:
        return f"set {key} within the bound"
    msg = str(error.get("msg", ""))
    if msg.startswith("Input should be "):  # 'Input should be a valid integer, unable to parse string as an integer'
        return f"set {key} to {msg.removeprefix('Input should be ').split(', unable to')[0]}"
    return f"correct {key}"
