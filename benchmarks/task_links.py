"""How well each signal links runs of one task under two task ids, on the public trace sets (docs/datasets.md, "One
task under two task ids").

An export links tasks by content (``datasets.export.TaskLinks``): a held-out task's run under another id is held out
too, and a split keeps linked tasks on one side. A false link costs a training task (held out with a held-out one) or
moves a task to the other side; enough of them chain every task into one group and no split can be made. So the
rule taken must link no two tasks of these sets, whose task ids are their truth (each task has one id there).

For each set this prints, per signal, the pairs of runs it links: of one task (wanted: only tau-bench airline has
several runs of a task, 4 trials that each word the task anew) and of two tasks (false links):

- ``taken``: ``TaskLinks`` as the export runs it (the conversation: system message and user turns; the simulated user's
  instruction, ``meta.user_instruction``, where the trace holds one);
- ``conversation only``: the conversation alone (the rule until 2026-12-06);
- ``first user turn``: the first user message, exactly;
- ``jaccard >= J``: the first user messages' word sets overlap by J or more;
- ``shared id``: the user turns share a token of 5+ word characters holding a digit and a letter (a user or booking id);
- ``same ids``: the user turns' sets of such tokens are the same (and not empty);
- ``same ids, jaccard >= 0.6``: that, and the user turns' word sets (all of them) overlap by 0.6 or more;
- ``same writes``: the assistant's state-changing calls (name and arguments, ``diagnosis.detectors.is_state_changing``)
  are the same set (and not empty): the act the task asks for;
- ``same writes and ids``: both of the last two.

The last four are candidates for a run whose trace holds no instruction (a human user, an importer that drops it):
none is taken (docs/datasets.md says what they link).

Usage: ``python benchmarks/task_links.py [--data ../shared/data]`` (Who&When Algorithm-Generated only; its hand-crafted
half and AgentRx are evaluation sets and are not read).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from pathlib import Path

from evoharness.datasets.export import TaskLinks
from evoharness.diagnosis.detectors import is_state_changing
from evoharness.traces.importers import load_paths

SETS = {"tau-bench airline": "tau_bench_airline_gpt4o/gpt-4o-airline.json",
        "mini-swe-agent": "mini_swe_agent_sample/trajs",
        "Who&When Algorithm-Generated": "who_and_when/Who&When/Algorithm-Generated"}
WORD = re.compile(r"\w+")
ID = re.compile(r"\b(?=\w*\d)(?=\w*[A-Za-z_])\w{5,}\b")


def _users(t) -> list[str]:
    return [m["content"] if isinstance(m.get("content"), str) else str(m.get("content"))
            for m in t.messages if m.get("role") == "user"]


def _writes(t) -> frozenset:
    out = set()
    for c in t.tool_calls():
        canonical = json.dumps(c.args, sort_keys=True) if c.parsed_ok else str(c.raw)
        if isinstance(c.name, str) and is_state_changing(c.name, canonical):
            out.add((c.name, canonical))
    return frozenset(out)


def _taken(runs, instruction: bool = True) -> set[tuple[int, int]]:
    """Pairs of runs (indices) that TaskLinks puts in one group when every run has a task id of its own (without
    ``instruction``: the conversation alone, the rule before 2026-12-06's second session)."""
    links = TaskLinks()
    for i, t in enumerate(runs):
        meta = t.meta if instruction else {k: v for k, v in t.meta.items() if k != "user_instruction"}
        links.add(t.model_copy(update={"task_id": f"run-{i}", "meta": meta}))
    groups = links.groups(f"run-{i}" for i in range(len(runs)))
    return {tuple(sorted(int(x[4:]) for x in pair)) for g in groups for pair in itertools.combinations(g, 2)}


def report(name: str, runs: list) -> None:
    firsts = [(_users(t) or [""])[0] for t in runs]
    words = [set(WORD.findall(f.lower())) for f in firsts]
    ids = [set(ID.findall(" ".join(_users(t)))) for t in runs]
    taken, before = _taken(runs), _taken(runs, instruction=False)
    signals = {"taken": lambda i, j: (i, j) in taken, "conversation only": lambda i, j: (i, j) in before,
               "first user turn": lambda i, j: firsts[i] == firsts[j]}
    for cut in (0.6, 0.8, 0.9):
        signals[f"jaccard >= {cut}"] = (lambda c: lambda i, j: len(words[i] & words[j])
                                        >= c * max(1, len(words[i] | words[j])))(cut)
    signals["shared id"] = lambda i, j: bool(ids[i] & ids[j])
    signals["same ids"] = lambda i, j: bool(ids[i]) and ids[i] == ids[j]
    every = [set(WORD.findall(" ".join(_users(t)).lower())) for t in runs]
    signals["same ids, jaccard >= 0.6"] = lambda i, j: (bool(ids[i]) and ids[i] == ids[j]
                                                        and len(every[i] & every[j]) >= 0.6 * len(every[i] | every[j]))
    writes = [_writes(t) for t in runs]
    signals["same writes"] = lambda i, j: bool(writes[i]) and writes[i] == writes[j]
    signals["same writes and ids"] = lambda i, j: signals["same writes"](i, j) and signals["same ids"](i, j)
    same = sum(runs[i].task_id == runs[j].task_id for i, j in itertools.combinations(range(len(runs)), 2))
    other = len(runs) * (len(runs) - 1) // 2 - same
    tasks = len({t.task_id for t in runs})
    print(f"{name}: {len(runs)} runs of {tasks} tasks ({same} pairs of one task, {other} of two)")
    for label, linked in signals.items():
        hit = [(i, j) for i, j in itertools.combinations(range(len(runs)), 2) if linked(i, j)]
        wanted = sum(runs[i].task_id == runs[j].task_id for i, j in hit)
        print(f"  {label:26} one task {wanted}/{same}, two tasks (false) {len(hit) - wanted}/{other}")


def main() -> None:
    from evoharness.script_help import RawDefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=RawDefaultsHelp)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data",
                    help="the public trace sets (the layout of ../shared/data)")
    args = ap.parse_args()
    for name, rel in SETS.items():
        report(name, list(load_paths([args.data / rel])))


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    main()
