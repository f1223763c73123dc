"""Fault injection for crash-safety tests: SIGKILL the process at the N-th fault point.

``EVOHARNESS_FAULT_KILL_AT=N`` kills the process at the N-th call of ``fault_point``;
``EVOHARNESS_FAULT_TRACE=FILE`` appends each point's name to FILE (to count them).
Unset, ``fault_point`` costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

_count = 0


def fault_point(name: str) -> None:
    global _count
    kill_at = os.environ.get("EVOHARNESS_FAULT_KILL_AT")
    trace = os.environ.get("EVOHARNESS_FAULT_TRACE")
    if not kill_at and not trace:
        return
    _count += 1
    if trace:
        with open(trace, "a") as fh:
            fh.write(f"{_count} {name}\n")
    if kill_at and _count == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)
