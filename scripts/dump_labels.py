"""Dump the rule labeller's labels (and each imported trajectory's digest) for every public trace set.

The correctness gate for speed work on the importers and the labeller: run it before and after a
change and diff the two files; they must be byte-identical. Sets: the four public sets in
``../shared/data`` and the vendored fixtures (tests/fixtures/data, tests/fixtures/traces). Each line:
``<file>\t<trajectory digest>\t<label JSON>`` in load order.

    python scripts/dump_labels.py OUT.tsv [--data DIR] [--tuning-only]

``--tuning-only``: leave out the held-out test sets (Who&When Hand-Crafted, AgentRx Magentic-One and tau-bench,
the blind SWE labels' runs: every path holding one of ``HELD_OUT``), so a rule change is checked before/after
without running the labeller on them; the lead's final byte-identity check runs without it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from evoharness.benchrepeat import same_checkout
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import iter_files, load_file

ROOT = Path(__file__).resolve().parents[1]
SETS = ("tau_bench_airline_gpt4o", "mini_swe_agent_sample", "who_and_when", "agentrx_magentic_one")
HELD_OUT = ("Hand-Crafted", "agentrx_magentic_one", "agentrx_tau", "swe_blind2")


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("out", type=Path)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--tuning-only", action="store_true",
                    help="leave out the held-out test sets (paths holding " + ", ".join(HELD_OUT) + ")")
    args = ap.parse_args(argv)
    fixtures = ROOT / "tests" / "fixtures"
    roots = [args.data / s for s in SETS] + [fixtures / "data", fixtures / "traces"]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        print(f"error: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not args.out.parent.is_dir():
        print(f"error: {args.out}: no directory {args.out.parent}", file=sys.stderr)
        return 2
    labeller = Labeller()
    n = skipped = 0
    with args.out.open("w") as out:
        for f in iter_files(roots):
            rel = f.relative_to(args.data) if f.is_relative_to(args.data) else f.relative_to(ROOT)
            if args.tuning_only and any(h in str(rel) for h in HELD_OUT):
                continue
            try:
                trajs = list(load_file(f))
            except Exception as e:  # noqa: BLE001 -- a file no importer reads is recorded, not fatal
                out.write(f"{rel}\tunreadable\t{type(e).__name__}: {e}\n")
                skipped += 1
                continue
            for t in trajs:
                # the repository's own path (a fixture's source file in ``meta``) is left out
                dumped = t.model_dump_json().replace(str(ROOT), "<repo>")
                digest = hashlib.sha256(dumped.encode()).hexdigest()[:16]
                label = labeller.label(t).model_dump_json().replace(str(ROOT), "<repo>")
                out.write(f"{rel}\t{digest}\t{label}\n")
                n += 1
    print(f"{n} labels, {skipped} unreadable files -> {args.out}")
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
