"""The labeller against human step-level failure labels, beside trivial labellers.

Sets: Who&When Algorithm-Generated (tuning), Who&When Hand-Crafted (test: never tuned on),
AgentRx Magentic-One (44 labelled runs: AgentRx's relabelling of the same 58 Magentic-One runs as
Hand-Crafted, so a second test set, not a tuning set). `--only SET` prints one set (tune with
`--only who-and-when/Algorithm-Generated`, so the test sets stay unseen; add `--holdout` to score its
tuning two thirds and held-out third apart, cut by the SHA-1 of the record id). `--holdout` is the tuning view: it
leaves the test sets out (Who&When Hand-Crafted, AgentRx Magentic-One, tau-airline-dev/test, test2 and test3,
swe-blind2-dev; the output's last line names them) unless `--only` names one; before 2026-12-07 it printed them beside
the tuning sets (the tau test splits until the twenty-sixth session). See
evoharness/diagnosis/accuracy.py for the figures, the baselines and the AgentRx -> F1-F4 crosswalk.

    python benchmarks/label_accuracy.py [--json] [--data DIR] [--dev-labels FILE] [--swe-dev-labels FILE]
        [--swe-fresh-labels FILE] [--swe-blind2-labels FILE] [--only SET] [--holdout]
        [--by-signal] [--by-record] [--by-class]
        [--labeller llm --model openai:URL[#model] [--context TOKENS] [--window N] [--judge-timeout SECONDS]
         [--judge-retry-after SECONDS] [--limit N]]

``--data DIR``: the public data folder (``who_and_when/`` and ``agentrx_magentic_one/`` in it, the default
../shared/data), or any folder of human-labelled runs, scored with the same figures and baselines: AgentRx-style
runs with their ground truth (``tau_dataset/<id>.json`` or ``magentic_dataset/<id>.json`` or
``trajectories/<id>.json``, with ``ground_truth.json`` / ``*ground_truth.json`` beside them, one folder up or in a
``ground_truth/`` folder there: set ``agentrx/tau-bench`` or ``agentrx/Magentic-One``) or Who&When logs. Runs
without labels in it are left out; a folder with none is an error, and so is a ground-truth file that cannot be
used (unreadable, not JSON, records of another shape): one ``error:`` line naming it, exit 2.

``--dev-labels FILE`` (default ``benchmarks/data/tau_airline_dev_labels.json``): with the public data folder, the
tau-bench airline runs labelled by this project (an LLM helper: dev labels, not human labels;
benchmarks/data/README.md) are scored too, as ``tau-airline-dev/tune``, ``tau-airline-dev/test`` and
``tau-airline-dev/test2`` and ``tau-airline-dev/test3`` (the third blind set, scored once at the end of the
2026-12-05 rule change, ``1217423``). All four are tuning data since: no tau test set is left, so a figure on them
is a tuning figure, to be said so (the test is a held-back human-labelled retail set, ``--data DIR``);
``--dev-labels ''`` leaves them out.

``--swe-dev-labels FILE`` (default ``benchmarks/data/swe_mini_dev_labels.json``): with the public data folder,
the failed mini-swe-agent SWE-bench runs of ``mini_swe_agent_sample/`` labelled by this project (an LLM helper: dev
labels, not human labels; benchmarks/data/README.md) are scored too, as ``swe-mini-dev/tune`` (tune rules on it)
and ``swe-mini-dev/test`` (scored once, at the end of a change), beside two more trivial labellers for coding
runs: ``first failed command`` (the command whose result first shows a non-zero exit code or a traceback) and
``first write`` (the first command that changes a file); ``--swe-dev-labels ''`` leaves them out.

``--swe-fresh-labels FILE`` (default ``benchmarks/data/swe_fresh_dev_labels.json``): with the public data folder,
the 14 unresolved runs of other people (mini-swe-agent 1.17 + GPT-5-mini on SWE-bench Verified) vendored in this
repository (``benchmarks/data/swe_fresh_runs/``), labelled blind by this project (an LLM helper: dev labels, not
human labels; committed before the labeller was run on them) are scored too, as ``swe-fresh-dev`` (held back:
scored once, 2026-12-05; tuning a rule on it makes it tuning data, to be said so), beside the same two coding-run
baselines; ``--swe-fresh-labels ''`` leaves them out.

``--swe-blind2-labels FILE`` (default ``benchmarks/data/swe_blind2_labels.json``): the same for a second blind set of
another agent and another model, 11 unresolved CodeR runs (a multi-agent SWE-agent derivative, GPT-4, SWE-bench
Lite; ``benchmarks/data/swe_blind2_runs/``), as ``swe-blind2-dev`` (scored once, 2026-12-05; tuning a rule on it
makes it tuning data, to be said so); ``--swe-blind2-labels ''`` leaves them out.
A dev label that cannot be scored (no such run among the runs read, a step past its run's end, a SWE run not
scored unresolved) is one ``warning: FILE: dev label of ...; left out`` line on stderr each, and the output counts
them per file (a ``dev labels FILE: N of M joined to a run`` line; in JSON, ``dev_labels``: read, left_out, why).

``--by-class`` adds, per set with labelled classes (AgentRx's, the dev labels'), the rule labeller's class
confusion: how many runs of each labelled class (rows) it called F1, F2, F3, F4 or E (columns); counts only, no
record, so it is allowed on every set (say it when it is read on a held-back one). In JSON, ``by_class``.

``--by-signal`` adds, per set, which detector's signal the labeller chose and how often it lands on the human
step and agent, and how many records carry some signal at the human step (the ceiling of any choice among the
signals). It reads per-detector results, so it is refused unless ``--holdout --only`` names the tuning two thirds
(``who-and-when/Algorithm-Generated/tuning``): not the held-out third, not a test set. ``--by-record`` adds, under the
same refusal, each record's human step and agent beside the labeller's step, agent, first signal and every signal
(id @ step), the misses first, farthest from the human step first: the list to read and sort into kinds when a rule
changes. In JSON, ``by_signal`` and ``by_record``.

With ``--labeller llm`` the LLM judge (falling back to the rules on any error) is scored beside the rule
labeller and the trivial ones on the same records; the fallbacks, the model calls and the seconds per
record are counted. A slow local model is measured on a subset: ``--limit N`` keeps the first N records
of each set (every labeller and baseline is then scored on those records only, and the output says so).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from evoharness.benchrepeat import same_checkout
from evoharness.diagnosis.accuracy import (
    BASELINES,
    DEV_RUNS,
    SWE_BASELINES,
    SWE_BLIND2_SET,
    SWE_DEV_RUNS,
    SWE_FRESH_SET,
    TUNING_SET,
    Prediction,
    baselines_for,
    beats_every_baseline,
    class_confusion,
    dev_labelled_records,
    holdout_split,
    labelled_records,
    prediction_of,
    public_sets,
    read_dev_labels,
    read_swe_dev_labels,
    record_rows,
    record_table,
    score_set,
    signal_breakdown,
    swe_dev_records,
    table,
    to_json,
    without_test_sets,
)
from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import ImportWarnings, load_paths

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
DEV_LABELS = Path(__file__).resolve().parent / "data" / "tau_airline_dev_labels.json"
SWE_DEV_LABELS = Path(__file__).resolve().parent / "data" / "swe_mini_dev_labels.json"
SWE_FRESH_LABELS = Path(__file__).resolve().parent / "data" / "swe_fresh_dev_labels.json"
SWE_FRESH_RUNS = Path(__file__).resolve().parent / "data" / "swe_fresh_runs"
SWE_BLIND2_LABELS = Path(__file__).resolve().parent / "data" / "swe_blind2_labels.json"
SWE_BLIND2_RUNS = Path(__file__).resolve().parent / "data" / "swe_blind2_runs"


def main() -> int:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    ap.add_argument("--data", type=Path, default=DATA,
                    help="the public data folder (default ../shared/data), or any folder of human-labelled runs")
    ap.add_argument("--dev-labels", default=str(DEV_LABELS), metavar="FILE",
                    help="this project's dev labels of tau-bench airline runs (not human labels); '' to leave out")
    ap.add_argument("--swe-dev-labels", default=str(SWE_DEV_LABELS), metavar="FILE",
                    help="this project's dev labels of failed mini-swe-agent SWE-bench runs (not human labels); "
                         "'' to leave out")
    ap.add_argument("--swe-fresh-labels", default=str(SWE_FRESH_LABELS), metavar="FILE",
                    help="this project's blind dev labels of the fresh SWE-bench runs in benchmarks/data/"
                         "swe_fresh_runs (not human labels); '' to leave out")
    ap.add_argument("--swe-blind2-labels", default=str(SWE_BLIND2_LABELS), metavar="FILE",
                    help="this project's blind dev labels of the CodeR SWE-bench runs in benchmarks/data/"
                         "swe_blind2_runs (not human labels); '' to leave out")
    ap.add_argument("--only", action="append", default=None, metavar="SET",
                    help="score only this set (repeatable), e.g. who-and-when/Algorithm-Generated")
    ap.add_argument("--holdout", action="store_true",
                    help="score Algorithm-Generated's tuning two thirds and held-out third apart (by record-id hash), "
                         "and leave out the test sets (Who&When Hand-Crafted, AgentRx Magentic-One, "
                         "tau-airline-dev/test, test2 and test3, swe-blind2-dev) unless --only names one")
    ap.add_argument("--by-signal", action="store_true",
                    help="first signal by detector (tuning two thirds only: --holdout --only SET/tuning)")
    ap.add_argument("--by-record", action="store_true",
                    help="each record's human label beside the labeller's, misses first (tuning two thirds only: "
                         "--holdout --only SET/tuning)")
    ap.add_argument("--by-class", action="store_true",
                    help="per set: labelled class by the rule labeller's class (a confusion table, counts only)")
    ap.add_argument("--labeller", choices=("rules", "llm"), default="rules", help="also score the LLM judge")
    ap.add_argument("--model", help="the judge's model: openai:URL[#model]")
    ap.add_argument("--context", type=int, default=None, help="the judge model's context in tokens (default 8192)")
    ap.add_argument("--window", type=int, default=None, help="the judge's excerpt: messages each side of the rules' "
                    "signals (0: the whole run, chunked; default 3)")
    ap.add_argument("--judge-timeout", type=float, default=None, metavar="SECONDS",
                    help="the judge waits at most this long for one reply (default 120)")
    ap.add_argument("--judge-retry-after", type=float, default=None, metavar="SECONDS",
                    help="after 3 timeouts in a row the judge pauses and tries again this long after the last one "
                    "(default 60; 0: no pause)")
    ap.add_argument("--limit", type=int, default=0, help="score only the first N records of each set (0: all)")
    args = ap.parse_args()
    # the judge's options given to the rules are refused (not a range error, not silently ignored), as diagnose does
    judge_only = [opt for opt, value in (("--context", args.context), ("--window", args.window),
                                         ("--judge-timeout", args.judge_timeout),
                                         ("--judge-retry-after", args.judge_retry_after)) if value is not None]
    if args.labeller != "llm" and judge_only:
        print(f"error: {judge_only[0]} is for --labeller llm", file=sys.stderr)
        return 2
    args.context = 8192 if args.context is None else args.context
    args.window = 3 if args.window is None else args.window
    if args.limit < 0 or args.window < 0 or args.context < 512:
        print("error: --limit and --window must be >= 0 and --context >= 512", file=sys.stderr)
        return 2
    if args.judge_timeout is not None and not (0 < args.judge_timeout < math.inf):
        print(f"error: --judge-timeout must be a finite positive number of seconds, not {args.judge_timeout:g}",
              file=sys.stderr)
        return 2
    if args.judge_retry_after is not None and not (0 <= args.judge_retry_after < math.inf):
        print(f"error: --judge-retry-after must be a finite number of seconds >= 0, not {args.judge_retry_after:g}",
              file=sys.stderr)
        return 2
    if args.labeller == "llm" and not args.model:
        print("error: --labeller llm needs --model openai:URL[#model]", file=sys.stderr)
        return 2
    # per-detector results invite tuning: only on the tuning two thirds, never the held-out third or a test set
    tuning_only = args.holdout and args.only and all(o == TUNING_SET + "/tuning" for o in args.only)
    if args.by_signal and not tuning_only:
        print(f"error: --by-signal reads per-detector results: only with --holdout --only {TUNING_SET}/tuning",
              file=sys.stderr)
        return 2
    if args.by_record and not tuning_only:
        print(f"error: --by-record shows each record's labels: only with --holdout --only {TUNING_SET}/tuning",
              file=sys.stderr)
        return 2
    roots = public_sets(args.data)
    public = any(r.is_dir() for r in roots)
    if not public:  # not the public data folder: a folder of labelled runs of its own
        if not args.data.is_dir():
            print(f"error: --data {args.data}: no such folder", file=sys.stderr)
            return 2
        roots = [args.data]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        print(f"error: data folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    labeller = Labeller()

    def ours(t) -> Prediction:
        return prediction_of(t, labeller.label(t))

    warnings = ImportWarnings()
    dev: dict[str, tuple[int, list[str]]] = {}  # dev-label file -> (labels read, labels left out and why)
    try:
        sets = labelled_records(load_paths(roots, warnings=warnings))
        runs = args.data / DEV_RUNS
        if public and args.dev_labels and runs.is_file():  # the dev labels join the public tau-bench runs
            labels, dropped = read_dev_labels(Path(args.dev_labels)), []
            sets.update(dev_labelled_records(labels, load_paths([runs]), dropped))
            dev[args.dev_labels] = (len(labels), dropped)
        swe_runs = args.data / SWE_DEV_RUNS
        if public and args.swe_dev_labels and swe_runs.is_dir():  # the SWE dev labels join the public SWE runs
            labels, dropped = read_swe_dev_labels(Path(args.swe_dev_labels)), []
            sets.update(swe_dev_records(labels, load_paths([swe_runs]), dropped))
            dev[args.swe_dev_labels] = (len(labels), dropped)
        if public and args.swe_fresh_labels and SWE_FRESH_RUNS.is_dir():  # the blind labels join the vendored runs
            labels, dropped = read_swe_dev_labels(Path(args.swe_fresh_labels), halves=("",)), []
            sets.update(swe_dev_records(labels, load_paths([SWE_FRESH_RUNS]), dropped, set_name=SWE_FRESH_SET))
            dev[args.swe_fresh_labels] = (len(labels), dropped)
        if public and args.swe_blind2_labels and SWE_BLIND2_RUNS.is_dir():  # the second blind set, vendored
            labels, dropped = read_swe_dev_labels(Path(args.swe_blind2_labels), halves=("",)), []
            sets.update(swe_dev_records(labels, load_paths([SWE_BLIND2_RUNS]), dropped, set_name=SWE_BLIND2_SET))
            dev[args.swe_blind2_labels] = (len(labels), dropped)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path, (_, dropped) in dev.items():  # a label left out unsaid scored its set on fewer records than it has
        for why in dropped:
            print(f"warning: {path}: dev label of {why}; left out", file=sys.stderr)
    broken = warnings.files("ground_truth")
    if broken:  # its runs would be scored as unlabelled (left out): a figure on part of the set, unsaid
        more = f" (and {len(broken) - 1} more ground-truth file(s))" if len(broken) > 1 else ""
        print(f"error: {broken[0][0]}: {broken[0][1]}{more}; nothing scored", file=sys.stderr)
        return 2
    if not sets:
        print(f"error: no human-labelled runs in {', '.join(map(str, roots))} (AgentRx runs with a ground-truth "
              "file, or Who&When logs; see docs/traces.md)", file=sys.stderr)
        return 2
    left_out: list[str] = []
    if args.holdout:  # the tuning view: the test sets only where --only names one
        sets, left_out = without_test_sets(holdout_split(sets), args.only or ())
    if args.only:
        unknown = sorted(set(args.only) - set(sets))
        if unknown:
            print(f"error: unknown set(s) {', '.join(unknown)} (sets: {', '.join(sets)})", file=sys.stderr)
            return 2
        sets = {k: v for k, v in sets.items() if k in args.only}
    if args.limit:
        sets = {k: v[: args.limit] for k, v in sets.items()}
    labellers = {"evoharness": ours}
    fallbacks: list[str] = []
    if args.labeller == "llm":
        from evoharness.diagnosis.judge import LLMJudge, openai_judge_model

        try:
            model = openai_judge_model(args.model, **({} if args.judge_timeout is None
                                                       else {"timeout_s": args.judge_timeout}))
            judge = LLMJudge(model, context_tokens=args.context, window=args.window,
                             retry_after_s=args.judge_retry_after)
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

        total = sum(len(v) for v in sets.values())
        done = [0]
        started = time.monotonic()

        def llm(t) -> Prediction:
            lab = judge.label(t)
            done[0] += 1
            print(f"llm judge: {done[0]}/{total} records ({judge.calls} calls, "
                  f"{time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
            if lab.labeller != "llm":
                fallbacks.append(lab.labeller)
            return prediction_of(t, lab)

        labellers["evoharness llm judge"] = llm
    names = [*labellers, *BASELINES, *SWE_BASELINES]
    scores = [score_set(name, recs, {**labellers, **baselines_for(name)}) for name, recs in sets.items()]
    breakdowns = [signal_breakdown(name, recs, labeller.label) for name, recs in sets.items()] if args.by_signal else []
    confusions = [class_confusion(name, recs, ours) for name, recs in sets.items()] if args.by_class else []
    by_record = {name: record_rows(recs, labeller.label) for name, recs in sets.items()} if args.by_record else {}
    if args.json:
        out = to_json(scores)
        for b in breakdowns:
            out[b.name]["by_signal"] = b.to_json()
        for c in confusions:
            out[c.name]["by_class"] = c.to_json()
        for name, rows in by_record.items():
            out[name]["by_record"] = rows
        if left_out:
            out["left_out_test_sets"] = left_out
        if dev:
            out["dev_labels"] = {p: {"read": n, "left_out": len(d), "why": d} for p, (n, d) in dev.items()}
        print(json.dumps(out, indent=2))
    else:
        print(table(scores, names))
        misses = [m for s in scores for m in beats_every_baseline(s)]
        print()
        print("not above every trivial baseline:" if misses else "above every trivial baseline on every set and figure")
        for m in misses:
            print(f"  {m}")
        for b in breakdowns:
            print()
            print(b.table())
        for c in confusions:
            print()
            print(c.table())
        for name, rows in by_record.items():
            print()
            print(record_table(name, rows))
        for path, (n, dropped) in dev.items():
            print(f"dev labels {Path(path).name}: {n - len(dropped)} of {n} joined to a run"
                  + (f", {len(dropped)} left out (warnings on stderr)" if dropped else ""))
        if left_out:
            print(f"--holdout: test sets left out (not scored): {', '.join(left_out)}")
    if args.limit:
        print(f"subset: the first {args.limit} records of each set ({sum(s.n for s in scores)} in all); every "
              "labeller and baseline above is scored on those records only")
    if args.labeller == "llm":
        n = max(sum(s.n for s in scores), 1)
        print(f"llm judge ({args.model}, window {args.window}, context {args.context}): {len(fallbacks)} of {n} "
              f"records fell back to the rule labeller" + (f" (first: {fallbacks[0]})" if fallbacks else "")
              + f"; {judge.calls} model calls, {(time.monotonic() - started) / n:.0f} s per record")
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
