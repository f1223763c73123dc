"""Write the human labels of the public labelled sets as `evoharness calibrate --human` input (JSONL).

One line per labelled trajectory whose humans name a class: ``{"trajectory_id", "failure_class", "step"}``
-- the earliest human failing step (a message index, as `diagnose` counts) and its class under the
documented AgentRx -> F1-F4 crosswalk (evoharness/diagnosis/accuracy.py). Who&When names no class: its
runs are left out (their steps are scored by benchmarks/label_accuracy.py). Every labelled run failed.
Of the public sets only AgentRx names a class, and AgentRx is this project's held-out test set: never tune on it.

    python scripts/human_labels.py PATH... > human.jsonl
    evoharness label PATH... --out labels.jsonl
    evoharness calibrate labels.jsonl --human human.jsonl

``--dev-labels FILE`` writes instead the dev labels of the tau-bench airline runs among PATH...
(benchmarks/data/tau_airline_dev_labels.json: written blind by this project's LLM helper, not by humans; a
tuning set), the class as benchmarks/label_accuracy.py scores it (the category's crosswalk; E where the user
or the environment failed):

    python scripts/human_labels.py --dev-labels benchmarks/data/tau_airline_dev_labels.json \\
        ../shared/data/tau_bench_airline_gpt4o > dev.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evoharness.diagnosis.accuracy import dev_labelled_records, human_label, read_dev_labels
from evoharness.errors import InputError
from evoharness.traces.importers import load_paths


def _human(paths: list[str]):
    for t in load_paths(paths):
        h = human_label(t)
        if h is not None and h.failure_class is not None:
            yield t.id, h


def _dev(labels: str, paths: list[str]):
    dropped: list[str] = []
    sets = dev_labelled_records(read_dev_labels(Path(labels)), load_paths(paths), dropped)
    for records in sets.values():
        for t, h in records:
            yield t.id, h


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2 if not argv else 0
    labels = None
    if argv[0] == "--dev-labels":
        if len(argv) < 3:
            print("error: --dev-labels FILE PATH...: name the dev-label file and the runs it labels", file=sys.stderr)
            return 2
        labels, argv = argv[1], argv[2:]
    n = 0
    try:
        for trajectory_id, h in (_dev(labels, argv) if labels else _human(argv)):
            print(json.dumps({"trajectory_id": trajectory_id, "failure_class": h.failure_class, "step": h.step}))
            n += 1
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not n:
        what = f"runs labelled in {labels}" if labels else "human-labelled trajectories"
        print(f"error: no {what} in {', '.join(argv)}", file=sys.stderr)
        return 2
    print(f"{n} {'dev' if labels else 'human'} labels", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    raise SystemExit(main(sys.argv[1:]))
