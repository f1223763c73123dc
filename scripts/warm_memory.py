"""A warm fork server's memory: its resident set and what its sandbox's cgroup is charged.

    .venv/bin/python scripts/warm_memory.py [--rollouts 16]

Starts one warm worker (bwrap) on the package's seed harness, the synthetic environment and the scripted
model, runs one rollout and then ``--rollouts`` more on it, and prints the server's ``/proc`` figures after
each (VmRSS, VmHWM, anonymous and file-backed resident memory, Pss) and, where the sandbox has a memory
cgroup (root), its usage and peak. The cgroup is charged the server's anonymous memory and its children's;
file pages (the interpreter, shared libraries) are shared with every other Python on the machine.
docs/sandbox.md quotes these figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def _descendants(pid: int) -> list[int]:
    out = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            kids = open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:
            continue
        for kid in kids:
            out += _descendants(int(kid))
    return out


def _mib(kb_field: str) -> float:
    return int(kb_field.split()[0]) / 1024


def _process(pid: int) -> str:
    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    rollup = dict(line.split(":", 1) for line in open(f"/proc/{pid}/smaps_rollup").read().splitlines()[1:])
    return (f"VmRSS {_mib(status['VmRSS']):.1f} MiB (anon {_mib(status['RssAnon']):.1f}, file "
            f"{_mib(status['RssFile']):.1f}), VmHWM {_mib(status['VmHWM']):.1f} MiB, Pss {_mib(rollup['Pss']):.1f} MiB")


def _cgroup(cg) -> str:
    if cg is None:
        return "no memory cgroup (not root, or none could be made)"
    if cg.version == "v2":
        d, now, peak = cg.dirs[""], "memory.current", "memory.peak"
    else:
        d, now, peak = cg.dirs["memory"], "memory.usage_in_bytes", "memory.max_usage_in_bytes"
    figures = []
    for name in (now, peak):
        try:
            figures.append(f"{int((d / name).read_text()) / 2**20:.1f} MiB")
        except OSError:
            figures.append("-")
    return f"cgroup usage {figures[0]}, peak {figures[1]}"


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--rollouts", type=int, default=16, help="rollouts after the first (default 16)")
    args = ap.parse_args(argv)
    if args.rollouts < 1:
        print("error: --rollouts must be >= 1", file=sys.stderr)
        return 2
    from evoharness.envs import get_environment
    from evoharness.harness_repo.init import init_harness
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.sandbox.bwrap import BwrapSandbox
    from evoharness.sandbox.executor import LocalExecutor

    with tempfile.TemporaryDirectory(prefix="warm-memory-") as tmp:
        repo = init_harness(Path(tmp) / "h")
        tasks = get_environment("synthetic").list_tasks("dev")
        reqs = [RolloutRequest(task_id=tasks[i % len(tasks)].id, harness_commit=repo.main_head(), seed=i)
                for i in range(args.rollouts + 1)]
        with LocalExecutor(repo.path, "synthetic", "scripted:weak", sandbox=BwrapSandbox(), workers=1,
                           batch_size=8) as ex:
            for when, batch in (("after 1 rollout", reqs[:1]), (f"after {len(reqs)} rollouts", reqs[1:])):
                ex.run(batch)
                (worker,) = ex._pool._idle
                server = _descendants(worker.live.proc.pid)[-1]  # bwrap, bwrap (the namespace's init), the server
                cg = getattr(worker.live._limit_hit, "__self__", None)
                print(f"{when}: server {_process(server)}; {_cgroup(cg)}")
            print(f"warm worker starts: {ex.warm_starts}")
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main())
