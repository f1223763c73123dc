"""Peak memory and CPU of `import` / `diagnose` / `label` over many runs of the formats read one file per run.

For each ``--format`` (agentrx-tau, swe-agent, mini-swe-agent) and each ``--n`` it writes a folder of N copies
of the format's test fixture, laid out as the format's own tools write it, results beside them:

- agentrx-tau: ``data/tau_dataset/<i>.json`` and ``data/ground_truth/tau_ground_truth.json`` (a third labelled);
- swe-agent: ``trajs/<id>.traj`` and SWE-bench/experiments' ``results/results.json`` (half resolved);
- mini-swe-agent (v2, tool calls): ``<id>/<id>.traj.json`` and an sb-cli report in ``sb-cli-reports/``;

and, with ``--list``, one JSON list of N agentrx-tau records (the single-file form that format accepts). Each
command runs in a fresh process (``python -m evoharness ...``); its peak RSS and CPU seconds come from
``os.wait4``. Beside it a fresh process reads and ``json.loads`` the same files (the floor: any importer
parses every byte), and the ratio of the two CPU figures is printed (both include interpreter start-up,
which dominates at small N; the marginal cost per run between two sizes, printed last, cancels it). The
commands start 2 s after the folder was written (``dirscan.SETTLED_NS``: a folder changed within that is
listed afresh for every run in it, as it must be while it is written). ``--repeat`` runs each command that
many times, in turn with its baseline.

    python benchmarks/import_scale.py [--format agentrx-tau swe-agent mini-swe-agent] [--n 100 1000 10000]
        [--command import diagnose label] [--list] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread
from evoharness.traces.importers import dirscan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnose_memory import peak_mib  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "traces"
FORMATS = ("agentrx-tau", "swe-agent", "mini-swe-agent")
COMMANDS = ("import", "diagnose", "label")

BASELINE = """
import json, sys
from pathlib import Path
for line in Path(sys.argv[1]).read_text().splitlines():
    json.loads(Path(line).read_bytes())
"""


def write_folder(fmt: str, n: int, root: Path) -> tuple[Path, list[Path]]:
    """A folder of ``n`` runs of ``fmt`` (see the module docstring); (what to import, the run files)."""
    files: list[Path] = []
    if fmt == "agentrx-tau":
        rec = json.loads((FIXTURES / "agentrx_tau" / "tau_dataset" / "2.json").read_text())
        truth = json.loads((FIXTURES / "agentrx_tau" / "ground_truth" / "tau_ground_truth.json").read_text())
        runs = root / "data" / "tau_dataset"
        runs.mkdir(parents=True)
        (root / "data" / "ground_truth").mkdir()
        for i in range(n):
            files.append(runs / f"{i}.json")
            files[-1].write_text(json.dumps({**rec, "task_id": i}))
        (root / "data" / "ground_truth" / "tau_ground_truth.json").write_text(
            json.dumps([{**truth[0], "trajectory_id": str(i)} for i in range(0, n, 3)]))
        return runs, files
    ids = [f"proj__proj-{i}" for i in range(n)]
    if fmt == "swe-agent":
        runs = root / "trajs"
        runs.mkdir(parents=True)
        for i in ids:
            files.append(runs / f"{i}.traj")
            shutil.copyfile(FIXTURES / "swe_agent" / "experiments" / "trajs" / "django__django-11477.traj", files[-1])
        (root / "results").mkdir()
        (root / "results" / "results.json").write_text(
            json.dumps({"generated": ids, "applied": ids, "resolved": ids[::2]}))
        return runs, files
    src = FIXTURES / "mini_swe_v2" / "toolcall" / "django__django-11477" / "django__django-11477.traj.json"
    data = json.loads(src.read_text())
    for i in ids:
        (root / i).mkdir(parents=True)
        files.append(root / i / f"{i}.traj.json")
        files[-1].write_text(json.dumps({**data, "instance_id": i}))
    (root / "sb-cli-reports").mkdir()
    (root / "sb-cli-reports" / "verified__test__bench.json").write_text(
        json.dumps({"total_instances": n, "resolved_ids": ids[::2], "unresolved_ids": ids[1::2]}))
    return root, files


def write_list(n: int, path: Path) -> None:
    """One JSON list of ``n`` AgentRx tau-bench records."""
    rec = json.loads((FIXTURES / "agentrx_tau" / "tau_dataset" / "2.json").read_text())
    with path.open("w") as fh:
        fh.write("[")
        for i in range(n):
            fh.write(("," if i else "") + json.dumps({**rec, "task_id": i}))
        fh.write("]")


def command_args(command: str, target: Path, out: Path) -> list[str]:
    args = [sys.executable, "-m", "evoharness", command, str(target)]
    if command == "import":
        return [*args, "--out", str(out / "trajectories.jsonl")]
    if command == "label":
        return [*args, "--out", str(out / "labels.jsonl")]
    return [*args, "--json"]


def write(fmt: str, n: int, root: Path, listing: Path) -> None:
    """``--write``: write the case, its file list to ``listing``; print the target and the MiB written."""
    if fmt.endswith(" list"):
        root.mkdir()
        target, files = root / "runs.json", [root / "runs.json"]
        write_list(n, target)
    else:
        target, files = write_folder(fmt, n, root)
    listing.write_text("\n".join(map(str, files)))
    print(target, sum(f.stat().st_size for f in files) / 2**20)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--write"]:
        write(argv[1], int(argv[2]), Path(argv[3]), Path(argv[4]))
        return 0
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--format", nargs="+", choices=FORMATS, default=list(FORMATS), dest="formats")
    ap.add_argument("--n", type=int, nargs="+", default=[100, 1000, 10_000], help="runs per folder")
    ap.add_argument("--command", nargs="+", choices=COMMANDS, default=list(COMMANDS), dest="commands")
    ap.add_argument("--list", action="store_true", help="also one JSON list of N agentrx-tau records")
    add_repeat(ap, default=1)
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if any(n < 1 for n in args.n):
        ap.error("--n must be at least 1")
    print(f"peak RSS and CPU of a fresh process per command ({load_note()})")
    cases = [(fmt, n) for fmt in args.formats for n in args.n] + ([("agentrx-tau list", n) for n in args.n]
                                                                   if args.list else [])
    least: dict[tuple[str, str], dict[int, float]] = {}  # (format, command or json.loads) -> n -> min CPU-s
    for fmt, n in cases:
        with tempfile.TemporaryDirectory(prefix="import-scale-") as tmp:
            root, out, listing = Path(tmp) / "in", Path(tmp) / "out", Path(tmp) / "files.txt"
            out.mkdir()
            # written by a child: a parent that held N paths would lend its resident pages to every command's
            # peak (the fork before exec counts in the child's ru_maxrss)
            written = subprocess.run([sys.executable, __file__, "--write", fmt, str(n), str(root), str(listing)],
                                     check=True, capture_output=True, text=True).stdout.split()
            target, size = Path(written[0]), float(written[1])
            time.sleep(dirscan.SETTLED_NS / 1e9)  # a folder written just now is listed afresh per run (dirscan)
            base_cpu: list[float] = []
            results: dict[str, tuple[list[float], list[float]]] = {c: ([], []) for c in args.commands}
            for _ in range(args.repeat):
                base_cpu.append(peak_mib([sys.executable, "-c", BASELINE, str(listing)])[1])
                for c in args.commands:
                    mib, secs, _ = peak_mib(command_args(c, target, out))
                    results[c][0].append(mib)
                    results[c][1].append(secs)
            print(f"  {fmt} x {n} ({size:.0f} MiB): json.loads of the files {spread(base_cpu, '.2f', ' CPU-s')}")
            least.setdefault((fmt, "json.loads"), {})[n] = min(base_cpu)
            for c, (_, cpu) in results.items():
                least.setdefault((fmt, c), {})[n] = min(cpu)
            for c, (peaks, cpu) in results.items():
                ratios = [a / b for a, b in zip(cpu, base_cpu, strict=True)]
                print(f"    {c:<8} peak {spread(peaks, '.0f', ' MiB')}; CPU {spread(cpu, '.2f', ' s')} "
                      f"({1000 * min(cpu) / n:.2f} ms per run); {spread(ratios, '.1f', 'x')} json.loads")
    marginal(least, args.commands)
    return 0


def marginal(least: dict[tuple[str, str], dict[int, float]], commands: list[str]) -> None:
    """Per run between two sizes (start-up cancels out): (CPU at the larger - at the smaller) / (runs added),
    each command's against json.loads's of the same files (min CPU of the repeats)."""
    sizes = sorted({n for per in least.values() for n in per})
    if len(sizes) < 2:
        return
    print("marginal CPU per run between sizes (start-up cancels out)")
    for fmt in dict.fromkeys(f for f, _ in least):
        base = least[(fmt, "json.loads")]
        for a, b in zip(sizes, sizes[1:], strict=False):
            floor = (base[b] - base[a]) / (b - a)
            row = [f"json.loads {1000 * floor:.3f} ms"]
            for c in commands:
                cost = (least[(fmt, c)][b] - least[(fmt, c)][a]) / (b - a)
                row.append(f"{c} {1000 * cost:.2f} ms" + (f" ({cost / floor:.1f}x)" if floor > 0 else ""))
            print(f"  {fmt} {a} -> {b}: " + "; ".join(row))


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
