"""Whether the file being imported has neighbours the importers may join with it.

mini-swe-agent / SWE-agent trajectories are scored from SWE-bench results found in their folder and up to three
above it, AgentRx runs labelled from a ground-truth file beside them or one folder up. A document held in memory
(an HTTP request body posted to the service: ``load_bytes`` writes it to a temporary file to import it) has no
folder of its own: its temporary file's neighbours are the server's temporary folder and the folders above it,
where any file named like a results or ground-truth file would score or label the posted run. Inside ``alone()``
no such lookup is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_alone: ContextVar[bool] = ContextVar("evoharness_import_alone", default=False)


def looked_up() -> bool:
    """Whether files beside the one being imported may be joined with it (False inside ``alone()``)."""
    return not _alone.get()


@contextmanager
def alone() -> Iterator[None]:
    """Import without looking beside the file (a document held in memory)."""
    token = _alone.set(True)
    try:
        yield
    finally:
        _alone.reset(token)
