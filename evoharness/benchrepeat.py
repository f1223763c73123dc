"""What every script in ``benchmarks/`` shares: ``--repeat N`` and a min / median / max line.

The machine the benchmarks run on is usually shared, so a single timing says little. Each
benchmark repeats its measurement ``N`` times, runs the configurations it compares in turn
within each repeat (A, B, A, B ... so that a load spike hits both), and reports the spread.
CPU seconds (``time.process_time``) are used where the work is in this process: they do not
count the time other jobs held the CPU.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def same_checkout(script: str) -> None:
    """Refuse to run a checkout's script against another checkout's evoharness.

    A script run as ``python benchmarks/X.py`` has its own folder, not the checkout, first on ``sys.path``,
    so from a second checkout (a git worktree) it imports whichever evoharness the interpreter has
    installed -- with an editable install, another checkout's code -- and its before / after figures
    silently compare that code with itself. Exits with one ``error:`` line when the script's checkout holds
    an evoharness package that is not the one imported; with ``PYTHONPATH`` set the choice was made on
    purpose (the benchmarks compare trees that way) and nothing is checked."""
    if os.environ.get("PYTHONPATH"):
        return
    import evoharness

    here = Path(script).resolve().parents[1]
    imported = Path(evoharness.__file__).resolve().parents[1]
    if here != imported and (here / "evoharness" / "__init__.py").is_file():
        sys.exit(f"error: {script} belongs to the checkout {here}, but evoharness was imported from {imported}; "
                 f"run it with PYTHONPATH={here} to measure this checkout's code")


def add_repeat(ap: argparse.ArgumentParser, default: int = 3) -> None:
    ap.add_argument("--repeat", type=int, default=default, metavar="N",
                    help=f"repeat each measurement N times and print min / median / max (default {default})")


def check_repeat(ap: argparse.ArgumentParser, n: int) -> None:
    if n < 1:
        ap.error("--repeat must be at least 1")


def spread(values: Iterable[float], fmt: str = ".3f", unit: str = "") -> str:
    """``min a / median b / max c`` (one value: just it)."""
    xs = sorted(values)
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:{fmt}}{unit}"
    return (f"min {xs[0]:{fmt}}{unit} / median {statistics.median(xs):{fmt}}{unit} / "
            f"max {xs[-1]:{fmt}}{unit}")


def summary(values: Iterable[float]) -> dict[str, float]:
    xs = sorted(values)
    return {"min": xs[0], "median": statistics.median(xs), "max": xs[-1], "n": len(xs)}


def cpu_seconds(fn: Callable[[], Any]) -> float:
    """CPU seconds of this process spent in ``fn()`` (its result dropped inside the clock); a
    full collection first, so garbage left by the previous measurement is not charged to it."""
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def wall_seconds(fn: Callable[[], Any]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def load_note() -> str:
    """The machine's load, to print beside the figures."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return f"{os.cpu_count()} CPUs"
    return f"{os.cpu_count()} CPUs, load average {one:.1f} (1 min) {five:.1f} (5 min)"
