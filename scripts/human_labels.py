"""Write the human labels of the public labelled sets as `evoharness calibrate --human` input (JSONL).

One line per labelled trajectory whose humans name a class: ``{"trajectory_id", "failure_class", "step"}``
-- the earliest human failing step (a message index, as `diagnose` counts) and its class under the
documented AgentRx -> F1-F4 crosswalk (evoharness/diagnosis/accuracy.py). Who&When names no class: its
runs are left out (their steps are scored by benchmarks/label_accuracy.py). Every labelled run failed.

    python scripts/human_labels.py PATH... > human.jsonl
    evoharness label PATH... --out labels.jsonl
    evoharness calibrate labels.jsonl --human human.jsonl
"""

from __future__ import annotations

import json
import sys

from evoharness.diagnosis.accuracy import human_label
from evoharness.errors import InputError
from evoharness.traces.importers import load_paths


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2 if not argv else 0
    n = 0
    try:
        for t in load_paths(argv):
            h = human_label(t)
            if h is None or h.failure_class is None:
                continue
            print(json.dumps({"trajectory_id": t.id, "failure_class": h.failure_class, "step": h.step}))
            n += 1
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not n:
        print(f"error: no human-labelled trajectories in {', '.join(argv)}", file=sys.stderr)
        return 2
    print(f"{n} human labels", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
