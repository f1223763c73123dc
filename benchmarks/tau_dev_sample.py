"""The blind dev-labelled sample of tau-bench airline failures: which runs, and which half each is in.

Drawn once, before any run was read or labelled (``benchmarks/data/README.md``):

- the population: the reward-0 records of ``../shared/data/tau_bench_airline_gpt4o/gpt-4o-airline.json``
  (116 of 200), as ``(task_id, trial)`` sorted;
- the sample: ``random.Random(SEED).sample(population, 40)`` with ``SEED = 13`` (issue 13);
- the halves, by task so that no task sits in both: the sample's distinct task ids ordered by the SHA-1 of
  ``str(task_id)``, walked in that order, each task's sampled runs going to ``tune`` while ``tune`` holds fewer
  than 20 runs, the rest to ``test``.

A second, fresh blind set (``test2``, drawn after the first sample's test half had been scored once): the
reward-0 records of the tasks in neither half of the first sample, all of them if there are at most
``SIZE`` (there are 28, of 13 tasks), else ``random.Random(SEED).sample`` of ``SIZE`` of them.

A third blind set (``test3``, drawn after test2 had been scored once): the reward-0 records in neither the
first sample nor test2, all of them if there are at most ``TEST3_SIZE`` (there are 48: the other trials of the
first sample's 27 tasks, so every test3 task also has runs in ``tune`` or ``test``), else
``random.Random(SEED).sample`` of ``TEST3_SIZE`` of them.

    python benchmarks/tau_dev_sample.py [--data FILE]            # one JSON line per sampled run
    python benchmarks/tau_dev_sample.py --test2 [--data FILE]    # one JSON line per test2 run
    python benchmarks/tau_dev_sample.py --test3 [--data FILE]    # one JSON line per test3 run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path

SEED = 13
SIZE = 40
TUNE = 20
TEST3_SIZE = 60
DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "tau_bench_airline_gpt4o"
DATA = DATA / "gpt-4o-airline.json"


def sample(records: list[dict]) -> list[dict]:
    """``[{"task_id", "trial", "half"}]`` for the sampled runs, in sample order."""
    population = sorted((r["task_id"], r["trial"]) for r in records if not r.get("reward"))
    if len(population) < SIZE:
        raise ValueError(f"{len(population)} reward-0 records, fewer than the sample's {SIZE}")
    drawn = random.Random(SEED).sample(population, SIZE)
    tasks = sorted({t for t, _ in drawn}, key=lambda t: hashlib.sha1(str(t).encode()).hexdigest())
    half: dict[int, str] = {}
    tune = 0
    for t in tasks:
        n = sum(1 for x, _ in drawn if x == t)
        half[t] = "tune" if tune < TUNE else "test"
        tune += n if half[t] == "tune" else 0
    return [{"task_id": t, "trial": k, "half": half[t]} for t, k in drawn]


def test2(records: list[dict]) -> list[dict]:
    """``[{"task_id", "trial", "half": "test2"}]``: the reward-0 runs of tasks the first sample left out."""
    seen = {r["task_id"] for r in sample(records)}
    population = sorted((r["task_id"], r["trial"]) for r in records if not r.get("reward") and r["task_id"] not in seen)
    if len(population) > SIZE:
        population = sorted(random.Random(SEED).sample(population, SIZE))
    return [{"task_id": t, "trial": k, "half": "test2"} for t, k in population]


def test3(records: list[dict]) -> list[dict]:
    """``[{"task_id", "trial", "half": "test3"}]``: the reward-0 runs in neither the first sample nor test2."""
    seen = {(r["task_id"], r["trial"]) for r in sample(records) + test2(records)}
    population = sorted((r["task_id"], r["trial"]) for r in records if not r.get("reward"))
    population = [x for x in population if x not in seen]
    if len(population) > TEST3_SIZE:
        population = sorted(random.Random(SEED).sample(population, TEST3_SIZE))
    return [{"task_id": t, "trial": k, "half": "test3"} for t, k in population]


def main() -> int:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--data", type=Path, default=DATA, help="tau-bench's gpt-4o-airline.json")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--test2", action="store_true", help="the second blind set (tasks in neither first half)")
    which.add_argument("--test3", action="store_true", help="the third blind set (runs in neither sample)")
    args = ap.parse_args()
    try:
        records = json.loads(args.data.read_text())
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError("not a JSON list of tau-bench records")
        rows = test2(records) if args.test2 else test3(records) if args.test3 else sample(records)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        print(f"error: {args.data}: {e}", file=sys.stderr)
        return 2
    try:
        for r in rows:
            print(json.dumps(r))
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head -1`: the reader left; nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        return 141
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main())
