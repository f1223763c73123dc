"""Profile the rule labeller's answers on a folder of runs without labels: are they a constant?

For runs nobody has labelled (a held-back set, a new format) accuracy cannot be measured, but a labeller that
answers the same thing for every failure can be seen. Prints, aggregated (no per-run labels): the score
distribution; for the failed runs (score < 1) the class composition, where the first signal sits (the run's last
assistant message, its final text answer, or earlier), and how many distinct answers there are -- (class, step)
pairs, (signal, step) pairs and (class, steps before the last assistant message) pairs, the last one constant
for a labeller that always answers the same place -- and how often the answer is the trivial labeller's
("every failure is F4 at the last assistant message").

    python scripts/label_profile.py PATH... [--format FMT] [--json]

PATH: trace files or folders, as ``evoharness label`` takes them. Exit 2 with one ``error:`` line on a missing
path, an unreadable file or no trajectories.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import iter_files, load_file


def _last(t, text_only: bool) -> int | None:
    steps = [i for i, m in enumerate(t.messages) if m.get("role") == "assistant"
             and (not text_only or (isinstance(m.get("content"), str) and m["content"].strip()))]
    return steps[-1] if steps else None


def profile(trajectories) -> dict:
    labeller = Labeller()
    scores: Counter = Counter()
    classes: Counter = Counter()
    signals: Counter = Counter()
    answers: Counter = Counter()
    signal_answers: Counter = Counter()
    offsets: Counter = Counter()
    place: Counter = Counter()
    failed = same_as_trivial = 0
    for t in trajectories:
        scores["unscored" if t.score is None else f"{t.score:g}"] += 1
        if t.score is None or t.score >= 1:
            continue
        failed += 1
        lab = labeller.label(t)
        fs = lab.first_signal
        cls = lab.failure_class.value if hasattr(lab.failure_class, "value") else str(lab.failure_class)
        classes[cls] += 1
        if fs is None:
            place["no signal"] += 1
            answers[(cls, None)] += 1
            continue
        signals[fs.id] += 1
        answers[(cls, fs.step)] += 1
        last = _last(t, text_only=False)
        same_as_trivial += cls == "F4" and fs.step == last
        offsets[(cls, None if last is None else last - fs.step)] += 1
        signal_answers[(fs.id, fs.step)] += 1
        if fs.step == _last(t, text_only=False):
            place["last assistant message"] += 1
        elif fs.step == _last(t, text_only=True):
            place["final text answer (not the last assistant message)"] += 1
        else:
            place["earlier"] += 1
    return {
        "runs": sum(scores.values()),
        "scores": dict(sorted(scores.items())),
        "failed": failed,
        "classes": dict(classes.most_common()),
        "first_signal_at": dict(place.most_common()),
        "first_signals": dict(signals.most_common()),
        "distinct_class_step": len(answers),
        "distinct_signal_step": len(signal_answers),
        "distinct_class_steps_before_last_assistant": len(offsets),
        "most_common_answer_share": (max(answers.values()) / failed) if failed else None,
        "same_as_all_F4_at_last_assistant": same_as_trivial,
    }


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--format", default=None, help="input format (as `evoharness label --format`); auto by default")
    ap.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"error: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    trajectories = []
    try:
        for f in iter_files(args.paths):
            trajectories.extend(load_file(f, args.format))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not trajectories:
        print("error: no trajectories found in " + ", ".join(map(str, args.paths)), file=sys.stderr)
        return 2
    p = profile(trajectories)
    if args.json:
        print(json.dumps(p, sort_keys=True))
        return 0
    print(f"runs {p['runs']}; scores {p['scores']}; failed {p['failed']}")
    print(f"failed runs by class: {p['classes']}")
    print(f"first signal at: {p['first_signal_at']}")
    print(f"first signals: {p['first_signals']}")
    if not p["failed"]:
        return 0
    print(f"distinct answers: {p['distinct_class_step']} (class, step), {p['distinct_signal_step']} (signal, step), "
          f"{p['distinct_class_steps_before_last_assistant']} (class, steps before the last assistant message); "
          f"most common answer on {p['most_common_answer_share']:.0%} of the failed runs; "
          f"the same answer as 'every failure F4 at the last assistant message' on "
          f"{p['same_as_all_F4_at_last_assistant']} of {p['failed']}")
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main())
