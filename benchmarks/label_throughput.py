"""Import + label throughput on the tau-bench file replicated to >= 10,000 trajectories.

Prints trajectories/s and the ratio of (import + label) time to a plain ``json.loads``
of the same bytes. Target: ratio <= 3.

    python benchmarks/label_throughput.py [--copies 50] [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--copies", type=int, default=50, help="replicate the 200 records this many times")
    ap.add_argument("--data", type=Path, default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    args = ap.parse_args()

    records = json.loads(args.data.read_text())
    big = []
    for c in range(args.copies):
        for r in records:
            big.append({**r, "trial": c * 10 + r.get("trial", 0)})
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "replicated.json"
        path.write_text(json.dumps(big))
        raw = path.read_bytes()
        t_json = min(_time(lambda: json.loads(raw)) for _ in range(args.repeat))
        labeller = Labeller()

        def run() -> int:
            return sum(1 for t in load_paths([path]) if labeller.label(t))

        t_full = min(_time(run) for _ in range(args.repeat))
    n = len(big)
    print(f"trajectories:            {n}")
    print(f"bytes:                   {len(raw) / 1e6:.1f} MB")
    print(f"json.loads:              {t_json:.3f} s")
    print(f"import + label:          {t_full:.3f} s")
    print(f"throughput:              {n / t_full:,.0f} trajectories/s")
    print(f"ratio to json.loads:     {t_full / t_json:.2f}x (target <= 3x)")


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
