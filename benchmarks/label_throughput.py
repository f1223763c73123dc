"""Import + label throughput on the tau-bench file replicated to >= 10,000 trajectories.

Prints the CPU seconds of a plain ``json.loads`` of the file, of the same parse record by record
(``ArrayRecords``: the stdlib's C scanner, one list element at a time, what the importer reads
with), and of importing + labelling the same file, and the ratios of the last to the first two
(target <= 1.5x against ``json.loads``), min / median / max over ``--repeat`` rounds, the three
run in turn. All start from the file on disk with nothing else alive in the process (the
replicated records are written straight to the file, never held): a parse timed while other
large objects are alive is slowed by the garbage collector walking them, which flatters the
ratio. A whole-file ``json.loads`` also pays that collector on its own growing result (about a
quarter of its time here) and cache misses on a large heap, so the record-by-record parse costs
about half of it: the second ratio is what importing and labelling cost over parsing alone.
The copies share their system prompt, as the 200 original records already do (the labeller reads
a system prompt's policy once); no other content is cached across trajectories.

    python benchmarks/label_throughput.py [--copies 50] [--data PATH] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, cpu_seconds, load_note, spread
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths
from evoharness.traces.importers.jsonstream import ArrayRecords

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


def replicate(src: Path, dst: Path, copies: int) -> int:
    """Write ``copies`` x the records of ``src`` to ``dst`` as one JSON list; returns the count."""
    records = json.loads(src.read_text())
    n = 0
    with dst.open("w") as fh:
        fh.write("[")
        for c in range(copies):
            for r in records:
                fh.write(("," if n else "") + json.dumps({**r, "trial": c * 10 + r.get("trial", 0)}))
                n += 1
        fh.write("]")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=50, help="replicate the 200 records this many times")
    ap.add_argument("--data", type=Path, default=DEFAULT)
    add_repeat(ap)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if args.copies < 1:
        ap.error("--copies must be at least 1")

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "replicated.json"
        n = replicate(args.data, path, args.copies)
        size = path.stat().st_size
        labeller = Labeller()

        def parse() -> None:
            json.loads(path.read_bytes())

        def parse_records() -> None:
            for _ in ArrayRecords(path):
                pass

        def import_and_label() -> None:
            for t in load_paths([path]):
                labeller.label(t)

        t_json, t_rec, t_full = [], [], []
        for _ in range(args.repeat):  # the three in turn
            t_json.append(cpu_seconds(parse))
            t_rec.append(cpu_seconds(parse_records))
            t_full.append(cpu_seconds(import_and_label))
    ratios = [b / a for a, b in zip(t_json, t_full, strict=True)]
    ratios_rec = [b / a for a, b in zip(t_rec, t_full, strict=True)]
    print(f"trajectories:                {n}  ({size / 1e6:.1f} MB; {load_note()})")
    print(f"json.loads (CPU s):          {spread(t_json)}")
    print(f"record-by-record parse:      {spread(t_rec)}")
    print(f"import + label (CPU s):      {spread(t_full)}")
    print(f"throughput:                  {spread([n / t for t in t_full], ',.0f')} trajectories per CPU-second")
    print(f"ratio to json.loads:         {spread(ratios, '.2f', 'x')} (target <= 1.5x), over {args.repeat} rounds")
    print(f"ratio to the record parse:   {spread(ratios_rec, '.2f', 'x')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
