"""What a resumed run does not take from the settings it was resumed with.

A run keeps the settings it started with (its ``settings.json``): a `run --resume` with another `--set
run.max_rounds=1`, a `--config` whose budget or environment was edited since, ran the run on its saved ones without
a word. The differences are now listed in a note on stderr, so the operator sees what was not applied."""

from __future__ import annotations

from typing import Any

from evoharness.config import Settings

SECTIONS = ("run", "verification", "roles", "sandbox", "diagnosis")
SKIPPED = {("run", "harness"), ("run", "evidence")}  # paths made absolute / fixed at start, said elsewhere


def not_applied(given: Settings, saved: Settings) -> list[str]:
    """``section.key=given (the run's: saved)`` for each setting of the run's sections that differs."""
    out = []
    for section in SECTIONS:
        mine = getattr(given, section).model_dump(mode="json")
        theirs = getattr(saved, section).model_dump(mode="json")
        for key in sorted(mine):
            if (section, key) in SKIPPED or mine[key] == theirs.get(key):
                continue
            if key == "model" and isinstance(mine[key], str) and str(theirs.get(key)).startswith(mine[key]):
                continue  # openai:URL resolved to its one model at start
            out.append(f"{section}.{key}={_short(mine[key])} (the run's: {_short(theirs.get(key))})")
    return out


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
