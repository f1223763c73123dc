"""Directory listings the importers look up once per trajectory, remembered while the directory is unchanged.

Every SWE-agent / mini-swe-agent trajectory looks for SWE-bench result files in its folder and the folders
above it, and every AgentRx run for a ground-truth file beside it. In a folder of N trajectories that listed
the folder once per trajectory: N listings of N entries (1,000 SWE-agent ``.traj`` files took 17 CPU-s,
10,000 AgentRx tau-bench runs 70 CPU-s). ``matching(d, keep)`` lists ``d`` once and remembers the entries
``keep`` admits (a handful: result files, ground truth) for as long as ``d``'s (device, inode, mtime) stay
the same, so a folder of N trajectories is listed once.

What can go stale, and why it does not:

- An entry added, removed or renamed in ``d`` (an atomic replace too) changes ``d``'s mtime: listed again. A
  listing is remembered only once ``d`` has been unchanged for ``SETTLED_NS`` (file times tick coarsely: an
  entry added within the same tick as the listing would not change the mtime).
- A file rewritten in place (same name, new content) does not change ``d``'s mtime, and ``keep.content`` decides
  from the content (its first bytes: is it a result file yet?). So every entry ``keep.name`` admits is
  remembered with its (inode, mtime, size) and looked at again (one ``stat``) at each look-up: one whose stamp
  changed, or that changed within ``SETTLED_NS`` (a rewrite within one tick of the same size), is judged again.
  A long-lived process (the service, a run loop) sees a result file written into an empty file at the next
  look-up. A folder with more than ``MAX_WATCHED`` such entries is listed afresh once its listing is
  ``REFRESH_NS`` old instead (a stat of each per look-up would be the N x N this module removes), and until then
  watches the entries that were empty or changed within ``SETTLED_NS`` when it was listed (at most
  ``MAX_WATCHED``: a file the harness has opened and not written yet) as above: only a settled file with content
  rewritten in place there waits for the next listing.

At most ``MAX_DIRS`` listings are kept (a long-lived service imports without end): the oldest go first.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_DIRS = 256
MAX_KEPT = 10_000  # entries kept from one listing
MAX_WATCHED = 64  # entries re-checked by stamp at each look-up; more: the listing expires after REFRESH_NS
SETTLED_NS = 2_000_000_000
REFRESH_NS = 10_000_000_000


@dataclass(frozen=True)
class Keep:
    """Which entries of a folder to keep: ``name`` decides from the name alone (it never changes), ``content``
    (None: the name decides) from the file, which may be rewritten in place. Both must be module-level functions:
    a ``Keep`` is part of the cache key."""

    name: Callable[[str], bool]
    content: Callable[[Path], bool] | None = None


Stamp = tuple[int, int, int]  # (inode, mtime_ns, size)


@dataclass
class _Listing:
    stamp: tuple[int, int, int]  # the folder's (device, inode, mtime_ns)
    listed_ns: int
    entries: dict[str, tuple[Stamp | None, bool]]  # name -> (its stamp, kept), sorted; stamp None: not watched
    watched: bool  # every entry's content verdict is re-checked by stamp (at most MAX_WATCHED entries); else only
    # the stamped ones (empty or just written when listed), and the listing expires after REFRESH_NS


_cache: OrderedDict[tuple[str, Keep], _Listing] = OrderedDict()
_lock = threading.Lock()  # the service imports in threads: a listing another thread evicts between look-up and use


def matching(d: Path, keep: Keep) -> list[Path]:
    """The entries of directory ``d`` that ``keep`` admits, sorted by name (``[]`` when ``d`` is no readable
    directory)."""
    try:
        st = os.stat(d)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return []
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
    key = (str(d), keep)
    now = time.time_ns()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit.stamp == stamp and (hit.watched or now - hit.listed_ns <= REFRESH_NS):
            _cache.move_to_end(key)
            entries = hit.entries
        else:
            hit = None
    if hit is not None:
        if keep.content is not None and entries:
            entries = dict(entries)  # judged again apart: another thread may be reading the remembered one
            if _recheck(d, keep, entries, now):
                with _lock:
                    hit.entries = entries  # another thread's re-check of the same files finds the same
        return [d / n for n, (_, kept) in entries.items() if kept]
    listing = _list(d, keep, stamp, now)
    if listing is None:
        return []
    if now - st.st_mtime_ns > SETTLED_NS:
        with _lock:
            _cache[key] = listing
            _cache.move_to_end(key)
            while len(_cache) > MAX_DIRS:
                _cache.popitem(last=False)
    return [d / n for n, (_, kept) in listing.entries.items() if kept]


def _list(d: Path, keep: Keep, stamp: tuple[int, int, int], now: int) -> _Listing | None:
    entries: dict[str, tuple[Stamp | None, bool]] = {}
    watched = True  # until more than MAX_WATCHED entries are to be watched: then the kept and the volatile ones
    volatile = 0  # entries watched in a listing that is not (empty or just written when listed)
    kept = 0
    try:
        with os.scandir(d) as it:
            for e in it:
                if not keep.name(e.name):
                    continue
                if keep.content is None:
                    entries[e.name] = (None, True)
                else:
                    if watched and len(entries) >= MAX_WATCHED:
                        watched = False
                        entries = {n: (s if _volatile(s, now) else None, v) for n, (s, v) in entries.items()
                                   if v or _volatile(s, now)}
                        volatile = sum(s is not None for s, _ in entries.values())
                    seen = _stamp(e.path)  # before the content: a rewrite after it is seen
                    verdict = keep.content(Path(e.path))
                    if watched:
                        entries[e.name] = (seen, verdict)
                    else:
                        watch = volatile < MAX_WATCHED and _volatile(seen, now)
                        volatile += watch
                        if verdict or watch:
                            entries[e.name] = (seen if watch else None, verdict)
                kept += e.name in entries and entries[e.name][1]
                if kept >= MAX_KEPT:
                    break
    except OSError:
        return None
    return _Listing(stamp, now, dict(sorted(entries.items())), watched or keep.content is None)


def _recheck(d: Path, keep: Keep, entries: dict[str, tuple[Stamp | None, bool]], now: int) -> bool:
    """Judge again each watched entry (one with a stamp) whose stamp changed or that changed within ``SETTLED_NS``;
    whether any did."""
    changed = False
    for name, (was, kept) in entries.items():
        if was is None:  # not watched (a listing of many: it expires instead), or gone when listed
            continue
        now_stamp = _stamp(os.path.join(d, name))
        if now_stamp != was or (now_stamp is not None and now - now_stamp[1] <= SETTLED_NS):
            verdict = now_stamp is not None and keep.content(d / name)
            changed = changed or now_stamp != was or verdict != kept
            entries[name] = (now_stamp, verdict)
    return changed


def _volatile(stamp: Stamp | None, now: int) -> bool:
    """Whether a file so stamped may yet be written in place: empty, or changed within ``SETTLED_NS``."""
    return stamp is not None and (stamp[2] == 0 or now - stamp[1] <= SETTLED_NS)


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
