"""The blind dev-labelled sample of failed SWE-bench runs: which runs, and which half each is in.

Fixed before any run was read or labelled (``benchmarks/data/README.md``):

- the population: the mini-swe-agent runs in ``../shared/data/mini_swe_agent_sample`` whose own evaluation
  report (``logs/<id>/report.json``) says ``"resolved": false`` (10 of its 20; mini-swe-agent v1.15 + Gemini 3
  Pro on SWE-bench Verified, a public results fork of SWE-agent/mini-swe-agent, MIT);
- all of them are labelled (there are no more than ``SIZE``);
- the halves, by instance: the instance ids ordered by the SHA-1 of the id, the first half (rounded down) ``tune``,
  the rest ``test``.

    python benchmarks/swe_dev_sample.py [--data DIR]    # one JSON line per sampled run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

SIZE = 40
DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mini_swe_agent_sample"


def failed_runs(data: Path) -> list[str]:
    """The instance ids under ``data/logs`` whose ``report.json`` says ``resolved`` false, sorted."""
    logs = data / "logs"
    if not logs.is_dir():
        raise ValueError(f"no logs/ folder in {data}")
    out = []
    for report in sorted(logs.glob("*/report.json")):
        try:
            r = json.loads(report.read_text())
        except (OSError, ValueError, RecursionError) as e:
            raise ValueError(f"{report}: not a readable JSON report ({e})") from None
        if isinstance(r, dict) and isinstance(r.get(report.parent.name), dict):
            r = r[report.parent.name]  # the SWE-bench harness's layout: {instance_id: {...}}
        if not isinstance(r, dict) or not isinstance(r.get("resolved"), bool):
            raise ValueError(f"{report}: no boolean 'resolved'")
        if r["resolved"] is False and (data / "trajs" / report.parent.name).is_dir():
            out.append(report.parent.name)
    return out


def sample(ids: list[str]) -> list[dict]:
    """``[{"instance_id", "half"}]`` in SHA-1 order: the first half ``tune``, the rest ``test``."""
    if len(ids) > SIZE:
        raise ValueError(f"{len(ids)} failed runs, more than the sample's {SIZE}: draw a sample first")
    order = sorted(ids, key=lambda i: hashlib.sha1(i.encode()).hexdigest())
    return [{"instance_id": i, "half": "tune" if k < len(order) // 2 else "test"} for k, i in enumerate(order)]


def main() -> int:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--data", type=Path, default=DATA, help="the mini-swe-agent sample (trajs/, logs/)")
    args = ap.parse_args()
    try:
        rows = sample(failed_runs(args.data))
    except (OSError, ValueError, TypeError, RecursionError) as e:
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
