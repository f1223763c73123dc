"""A run's id: it names the run's directory under ``<home>/runs``."""

from __future__ import annotations

import re
import uuid

from evoharness.errors import InputError

# no path separator, no leading dot or dash (the service's pattern)
RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


def new_run_id() -> str:
    return "run-" + uuid.uuid4().hex[:10]


def check_run_id(run_id: str, option: str) -> str:
    """``run_id`` if it has a run id's shape (`--run-id ../x` made the run at <home>/x; `--resume ../../x` read
    <home>/../x/settings.json; a newline was echoed into the error); else an ``InputError`` naming ``option``."""
    if re.fullmatch(RUN_ID, run_id) is None:
        raise InputError(option, f"{run_id[:80]!r}: a run id is 1-128 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit (it names the run's directory under <home>/runs)")
    return run_id
