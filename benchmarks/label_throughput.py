"""Import + label throughput on the tau-bench file replicated to >= 10,000 trajectories.

Prints the CPU seconds of a plain JSON parse of the records (``json.loads``, and ``orjson.loads``), of the
replicated file read record by record (``ArrayRecords``, what the importer reads with: pydantic-core's jiter
element by element for an indented list like this one, the stdlib's C scanner otherwise), and of importing +
labelling the replicated file, and the ratios of the last to the others (targets: <= 3x and <= 1.5x against
``json.loads``), min / median / max over ``--repeat`` rounds, the four run in turn. All start from files on
disk with nothing else alive in the process (the replicated records are written straight to the files, never
held): a parse timed while other large objects are alive is slowed by the garbage collector walking them.

The plain parse reads the records as the ``--data`` file holds them: one copy's list (200 records, 4 MB) at a
time, each parsed and dropped, ``--copies`` lists in all. Importing and labelling streams (a batch of 16
runs alive at a time: ``Labeller.labelled``, as ``evoharness label`` labels), and so does this parse; one
``json.loads`` of the whole replicated file (printed too, as "whole-file")
also pays the collector walking its own growing result, ~80 of its ~180 microseconds a record at 50 copies
(2026-12-05), so a ratio to it falls with ``--copies`` (1.8x at 50, 2.6x at 10, 3.4x at 1 on one tree) while
the work per record does not change: it measured the size of the file, not the labeller. ``--instructions``
counts the same per-copy parse. What still separates the CPU ratio from the instruction ratio is cycles per
instruction: import + label runs the interpreter, a regex engine and pydantic-core, with (cachegrind's
simulation, per 200 records) ~6.6x the branch mispredictions and ~5x the first-level data-cache misses of
``json.loads`` for ~2.9x its instructions, so its CPU ratio is ~1.2x its instruction ratio.
The copies share their system prompt, as the 200 original records already do (the labeller reads
a system prompt's policy once); no other content is cached across trajectories.

``--instructions`` adds the load-free figure: instructions (``valgrind --tool=cachegrind``, which must
be installed) of ``json.loads``, ``orjson.loads`` and import + label of the ``--data`` file itself (not
the copies: valgrind runs ~50x slower), each in a fresh process with ``PYTHONHASHSEED=0``, as a
process doing it twice less one doing it once (start-up, imports and first-call set-up cancel).

    python benchmarks/label_throughput.py [--copies 50] [--data PATH] [--repeat 3] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

from evoharness.benchrepeat import add_repeat, check_repeat, cpu_seconds, load_note, same_checkout, spread
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from evoharness.traces.importers.jsonstream import ArrayRecords

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


def replicate(src: Path, dst: Path, copies: int, parts: Path | None = None) -> int:
    """Write ``copies`` x the records of ``src`` to ``dst`` as one JSON list laid out as tau-bench writes
    its results (``json.dump(records, f, indent=2)``, byte for byte); returns the count. With ``parts``
    (a directory), each copy's records are also written there as a list of their own, the same bytes
    (``0.json``, ``1.json``, ...): what the plain parse reads."""
    records = json.loads(src.read_text())
    n = 0
    with dst.open("w") as fh:
        fh.write("[")
        for c in range(copies):
            texts = []
            for r in records:
                text = json.dumps({**r, "trial": c * 10 + r.get("trial", 0)}, indent=2).replace("\n", "\n  ")
                fh.write(("," if n else "") + "\n  " + text)
                texts.append("\n  " + text)
                n += 1
            if parts is not None:
                (parts / f"{c}.json").write_text("[" + ",".join(texts) + "\n]")
        fh.write("\n]")
    return n


WORK = ("json.loads", "orjson.loads", "import + label")


def _work(name: str, path: Path, passes: int) -> None:
    """``--child``: do one of ``WORK`` on ``path`` ``passes`` times (measured from outside)."""
    labeller = Labeller()
    for _ in range(passes):
        if name == "json.loads":
            json.loads(path.read_bytes())
        elif name == "orjson.loads":
            orjson.loads(path.read_bytes())
        else:
            for _ in labeller.labelled(load_paths([path])):  # as `evoharness label` and `diagnose --json` do
                pass


def _instructions(name: str, path: Path, passes: int) -> int:
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, __file__, "--child", name, str(path), str(passes)],
                         env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or not found:
        sys.exit(f"error: valgrind on {name} failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return int(found.group(1).replace(",", ""))


def instruction_figures(path: Path) -> dict[str, int]:
    """Instructions of one pass of each of ``WORK`` on ``path`` (two passes less one)."""
    return {name: _instructions(name, path, 2) - _instructions(name, path, 1) for name in WORK}


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--copies", type=int, default=50, help="replicate the 200 records this many times")
    ap.add_argument("--data", type=Path, default=DEFAULT)
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions of the --data file with valgrind (load-free)")
    ap.add_argument("--child", nargs=3, metavar=("WORK", "PATH", "PASSES"), help=argparse.SUPPRESS)
    add_repeat(ap)
    args = ap.parse_args(argv)
    if args.child:
        _work(args.child[0], Path(args.child[1]), int(args.child[2]))
        return 0
    check_repeat(ap, args.repeat)
    if args.copies < 1:
        ap.error("--copies must be at least 1")
    if not args.data.is_file():
        ap.error(f"--data {args.data}: no such file")
    try:  # replicate() copies its records with a trial number: a list of objects, or one error line
        records = json.loads(args.data.read_bytes())
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, nested too deeply
        ap.error(f"--data {args.data}: not readable JSON ({type(e).__name__})")
    if not isinstance(records, list) or not records or not all(
            isinstance(r, dict) and type(r.get("trial", 0)) is int for r in records):
        ap.error(f"--data {args.data}: not a JSON list of tau-bench records (objects with an integer trial)")
    del records
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind (not found on PATH)")

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "replicated.json"
        parts = Path(d) / "copies"
        parts.mkdir()
        n = replicate(args.data, path, args.copies, parts)
        size = path.stat().st_size
        copies = [parts / f"{c}.json" for c in range(args.copies)]
        labeller = Labeller()

        def parse() -> None:  # one copy's list at a time, each dropped before the next is read
            for part in copies:
                json.loads(part.read_bytes())

        def parse_orjson() -> None:
            for part in copies:
                orjson.loads(part.read_bytes())

        def parse_whole() -> None:  # the old baseline: one list of every copy, its collector cost included
            json.loads(path.read_bytes())

        def parse_records() -> None:
            for _ in ArrayRecords(path):
                pass

        def import_and_label() -> None:
            for _ in labeller.labelled(load_paths([path])):  # as `evoharness label` and `diagnose --json` do
                pass

        t_json, t_or, t_rec, t_full, t_whole = [], [], [], [], []
        for _ in range(args.repeat):  # in turn
            t_json.append(cpu_seconds(parse))
            t_or.append(cpu_seconds(parse_orjson))
            t_rec.append(cpu_seconds(parse_records))
            t_full.append(cpu_seconds(import_and_label))
            t_whole.append(cpu_seconds(parse_whole))
    ratios = [b / a for a, b in zip(t_json, t_full, strict=True)]
    ratios_or = [b / a for a, b in zip(t_or, t_full, strict=True)]
    ratios_rec = [b / a for a, b in zip(t_rec, t_full, strict=True)]
    ratios_whole = [b / a for a, b in zip(t_whole, t_full, strict=True)]
    print(f"trajectories:                {n}  ({size / 1e6:.1f} MB; {load_note()})")
    print(f"json.loads (CPU s):          {spread(t_json)}  ({args.copies} lists of {n // args.copies}, one at a time)")
    print(f"orjson.loads (CPU s):        {spread(t_or)}")
    print(f"record-by-record parse:      {spread(t_rec)}")
    print(f"import + label (CPU s):      {spread(t_full)}")
    print(f"whole-file json.loads:       {spread(t_whole)}  (one list of {n}: its collector walks the growing result)")
    print(f"throughput:                  {spread([n / t for t in t_full], ',.0f')} trajectories per CPU-second")
    print(f"ratio to json.loads:         {spread(ratios, '.2f', 'x')} (targets <= 3x, <= 1.5x), "
          f"over {args.repeat} rounds")
    print(f"ratio to orjson.loads:       {spread(ratios_or, '.2f', 'x')}")
    print(f"ratio to the record parse:   {spread(ratios_rec, '.2f', 'x')}")
    print(f"ratio to whole-file parse:   {spread(ratios_whole, '.2f', 'x')} (the old figure: falls as --copies grows)")
    if args.instructions:
        ins = instruction_figures(args.data)
        full = ins["import + label"]
        print(f"instructions, {args.data.name} once (valgrind, load-free): "
              + ", ".join(f"{k} {v / 1e6:,.0f} M" for k, v in ins.items()))
        print(f"instruction ratio:           {full / ins['json.loads']:.2f}x json.loads (targets <= 3x, <= 1.5x), "
              f"{full / ins['orjson.loads']:.2f}x orjson.loads")
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
