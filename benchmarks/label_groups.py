"""The labeller on Who&When Algorithm-Generated, group by group: does a rule hold beyond the logs it was tuned on?

Algorithm-Generated (the tuning set, 126 AG2 CaptainAgent logs) is cut by what a log *is*, read from its input only
(never from its human label): the task family (GAIA or AssistantBench, by the question id's form; GAIA's level), the
opening handoff (with code or without), the team's code runs (one failed, all ran clean, none ran), the number of
reasoning agents, whether an agent is named for web search, and the log's length. Each group's figures (step exact /
±1 / ±3, agent) are printed beside the trivial labellers' on the same records (last message, first tool error, most
frequent agent). ``--rules`` adds, for each multi-agent rule, what it contributes in each group: the figures with the
labeller as it is minus the figures with that one detector removed (exact / agent), and the records it turns right
and wrong. A rule whose gain sits in one group only, or in a handful of records, is fitted to those logs, not a
principle of the format: the estimate of how it transfers to logs of another shape (Hand-Crafted's Magentic-One runs,
which this script never reads).

    python benchmarks/label_groups.py [--data DIR] [--rules] [--json]

``--data DIR``: the public data folder (default ../shared/data); only ``who_and_when/Who&When/Algorithm-Generated``
in it is read. A folder without it is one ``error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from evoharness.benchrepeat import same_checkout
from evoharness.diagnosis.accuracy import (
    TUNING_SET,
    HumanLabel,
    Prediction,
    first_tool_error,
    holdout_split,
    labelled_records,
    last_message,
    most_frequent_agent,
    prediction_of,
)
from evoharness.diagnosis.catalogue import default_catalogue
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.multiagent import OPENING, AgentLog, agent_role, ran_and_failed
from evoharness.traces.importers import load_paths
from evoharness.traces.models import Trajectory

ROOT = Path(__file__).resolve().parents[1]
AG = Path("who_and_when") / "Who&When" / "Algorithm-Generated"  # under the public data folder
# the multi-agent rules and the fallbacks a multi-agent log reaches (``--rules``)
RULES = ("F1.unsupported_fact", "F1.unseen_report", "F1.claimed_act", "F2.guardrail", "F4.no_progress",
         "F4.handoff_code", "F4.lost_task", "F4.answer_origin", "F4.accepted_report", "F1.unbacked_claim",
         "F4.first_commitment", "F4.poor_delivery")
GAIA_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
WEB_NAME = re.compile(r"search|web|brows|bing|internet|online", re.IGNORECASE)
FIGS = ("exact", "within_1", "within_3", "agent")


def _norm(agent: str | None) -> str:
    return re.sub(r"[^a-z0-9]", "", (agent or "").lower())


def hits(p: Prediction, h: HumanLabel) -> tuple[int, int, int, int]:
    """(step exact, within 1, within 3, agent) of one prediction, as 0 / 1."""
    d = None if p.step is None else abs(p.step - h.step)
    return (int(d == 0), int(d is not None and d <= 1), int(d is not None and d <= 3),
            int(p.agent is not None and _norm(p.agent) == _norm(h.agent)))


def groups_of(t: Trajectory, level: str | None, held: bool) -> dict[str, str]:
    """The groups a log falls in, one per dimension, from its input only (never its human label)."""
    view = TraceView.of(t)
    log = AgentLog.of(view)
    first = log.text(view.assistant_steps[0]) if view.assistant_steps else ""
    names = {str(m.get("name")) for m in t.messages if m.get("role") == "assistant" and m.get("name")}
    roles = {n: agent_role(n) for n in names}
    runs = [i for i in range(len(log.msgs)) if roles.get(str(log.msgs[i].get("name") or "")) == "executor"]
    failed = any(ran_and_failed(log.text(i), str(log.msgs[i].get("name") or "")) for i in range(len(log.msgs)))
    reasoners = sum(r == "agent" for r in roles.values())
    n = len(t.messages)
    return {
        "split": "held-out third" if held else "tuning two thirds",
        "family": "GAIA" if GAIA_ID.fullmatch(t.task_id or "") else "AssistantBench",
        "level": f"level {level}" if level else "level ?",
        "opening": "handoff with code" if OPENING.match(first) and "```" in first else
                   ("handoff" if OPENING.match(first) else "no handoff"),
        "code runs": "a run failed" if failed else ("runs all clean" if runs else "no run"),
        "team": "1-2 reasoners" if reasoners <= 2 else "3+ reasoners",
        "web": "a web/search agent" if any(WEB_NAME.search(x) for x in names) else "no web/search agent",
        "length": "<= 8 messages" if n <= 8 else ("9-15 messages" if n <= 15 else "> 15 messages"),
    }


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="the public data folder (only who_and_when/Who&When/Algorithm-Generated is read)")
    ap.add_argument("--rules", action="store_true", help="each multi-agent rule's contribution, group by group")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args(argv)
    folder = args.data / AG
    if not folder.is_dir():
        print(f"error: {folder}: no such folder (the Who&When Algorithm-Generated logs)", file=sys.stderr)
        return 2
    sets = labelled_records(load_paths([folder]))
    recs = sets.get(TUNING_SET, [])
    if not recs:
        print(f"error: {folder}: no labelled Algorithm-Generated log", file=sys.stderr)
        return 2
    held = {t.id for t, _ in holdout_split(sets).get(TUNING_SET + "/held-out", [])}
    levels = {}
    for f in folder.glob("*.json"):
        try:
            levels[f.stem] = str(json.loads(f.read_text()).get("level") or "") or None
        except (OSError, ValueError, AttributeError):
            levels[f.stem] = None
    groups = {t.id: groups_of(t, levels.get(t.id.rsplit(":", 1)[-1]), t.id in held) for t, _ in recs}
    human = {t.id: h for t, h in recs}

    def predict(labeller: Labeller) -> dict[str, Prediction]:
        return {t.id: prediction_of(t, labeller.label(t)) for t, _ in recs}

    labellers: dict[str, dict[str, Prediction]] = {"evoharness": predict(Labeller())}
    baselines: dict[str, Callable[[Trajectory], Prediction]] = {
        "last message": last_message, "first tool error": first_tool_error, "most frequent agent": most_frequent_agent}
    for name, fn in baselines.items():
        labellers[name] = {t.id: fn(t) for t, _ in recs}
    dims = list(next(iter(groups.values())))
    table: dict[str, dict[str, dict[str, dict[str, int]]]] = {}  # dimension -> group -> labeller -> figure -> hits
    for dim in dims:
        by: dict[str, list[str]] = defaultdict(list)
        for k, g in groups.items():
            by[g[dim]].append(k)
        table[dim] = {}
        for g, ks in sorted(by.items()):
            row = {"n": {"n": len(ks)}}
            for name, preds in labellers.items():
                sums = [sum(col) for col in zip(*(hits(preds[k], human[k]) for k in ks), strict=True)]
                row[name] = dict(zip(FIGS, sums, strict=True))
            table[dim][g] = row
    rules: dict[str, dict] = {}
    if args.rules:
        base = labellers["evoharness"]
        catalogue = default_catalogue()
        for rule in RULES:
            without = predict(Labeller(detectors=[d for d in catalogue if d.id != rule]))
            delta = {k: tuple(a - b for a, b in zip(hits(base[k], human[k]), hits(without[k], human[k]), strict=True))
                     for k in base}
            per: dict[str, dict[str, list[int]]] = {}
            for dim in dims:
                per[dim] = {}
                for k, d in delta.items():
                    cell = per[dim].setdefault(groups[k][dim], [0, 0])
                    cell[0] += d[0]
                    cell[1] += d[3]
            record = lambda k: k.rsplit(":", 1)[-1]  # noqa: E731
            rules[rule] = {
                "total": dict(zip(FIGS, [sum(d[i] for d in delta.values()) for i in range(4)], strict=True)),
                "right": sorted((record(k) for k, d in delta.items() if d[0] + d[3] > 0), key=int),
                "wrong": sorted((record(k) for k, d in delta.items() if d[0] + d[3] < 0), key=int),
                "by_group": per,
            }
    if args.json:
        print(json.dumps({"groups": table, "rules": rules} if args.rules else {"groups": table}, indent=2))
        return 0
    names = list(labellers)
    print(f"Who&When Algorithm-Generated ({len(recs)} logs) by group: step exact / ±1 / ±3, agent")
    print()
    print("| dimension | group | n | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for dim, rows in table.items():
        for g, row in rows.items():
            cells = []
            for name in names:
                f = row[name]
                cells.append(f"{f['exact']}/{f['within_1']}/{f['within_3']}, {f['agent']}"
                             if name != "most frequent agent" else f"–, {f['agent']}")
            print(f"| {dim} | {g} | {row['n']['n']} | " + " | ".join(cells) + " |")
    for rule, r in rules.items():
        tot = r["total"]
        print()
        print(f"{rule}: contributes step exact {tot['exact']:+d}, ±1 {tot['within_1']:+d}, ±3 {tot['within_3']:+d}, "
              f"agent {tot['agent']:+d}; turns right {len(r['right'])} record(s) {' '.join(r['right']) or '-'}; "
              f"wrong {len(r['wrong'])} {' '.join(r['wrong']) or '-'}")
        for dim, cells in r["by_group"].items():
            print(f"  {dim}: " + "; ".join(f"{g} {v[0]:+d}/{v[1]:+d}" for g, v in sorted(cells.items())))
    return 0


if __name__ == "__main__":
    same_checkout(__file__)
    raise SystemExit(main())
