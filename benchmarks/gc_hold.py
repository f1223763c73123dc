"""The collector under overlapping holds: threads parsing JSON back to back while another thread makes cycles.

``jsontext.collection_held`` (every ``jsontext.loads``: the service's bodies, every importer's line) holds Python's
cyclic collector off process-wide while any thread holds it. ``--threads`` threads call ``jsontext.loads(body,
unique=True)`` (the service's reading; ``--records`` records a body) back to back while one more thread makes
``--cycles`` unreachable self-referencing objects; printed: how many of them were alive at once at the peak
(without threads parsing: ~700, the young generation's threshold), and how many collections ran meanwhile. Each
measurement is a fresh interpreter; with ``--against TREE`` the same measurement of ``TREE``'s evoharness runs in
turn with this checkout's, side by side.

    python benchmarks/gc_hold.py [--threads 2] [--cycles 1000000] [--records 300] [--repeat 3] [--against TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread

ROOT = Path(__file__).resolve().parents[1]


def one(threads: int, cycles: int, records: int) -> dict:
    """One measurement in this interpreter (run in a fresh one by ``measure``)."""
    import gc
    import threading

    from evoharness.traces import jsontext

    body = json.dumps([{"id": f"r{i}", "messages": [{"role": "user", "content": "x" * 20, "k": {"a": 1}}] * 5}
                       for i in range(records)]).encode()
    state = {"live": 0, "peak": 0, "collections": 0, "parses": 0}

    class Cycle:
        def __init__(self) -> None:
            state["live"] += 1
            self.me = self

        def __del__(self) -> None:
            state["live"] -= 1

    def counted(phase: str, info: dict) -> None:
        if phase == "stop":
            state["collections"] += 1

    done = threading.Event()

    def parse() -> None:
        while not done.is_set():
            jsontext.loads(body, unique=True)
            state["parses"] += 1

    def litter() -> None:
        for _ in range(cycles):
            Cycle()
            state["peak"] = max(state["peak"], state["live"])
        done.set()

    gc.callbacks.append(counted)
    parsers = [threading.Thread(target=parse) for _ in range(threads)]
    for t in parsers:
        t.start()
    maker = threading.Thread(target=litter)
    maker.start()
    maker.join()
    for t in parsers:
        t.join()
    gc.callbacks.remove(counted)
    return {"peak": state["peak"], "collections": state["collections"], "parses": state["parses"]}


def measure(tree: Path, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, __file__, "--one", str(args.threads), str(args.cycles), str(args.records)],
                         env=env, capture_output=True, text=True, timeout=1800, check=False)
    if out.returncode:
        sys.exit(f"error: a measurement of {tree} failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.splitlines()[-1])


def main() -> int:
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(*map(int, sys.argv[2:5]))))
        return 0
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--threads", type=int, default=2, help="threads parsing back to back (0: none)")
    ap.add_argument("--cycles", type=int, default=1_000_000, help="unreachable cycles the other thread makes")
    ap.add_argument("--records", type=int, default=300, help="records in the body each parse reads")
    ap.add_argument("--against", type=Path, metavar="TREE", help="also measure TREE's evoharness, in turn")
    add_repeat(ap)
    args = ap.parse_args()
    check_repeat(ap, args.repeat)
    if not (0 <= args.threads <= 64 and args.cycles >= 1 and args.records >= 1):
        ap.error("--threads 0..64, --cycles >= 1, --records >= 1")
    if args.against is not None and not (args.against / "evoharness" / "traces" / "jsontext.py").is_file():
        ap.error(f"--against {args.against}: no evoharness checkout there")
    trees = {"this": ROOT, **({"against": args.against.resolve()} if args.against is not None else {})}
    got: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.repeat):
        for name, tree in trees.items():  # in turn, so load drifts hit them alike
            got[name].append(measure(tree, args))
    print(f"gc_hold: {args.threads} thread(s) parsing {args.records}-record bodies, {args.cycles:,} cycles made, "
          f"{args.repeat} repeat(s) ({load_note()})")
    for name, rs in got.items():
        print(f"  {name} ({trees[name]}): peak alive {spread([r['peak'] for r in rs], ',.0f')}; collections "
              f"{spread([r['collections'] for r in rs], '.0f')}; parses {spread([r['parses'] for r in rs], '.0f')}")
    if "against" in got:
        ratios = [a["peak"] / max(1, b["peak"]) for a, b in zip(got["this"], got["against"], strict=True)]
        print(f"  peak alive, this / against: {spread(ratios, '.2f')}")
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    sys.exit(main())
