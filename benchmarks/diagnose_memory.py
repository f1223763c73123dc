"""Peak memory of `evoharness diagnose --json` as the number of trajectories grows.

Replicates the tau-bench file (200 real records) into one JSON list of N trajectories for each
``--n``, runs ``python -m evoharness diagnose FILE --json > /dev/null`` in a fresh process and
reads that process's own peak RSS (``os.wait4``). Streaming diagnosis keeps the peak flat in N
(target: 100,000 trajectories in < 200 MiB). ``--repeat`` runs each size that many times, the
sizes in turn.

    python benchmarks/diagnose_memory.py [--n 1000 10000 100000] [--repeat 1] [--data PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from label_throughput import DEFAULT, replicate  # noqa: E402


def peak_mib(args: list[str]) -> tuple[float, float, int]:
    """(peak RSS MiB, CPU seconds, exit status) of one child process."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, proc.returncode


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10_000, 100_000], help="trajectories per file")
    ap.add_argument("--data", type=Path, default=DEFAULT)
    add_repeat(ap, default=1)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    per_copy = 200
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for n in args.n:
            files[n] = Path(d) / f"tau-{n}.json"
            replicate(args.data, files[n], max(1, n // per_copy))
        peaks: dict[int, list[float]] = {n: [] for n in args.n}
        cpu: dict[int, list[float]] = {n: [] for n in args.n}
        for _ in range(args.repeat):
            for n in args.n:
                mib, secs, _ = peak_mib([sys.executable, "-m", "evoharness", "diagnose", str(files[n]), "--json"])
                peaks[n].append(mib)
                cpu[n].append(secs)
        sizes = {n: files[n].stat().st_size / 2**20 for n in args.n}
    print(f"diagnose --json, peak RSS of the process ({load_note()})")
    for n in args.n:
        print(f"  {n:>7} trajectories ({sizes[n]:7.0f} MiB file): peak {spread(peaks[n], '.0f', ' MiB')}; "
              f"CPU {spread(cpu[n], '.1f', ' s')}")
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
