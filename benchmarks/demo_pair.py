"""The demo pair: ``evoharness demo`` with warm workers against ``--set sandbox.warm=false``, in turn.

Runs ``evoharness demo`` (3 rounds, synthetic, ``standin:weak``, bwrap) once per configuration and repeat,
the configurations in turn (warm, cold, warm, cold, ...), each in a fresh output directory, and prints per
configuration the wall seconds and the CPU seconds of the whole run (the demo process and every process it
started: the sandboxes, their fork servers and forked rollouts, git; counted in a cgroup of the run's own
where one can be made, as root, else the rusage of the processes waited for, a lower bound), min / median /
max over ``--repeat``, then the ratios to the first configuration, run by run (the issue's target: cold /
warm >= 3x), and the machine's load.

It also checks that every run decided the same: the demo's printed report (composition, anchors, merges,
rejections, budget) and its ``summary.json`` with commit hashes, verdict signatures, run ids, paths and
times masked (commits differ by their timestamps, and the signatures with them), and the multiset of
trajectories (task, split, seed, score, termination, answer, number of messages). A run that differs is
named and the script exits 1.

    python benchmarks/demo_pair.py [--repeat 3] [--rounds 3] [--configs warm cold [batch] [commit] [rollout]]
        [--keep DIR] [--set KEY=VALUE ...]

Configurations: ``warm`` (the defaults: warm workers, one forked child per batch), ``cold`` (``sandbox.warm =
false``: one sandboxed process per batch, the shape before warm workers), ``batch`` (``sandbox.warm_fork =
"batch"`` set explicitly: the default), ``commit`` (opt-in: a child per commit a worker serves, kept across that
commit's batches: ``sandbox.warm_fork = "commit"``), ``rollout`` (a child per rollout: ``sandbox.warm_fork =
"rollout"``).
Needs bubblewrap; takes 1-3 minutes a run on 2 cores.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evoharness.benchrepeat import add_repeat, check_repeat, load_note, same_checkout, spread

CONFIGS = {"warm": [], "cold": ["--set", "sandbox.warm=false"], "batch": ["--set", "sandbox.warm_fork=batch"],
           "commit": ["--set", "sandbox.warm_fork=commit"], "rollout": ["--set", "sandbox.warm_fork=rollout"]}
_MASK = [(re.compile(r"\b[0-9a-f]{10,64}\b"), "<hex>"), (re.compile(r"run-[0-9a-f]+"), "run-<id>"),
         (re.compile(r"(/[^\s\"']+)+"), "<path>"), (re.compile(r"\[\s*[0-9.]+s\]"), "[t]")]
_TIMED = ("time", "wall", "seconds", "_at", "elapsed", "duration")


def _mask(text: str) -> str:
    for pattern, repl in _MASK:
        text = pattern.sub(repl, text)
    return text


def _strip(x: object) -> object:
    """``summary.json`` without times (keys naming one); strings masked."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in sorted(x.items()) if not any(t in k for t in _TIMED)}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return _mask(x) if isinstance(x, str) else x


def _decisions(out: Path, stdout: str) -> dict:
    skip = ("summary:", "next:", "report <path>", "review --harness", "--resume", "activate")
    report = "\n".join(line for line in _mask(stdout).splitlines() if line.strip() and not any(w in line for w in skip))
    summary = _strip(json.loads((out / "summary.json").read_text()))
    trajs: collections.Counter = collections.Counter()
    for path in (out / "state" / "runs").glob("*/trajectories.jsonl"):
        with path.open() as fh:
            for line in fh:
                t = json.loads(line)
                trajs[(t.get("task_id"), t.get("split"), t.get("meta", {}).get("seed"), t.get("score"),
                       t.get("termination"), json.dumps(t.get("final_answer")), len(t.get("messages", [])))] += 1
    return {"report": report, "summary": summary, "trajectories": sorted(trajs.items(), key=repr)}


class _Cgroup:
    """A CPU-accounting cgroup of its own for one run (v1 ``cpuacct`` or v2), so that the CPU of every process
    the demo starts counts, those killed before they waited for theirs too (a warm worker's sandbox is killed
    at the end: rusage would lose its fork server and children). None where none can be made (not root)."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    @classmethod
    def make(cls, name: str) -> _Cgroup | None:
        for root, v2 in ((Path("/sys/fs/cgroup/cpuacct"), False), (Path("/sys/fs/cgroup"), True)):
            if v2 and not (root / "cgroup.controllers").exists():
                continue
            try:
                path = root / name
                path.mkdir()
                return cls(path, v2)
            except OSError:
                continue
        return None

    def join(self) -> None:  # in the child, before exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def cpu_seconds(self) -> float:
        if self.v2:
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:  # processes still leaving
                time.sleep(0.1)


def _run(cmd: list[str], out: Path) -> tuple[float, float, str, str]:
    """Wall and CPU seconds of one demo, how its CPU was counted, and its stdout."""
    group = _Cgroup.make(f"evoharness-demo-pair-{os.getpid()}-{out.name}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        proc = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True,
                              preexec_fn=group.join if group else None)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = group.cpu_seconds() if group else after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    finally:
        if group:
            group.remove()
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    return wall, cpu, "cgroup" if group else "rusage of waited-for processes (a lower bound)", proc.stdout


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    add_repeat(ap, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="the demo's round limit (default 3)")
    ap.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["warm", "cold"],
                    help="configurations, run in this order within each repeat (default: warm cold)")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for every run (evoharness --set), e.g. to run another tree's code")
    ap.add_argument("--keep", type=Path, default=None, help="keep the demos' output directories under DIR")
    args = ap.parse_args(argv)
    check_repeat(ap, args.repeat)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    root = args.keep or Path(tempfile.mkdtemp(prefix="evoharness-demo-pair-"))
    root.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "evoharness", *[a for kv in args.settings for a in ("--set", kv)]]
    walls: dict[str, list[float]] = {c: [] for c in args.configs}
    cpus: dict[str, list[float]] = {c: [] for c in args.configs}
    first: dict | None = None
    differ: list[str] = []
    loads = [load_note()]
    for r in range(args.repeat):
        for c in args.configs:
            out = root / f"{c}-{r}"
            wall, cpu, how, stdout = _run([*base, *CONFIGS[c], "demo", "--rounds", str(args.rounds)], out)
            walls[c].append(wall)
            cpus[c].append(cpu)
            (out / "demo.stdout").write_text(stdout)
            got = _decisions(out, stdout)
            if first is None:
                first = got
            elif got != first:
                differ.append(f"{c} #{r + 1}: " + ", ".join(k for k in got if got[k] != first[k]))
            print(f"  {c} #{r + 1}: wall {wall:.1f} s, CPU {cpu:.1f} s ({load_note()})", flush=True)
        loads.append(load_note())
    print(f"evoharness demo --rounds {args.rounds}, {args.repeat} repeat(s), configurations in turn: "
          f"{' '.join(args.configs)}")
    print(f"  load before: {loads[0]}; after: {loads[-1]}; CPU counted by {how}")
    for c in args.configs:
        print(f"  {c:8} wall: {spread(walls[c], '.1f', ' s')}   CPU: {spread(cpus[c], '.1f', ' s')}")
    ref = args.configs[0]
    for c in args.configs[1:]:
        w = [b / a for a, b in zip(walls[ref], walls[c], strict=True)]
        u = [b / a for a, b in zip(cpus[ref], cpus[c], strict=True)]
        print(f"  {c} / {ref}, pair by pair: wall {spread(w, '.2f', 'x')}   CPU {spread(u, '.2f', 'x')}")
    if differ:
        print("decisions differ from the first run: " + "; ".join(differ))
        return 1
    n = sum(len(v) for v in walls.values())
    trajs = sum(count for _, count in first["trajectories"]) if first else 0
    print(f"  decisions: identical in all {n} runs (report, summary.json, the multiset of {trajs} trajectories)")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
