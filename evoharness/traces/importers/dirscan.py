"""Directory listings the importers look up once per trajectory, remembered while the directory is unchanged.

Every SWE-agent / mini-swe-agent trajectory looks for SWE-bench result files in its folder and the folders
above it, and every AgentRx run for a ground-truth file beside it. In a folder of N trajectories that listed
the folder once per trajectory: N listings of N entries (1,000 SWE-agent ``.traj`` files took 17 CPU-s,
10,000 AgentRx tau-bench runs 70 CPU-s). ``matching(d, keep)`` lists ``d`` once and remembers the entries
``keep`` admits (a handful: result files, ground truth) for as long as ``d``'s (device, inode, mtime) stay
the same, so a folder of N trajectories is listed once.

A file added, removed or renamed in ``d`` changes its mtime, so it is seen on the next look-up. A listing is
remembered only once ``d`` has been unchanged for ``SETTLED_NS`` (file times tick coarsely: an entry
added within the same tick as the listing would not change the mtime), so a folder being written is listed
afresh each time. What ``keep`` decided from a file's content (its first bytes) is not looked at again
while the folder is unchanged: a file rewritten in place into a result file is seen once the folder changes.
At most ``MAX_DIRS`` listings are kept (a long-lived service imports without end): the oldest go first.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

MAX_DIRS = 256
MAX_KEPT = 10_000  # entries kept from one listing
SETTLED_NS = 2_000_000_000

_cache: OrderedDict[tuple[str, Callable[[Path], bool]], tuple[tuple[int, int, int], tuple[str, ...]]] = OrderedDict()
_lock = threading.Lock()  # the service imports in threads: a listing another thread evicts between look-up and use


def matching(d: Path, keep: Callable[[Path], bool]) -> list[Path]:
    """The entries of directory ``d`` that ``keep`` admits, sorted by name (``[]`` when ``d`` is no readable
    directory). ``keep`` must be a module-level function: it is part of the key."""
    try:
        st = os.stat(d)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
    key = (str(d), keep)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp:
            _cache.move_to_end(key)
            return [d / n for n in hit[1]]
    found: list[str] = []
    try:
        with os.scandir(d) as it:
            for e in it:
                if keep(Path(e.path)):
                    found.append(e.name)
                    if len(found) >= MAX_KEPT:
                        break
    except OSError:
        return []
    names = tuple(sorted(found))
    if time.time_ns() - st.st_mtime_ns > SETTLED_NS:
        with _lock:
            _cache[key] = (stamp, names)
            _cache.move_to_end(key)
            while len(_cache) > MAX_DIRS:
                _cache.popitem(last=False)
    return [d / n for n in names]
