"""Labeller accuracy against human step-level failure labels, beside trivial labellers.

Sets (read from the public data folder): Who&When Algorithm-Generated (the tuning set),
Who&When Hand-Crafted (the test set: never tuned on) and AgentRx Magentic-One (44 runs
with human labels). Per set and labeller: critical-step exact, within +-1 and +-3 messages
of the earliest human failing step; agent attribution (the labeller's agent -- for the trivial labellers
the speaker at the predicted step -- vs the human's failing agent, case-insensitive); class agreement where the humans
name a category, under ``CROSSWALK``.

The trivial labellers, computed on the same records:
- ``last message``: the final message and its speaker;
- ``first tool error``: the first message that reads as an error (``ERROR_TEXT``), else the
  final one;
- ``all F4``: class F4 for every run;
- ``most frequent agent``: the agent with the most messages in the run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces.models import Trajectory

# AgentRx's nine categories -> F1-F4 (one crosswalk, documented in docs/diagnosis.md)
CROSSWALK = {
    "invention of new information": "F1",
    "misinterpretation of tool output": "F1",
    "invalid invocation": "F2",
    "guardrails triggered": "F2",
    "system failure": "F2",
    "instruction/plan adherence failure": "F4",
    "intent plan misalignment": "F4",
    "intent not supported": "F4",
    "underspecified user intent": "F4",
}
# the other spellings AgentRx's own scorers accept (scripts/score_tau_ablation.py, the judge's taxonomy); after
# ``category_key`` ("Intent / Plan Misalignment" -> "intent/plan misalignment"); "Inconclusive" maps to none
CROSSWALK_ALIASES = {
    "intent/plan misalignment": "intent plan misalignment",
    "intent-plan misalignment": "intent plan misalignment",
    "instruction adherence failure": "instruction/plan adherence failure",
    "invocation failure": "invalid invocation",
    "misinterpretation of tool output/handoff failure": "misinterpretation of tool output",
}


def category_key(category: str) -> str:
    """A category name as ``CROSSWALK`` spells it: lower case, single spaces, none around a slash, aliases."""
    key = re.sub(r"\s*/\s*", "/", " ".join(category.lower().split()))
    return CROSSWALK_ALIASES.get(key, key)


def crosswalk(category: str) -> str | None:
    """The F1-F4 class of an AgentRx category, None for one the crosswalk does not name (Inconclusive)."""
    return CROSSWALK.get(category_key(category))

ERROR_TEXT = re.compile(r"\b(error|exception|traceback|failed|exitcode: [1-9])", re.IGNORECASE)

PUBLISHED = {
    "who-and-when/Hand-Crafted": "Who&When paper best step 14.2%; A2P (2025) step 29.3%",
    "who-and-when/Algorithm-Generated": "A2P (2025) step 47.5%",
    "agentrx/Magentic-One": "none published for this crosswalk",
    "agentrx/tau-bench": "none published for this crosswalk",
    "tau-airline-dev": "dev labels written by this project (an LLM helper), not human labels; none published",
    "swe-mini-dev": "dev labels written by this project (an LLM helper), not human labels; none published",
    "swe-fresh-dev": "dev labels written by this project (an LLM helper, blind), not human labels; none published",
    "swe-blind2-dev": "dev labels written by this project (an LLM helper, blind), not human labels; none published",
}

FIGURES = ("step_exact", "step_within_1", "step_within_3", "agent", "class")


@dataclass(frozen=True)
class HumanLabel:
    step: int  # message index of the earliest human failing step
    agent: str | None
    failure_class: str | None  # crosswalked class, or None where the humans name none


@dataclass(frozen=True)
class Prediction:
    step: int | None = None
    agent: str | None = None
    failure_class: str | None = None


@dataclass
class SetScore:
    name: str
    n: int
    figures: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # labeller -> figure -> (hits, n)

    def rate(self, labeller: str, figure: str) -> float | None:
        hits, n = self.figures.get(labeller, {}).get(figure, (0, 0))
        return hits / n if n else None


def human_label(t: Trajectory) -> HumanLabel | None:
    """The earliest human failing step of a Who&When or AgentRx record, as a message index."""
    meta = t.meta
    if meta.get("source_format") == "who-and-when" and meta.get("mistake_step") is not None:
        step = int(meta["mistake_step"]) + int(meta.get("message_offset", 0))
        if step >= len(t.messages):
            return None
        return HumanLabel(step=step, agent=meta.get("mistake_agent"), failure_class=None)
    failures = meta.get("human_failures")
    if meta.get("source_format") in AGENTRX_SETS and failures:
        first = failures[0]
        if not 0 <= first["step"] < len(t.messages):
            return None
        # the agent figure where agents are named: a single-agent run (tau-bench) has no agent to attribute
        named = any(m.get("name") for m in t.messages if m.get("role") == "assistant")
        return HumanLabel(step=first["step"], agent=(first["agent"] or None) if named else None,
                          failure_class=crosswalk(first["category"]))
    return None


# AgentRx's formats -> the set their records are scored in
AGENTRX_SETS = {"agentrx": "agentrx/Magentic-One", "agentrx-tau": "agentrx/tau-bench"}


def set_name(t: Trajectory) -> str:
    if t.meta.get("source_format") == "who-and-when":
        return f"who-and-when/{t.meta.get('subset')}"
    return AGENTRX_SETS.get(t.meta.get("source_format"), "agentrx/Magentic-One")


def speaker(t: Trajectory, step: int | None) -> str | None:
    if step is None or not 0 <= step < len(t.messages):
        return None
    m = t.messages[step]
    return m.get("name") or m.get("role")


def prediction_of(t: Trajectory, lab: Any) -> Prediction:
    """What a ``Label`` of ``t`` predicts: its first signal's step, the agent (the label's, else the speaker of
    that step) and its class."""
    step = lab.first_signal.step if lab.first_signal else None
    return Prediction(step, lab.agent or speaker(t, step), lab.failure_class.value)


def _last(t: Trajectory) -> int:
    return max(len(t.messages) - 1, 0)


def last_message(t: Trajectory) -> Prediction:
    return Prediction(_last(t), speaker(t, _last(t)))


def first_tool_error(t: Trajectory) -> Prediction:
    for i, m in enumerate(t.messages):
        c = m.get("content")
        if m.get("role") != "user" and isinstance(c, str) and ERROR_TEXT.search(c):
            return Prediction(i, speaker(t, i))
    return last_message(t)


def all_f4(t: Trajectory) -> Prediction:
    return Prediction(failure_class="F4")


def most_frequent_agent(t: Trajectory) -> Prediction:
    names = Counter(m.get("name") for m in t.messages if m.get("role") == "assistant" and m.get("name"))
    return Prediction(agent=names.most_common(1)[0][0] if names else None)


BASELINES: dict[str, Callable[[Trajectory], Prediction]] = {
    "last message": last_message,
    "first tool error": first_tool_error,
    "all F4": all_f4,
    "most frequent agent": most_frequent_agent,
}

EXIT_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit(?:ed with)? code:? (-?\d+)", re.IGNORECASE)


def _calls_before(t: Trajectory, step: int) -> int:
    """The assistant message whose call a tool result at ``step`` answers (the last assistant message before it)."""
    return next((i for i in range(step, -1, -1) if t.messages[i].get("role") == "assistant"), step)


def first_failed_command(t: Trajectory) -> Prediction:
    """A coding agent's first command that failed: the first tool result with a non-zero exit code or a Python
    traceback, located at the assistant message that issued the command; else the final message."""
    for i, m in enumerate(t.messages):
        c = m.get("content")
        if m.get("role") != "tool" or not isinstance(c, str):
            continue
        code = EXIT_CODE.search(c[:200])
        if (code and int(code.group(1) or code.group(2)) != 0) or "Traceback (most recent call last)" in c:
            step = _calls_before(t, i)
            return Prediction(step, speaker(t, step))
    return last_message(t)


def first_write(t: Trajectory) -> Prediction:
    """A coding agent's first command that changes a file (an edit, a redirection, a move: the labeller's
    state-changing shell command), whatever file it writes; else the final message."""
    from evoharness.diagnosis.detectors import is_state_changing

    for i, m in enumerate(t.messages):
        for call in m.get("tool_calls") or () if m.get("role") == "assistant" else ():
            fn = call.get("function") or {}
            if is_state_changing(str(fn.get("name")), str(fn.get("arguments") or "")):
                return Prediction(i, speaker(t, i))
    return last_message(t)


# the SWE sets' extra baselines (a coding agent's run: its failed commands and its writes)
SWE_BASELINES: dict[str, Callable[[Trajectory], Prediction]] = {
    "first failed command": first_failed_command,
    "first write": first_write,
}


def baselines_for(set_name: str) -> dict[str, Callable[[Trajectory], Prediction]]:
    """The trivial labellers a set is scored beside: ``BASELINES``, and ``SWE_BASELINES`` for a SWE set."""
    swe = set_name.startswith((SWE_DEV_SET, SWE_FRESH_SET, SWE_BLIND2_SET))
    return {**BASELINES, **SWE_BASELINES} if swe else BASELINES


def _norm(agent: str | None) -> str:
    return re.sub(r"[^a-z0-9]", "", (agent or "").lower())


def score_set(name: str, records: list[tuple[Trajectory, HumanLabel]],
              labellers: dict[str, Callable[[Trajectory], Prediction]]) -> SetScore:
    out = SetScore(name=name, n=len(records))
    for lname, fn in labellers.items():
        tally: dict[str, list[int]] = {f: [0, 0] for f in FIGURES}
        for t, h in records:
            p = fn(t)
            if p.step is not None:
                d = abs(p.step - h.step)
                for fig, tol in (("step_exact", 0), ("step_within_1", 1), ("step_within_3", 3)):
                    tally[fig][0] += d <= tol
                    tally[fig][1] += 1
            if p.agent is not None and h.agent:
                tally["agent"][0] += _norm(p.agent) == _norm(h.agent)
            if h.agent and (p.agent is not None or p.step is not None):
                tally["agent"][1] += 1
            if p.failure_class is not None and h.failure_class:
                tally["class"][0] += p.failure_class == h.failure_class
                tally["class"][1] += 1
        out.figures[lname] = {f: (hits, n) for f, (hits, n) in tally.items() if n}
    return out


Records = list[tuple[Trajectory, HumanLabel]]


@dataclass
class SignalBreakdown:
    """Which detector's signal the labeller chose, per set: how often it lands on the human step and agent, and
    how many records carry *some* signal at the human step (the ceiling of any choice among the signals)."""

    name: str
    n: int
    rows: dict[str, list[int]] = field(default_factory=dict)  # first-signal id -> [records, step exact, agent]
    any_signal_at_step: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"first_signal": {k: {"records": n, "step_exact": exact, "agent": agent}
                                 for k, (n, exact, agent) in self.rows.items()},
                "some_signal_at_human_step": self.any_signal_at_step}

    def table(self) -> str:
        lines = [f"{self.name} (n={self.n}): the rule labeller's first signal, by detector",
                 "| first signal | records | step exact | agent |", "|---|---|---|---|"]
        for sid, (n, exact, agent) in sorted(self.rows.items(), key=lambda kv: (-kv[1][0], kv[0])):
            lines.append(f"| {sid} | {n} | {exact}/{n} | {agent}/{n} |")
        lines.append(f"some signal (any detector) at the human step: {self.any_signal_at_step}/{self.n}")
        return "\n".join(lines)


def signal_breakdown(name: str, records: Records, label: Callable[[Trajectory], Any]) -> SignalBreakdown:
    """Per first-signal detector: records, step exact and agent hits. ``label`` returns a diagnosis Label. Read
    it on the tuning set only: per-detector results on a test set are per-record knowledge of it."""
    out = SignalBreakdown(name=name, n=len(records))
    for t, h in records:
        lab = label(t)
        s = lab.first_signal
        row = out.rows.setdefault(s.id if s else "(none)", [0, 0, 0])
        row[0] += 1
        row[1] += s is not None and s.step == h.step
        row[2] += bool(h.agent) and _norm(lab.agent or speaker(t, s.step if s else None)) == _norm(h.agent)
        out.any_signal_at_step += any(x.step == h.step for x in lab.signals)
    return out


def record_rows(records: Records, label: Callable[[Trajectory], Any]) -> list[dict[str, Any]]:
    """Per record, the human label beside the rule labeller's: its step and agent, its first signal and every signal
    (id, step), and whether step and agent agree -- the misses to read and sort when changing a rule. ``label`` returns
    a diagnosis Label. Read it on the tuning set only, as ``signal_breakdown``."""
    rows = []
    for t, h in records:
        lab = label(t)
        s = lab.first_signal
        agent = lab.agent or speaker(t, s.step if s else None)
        rows.append({"record": t.id, "human_step": h.step, "human_agent": h.agent,
                     "step": s.step if s else None, "agent": agent, "first_signal": s.id if s else None,
                     "step_exact": s is not None and s.step == h.step,
                     "agent_right": bool(h.agent) and _norm(agent) == _norm(h.agent),
                     "signals": [[x.id, x.step] for x in lab.signals]})
    return rows


def record_table(name: str, rows: list[dict[str, Any]]) -> str:
    """``record_rows`` as a markdown table, misses first (by how far the label's step is from the human's)."""
    lines = [f"{name} (n={len(rows)}): each record, the human label beside the rule labeller's",
             "| record | human step | human agent | step | agent | first signal | step exact | agent | signals |",
             "|---|---|---|---|---|---|---|---|---|"]
    def far(r: dict[str, Any]) -> int:  # how far the label's step is from the human's (no step: last of the misses)
        return -1 if r["step"] is None else abs(r["step"] - r["human_step"])

    for r in sorted(rows, key=lambda r: (r["step_exact"], -far(r), r["record"])):
        sigs = ", ".join(f"{i} @{st}" for i, st in r["signals"])
        lines.append(f"| {r['record']} | {r['human_step']} | {r['human_agent']} | {r['step']} | {r['agent']} | "
                     f"{r['first_signal']} | {'yes' if r['step_exact'] else 'no'} | "
                     f"{'yes' if r['agent_right'] else 'no'} | {sigs} |")
    return "\n".join(lines)


@dataclass
class ClassConfusion:
    """Per set: how often each labelled class (the crosswalk of the human category; E for a simulated user or
    the environment) got each predicted class. Counts only, no record: the diagonal is the class figure's hits,
    a row says which labelled classes a labeller folds into another (issue 13: every failure read as F4)."""

    name: str
    cells: Counter = field(default_factory=Counter)  # (labelled class, predicted class) -> records

    def to_json(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (human, pred), n in sorted(self.cells.items()):
            out.setdefault(human, {})[pred] = n
        return out

    def table(self) -> str:
        n = sum(self.cells.values())
        if not n:
            return f"{self.name}: no class labels, no confusion table"
        humans = sorted({h for h, _ in self.cells})
        preds = sorted({p for _, p in self.cells})
        lines = [f"{self.name} (n={n}): labelled class (rows) by predicted class (columns)",
                 "| labelled | " + " | ".join(f"called {p}" for p in preds) + " | right |",
                 "|" + "---|" * (len(preds) + 2)]
        for h in humans:
            row = [self.cells.get((h, p), 0) for p in preds]
            lines.append(f"| {h} | " + " | ".join(map(str, row)) + f" | {self.cells.get((h, h), 0)}/{sum(row)} |")
        return "\n".join(lines)


def class_confusion(name: str, records: Records, predict: Callable[[Trajectory], Prediction]) -> ClassConfusion:
    """The class confusion of ``predict`` on the records that carry a labelled class (a prediction with no class
    counts as ``(none)``)."""
    out = ClassConfusion(name=name)
    for t, h in records:
        if h.failure_class:
            out.cells[(h.failure_class, predict(t).failure_class or "(none)")] += 1
    return out


def labelled_records(trajs: Iterable[Trajectory]) -> dict[str, list[tuple[Trajectory, HumanLabel]]]:
    sets: dict[str, list[tuple[Trajectory, HumanLabel]]] = {}
    for t in trajs:
        h = human_label(t)
        if h is not None:
            sets.setdefault(set_name(t), []).append((t, h))
    return dict(sorted(sets.items()))


TUNING_SET = "who-and-when/Algorithm-Generated"



def holdout_split(sets: dict[str, Records]) -> dict[str, Records]:
    """The tuning set cut in two by the SHA-1 of each record id: a third held out (``/held-out``), the rest
    (``/tuning``). Rules are changed looking at the tuning part only; the held-out part says whether they
    generalise before a test set is scored. Other sets are kept whole."""
    out = {k: v for k, v in sets.items() if k != TUNING_SET}
    if TUNING_SET in sets:
        parts: dict[str, Records] = {"tuning": [], "held-out": []}
        for rec in sets[TUNING_SET]:
            held = int(hashlib.sha1(rec[0].id.encode()).hexdigest(), 16) % 3 == 0
            parts["held-out" if held else "tuning"].append(rec)
        out.update({f"{TUNING_SET}/{k}": v for k, v in parts.items()})
    return dict(sorted(out.items()))


def test_sets() -> tuple[str, ...]:
    """The sets that are test sets of the public data, never tuned on: Who&When Hand-Crafted, AgentRx's relabelling of
    the same Magentic-One runs, the tau airline dev sample's test, test2 and test3 splits (only its tune split is
    tuned on) and the second blind SWE set. ``label_accuracy.py --holdout`` (the tuning view) leaves them out unless
    ``--only`` names one (the tau splits were scored by it until the twenty-sixth session)."""
    return ("who-and-when/Hand-Crafted", AGENTRX_SETS["agentrx"], *(f"{DEV_SET}/{h}" for h in HALVES if h != "tune"),
            SWE_BLIND2_SET)


def without_test_sets(sets: dict[str, Records], named: Iterable[str] = ()) -> tuple[dict[str, Records], list[str]]:
    """``sets`` less the test sets (``test_sets``) not in ``named``, and the names of those left out."""
    keep = set(named)
    out = [k for k in sets if k in test_sets() and k not in keep]
    return {k: v for k, v in sets.items() if k not in out}, out


DEV_SET = "tau-airline-dev"
DEV_RUNS = Path("tau_bench_airline_gpt4o") / "gpt-4o-airline.json"  # under the public data folder
PARTIES = ("agent", "user", "environment")
HALVES = ("tune", "test", "test2", "test3")  # test2, test3: later blind sets (benchmarks/data/README.md)


def read_dev_labels(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The dev-labelled tau-bench sample (``benchmarks/data/tau_airline_dev_labels.json``: labels written by this
    project, not by humans) by ``(task_id, trial)``. Raises ``InputError`` on a file that is not that layout."""
    try:
        rows = json.loads(path.read_text())["labels"]
        out = {}
        for i, r in enumerate(rows):
            step = r["step"]
            if r["half"] not in HALVES or r["party"] not in PARTIES or not isinstance(step, int) \
                    or isinstance(step, bool) or step < 0:
                raise ValueError(f"label {i}: half, party or step out of range")
            if not isinstance(r["category"], str) or crosswalk(r["category"]) is None:
                # an unknown category was scored with no class (its run dropped); a non-string one was a traceback
                raise ValueError(f"label {i}: category {r['category']!r} is none of AgentRx's nine")
            out[(str(r["task_id"]), int(r["trial"]))] = r
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise InputError(str(path), f"not a dev-label file ({e})") from None
    return out


def dev_labelled_records(labels: dict[tuple[str, int], dict[str, Any]], trajs: Iterable[Trajectory],
                         dropped: list[str] | None = None) -> dict[str, Records]:
    """The dev-labelled runs among ``trajs`` (tau-bench records, joined by task id and trial), as the sets
    ``tau-airline-dev/tune``, ``tau-airline-dev/test``, ``tau-airline-dev/test2`` and ``tau-airline-dev/test3``.
    The class is the crosswalk of the category for an agent failure and E where the labelled party is the
    simulated user or the environment (class E's definition); a single-agent run has no agent to attribute.
    A label that cannot be scored (no such run, a step past the run's end) is left out, with one line on why
    appended to ``dropped`` (it was left out unsaid: a set scored on fewer records than it has)."""
    out: dict[str, Records] = {}
    seen: set[tuple[str, int]] = set()
    for t in trajs:
        r = labels.get((t.task_id, t.rollout))
        if r is None:
            continue
        seen.add((t.task_id, t.rollout))
        if not 0 <= r["step"] < len(t.messages):
            _drop(dropped, r, f"task {t.task_id} trial {t.rollout}", f"step {r['step']} is past the run's end "
                  f"({len(t.messages)} messages)")
            continue
        cls = crosswalk(r["category"]) if r["party"] == "agent" else "E"
        out.setdefault(f"{DEV_SET}/{r['half']}", []).append((t, HumanLabel(step=r["step"], agent=None,
                                                                           failure_class=cls)))
    for (task, trial), r in sorted(labels.items()):
        if (task, trial) not in seen:
            _drop(dropped, r, f"task {task} trial {trial}", "no such run among the runs read")
    return dict(sorted(out.items()))


def _drop(dropped: list[str] | None, label: dict[str, Any], which: str, why: str) -> None:
    if dropped is not None:
        dropped.append(f"{which} ({label.get('half') or label.get('run')}): {why}")


SWE_DEV_SET = "swe-mini-dev"
SWE_DEV_RUNS = Path("mini_swe_agent_sample")  # under the public data folder
SWE_HALVES = ("tune", "test")
SWE_FRESH_SET = "swe-fresh-dev"  # benchmarks/data/swe_fresh_runs: other people's runs, labelled blind
SWE_BLIND2_SET = "swe-blind2-dev"  # benchmarks/data/swe_blind2_runs: CodeR runs (another agent, model), blind


def read_swe_dev_labels(path: Path, halves: tuple[str, ...] = SWE_HALVES) -> dict[str, dict[str, Any]]:
    """The dev-labelled failed SWE-bench runs (``benchmarks/data/swe_mini_dev_labels.json``: labels written by this
    project, not by humans) by instance id. ``halves=("",)`` reads a file of one set, no ``half`` field
    (``swe_fresh_dev_labels.json``). Raises ``InputError`` on a file that is not that layout."""
    try:
        rows = json.loads(path.read_text())["labels"]
        out = {}
        for i, r in enumerate(rows):
            step = r["step"]
            if r.get("half", "") not in halves or r["party"] not in PARTIES or not isinstance(step, int) \
                    or isinstance(step, bool) or step < 0 or not isinstance(r["instance_id"], str):
                raise ValueError(f"label {i}: instance_id, half, party or step out of range")
            if not isinstance(r["category"], str) or crosswalk(r["category"]) is None:
                raise ValueError(f"label {i}: category {r['category']!r} is none of AgentRx's nine")
            out[r["instance_id"]] = r
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise InputError(str(path), f"not a SWE dev-label file ({e})") from None
    return out


def swe_dev_records(labels: dict[str, dict[str, Any]], trajs: Iterable[Trajectory],
                    dropped: list[str] | None = None, set_name: str = SWE_DEV_SET) -> dict[str, Records]:
    """The dev-labelled runs among ``trajs`` (mini-swe-agent runs, joined by instance id = task id) that their
    own report calls unresolved (score 0), as ``swe-mini-dev/tune`` and ``swe-mini-dev/test``; a single-agent run
    has no agent to attribute. A label left out (no such run, a run not scored unresolved, a step past the run's
    end) appends one line on why to ``dropped``. A label with no ``half`` goes to the set ``set_name`` itself."""
    out: dict[str, Records] = {}
    seen: set[str] = set()
    for t in trajs:
        r = labels.get(str(t.task_id))
        if r is None:
            continue
        seen.add(str(t.task_id))
        why = (f"its run is not scored unresolved (score {t.score})" if t.score != 0 else
               f"step {r['step']} is past the run's end ({len(t.messages)} messages)"
               if not 0 <= r["step"] < len(t.messages) else None)
        if why:
            _drop(dropped, r, str(t.task_id), why)
            continue
        cls = crosswalk(r["category"]) if r["party"] == "agent" else "E"
        name = f"{set_name}/{r['half']}" if r.get("half") else set_name
        out.setdefault(name, []).append((t, HumanLabel(step=r["step"], agent=None, failure_class=cls)))
    for iid, r in sorted(labels.items()):
        if iid not in seen:
            _drop(dropped, r, iid, "no such run among the runs read")
    return dict(sorted(out.items()))


def public_sets(data_root: Path) -> list[Path]:
    return [data_root / "who_and_when", data_root / "agentrx_magentic_one"]


def beats_every_baseline(score: SetScore, labeller: str = "evoharness") -> list[str]:
    """Figures where ``labeller`` is not strictly above a trivial labeller that reports the same figure."""
    misses = []
    mine = score.figures.get(labeller, {})
    for fig, (hits, n) in mine.items():
        for base in baselines_for(score.name):
            other = score.figures.get(base, {}).get(fig)
            if other and other[1] and hits / n <= other[0] / other[1]:
                misses.append(f"{score.name} {fig}: {hits}/{n} <= {base} {other[0]}/{other[1]}")
    return misses


def table(scores: list[SetScore], labellers: list[str]) -> str:
    """A markdown table: one row per set and labeller, hits/n (percent) per figure."""
    head = "| set | labeller | step exact | step ±1 | step ±3 | agent | class (crosswalk) |"
    lines = [head, "|" + "---|" * 7]
    for s in scores:
        for lname in labellers:
            figs = s.figures.get(lname)
            if not figs:
                continue
            cells = [_cell(figs.get(f)) for f in FIGURES]
            lines.append(f"| {s.name} (n={s.n}) | {lname} | " + " | ".join(cells) + " |")
        lines.append(f"| {s.name} | published | {published(s.name)} | | | | |")
    return "\n".join(lines)


def published(name: str) -> str:
    """The published figure of a set, or of the set a split part came from."""
    return PUBLISHED.get(name) or next((v for k, v in PUBLISHED.items() if name.startswith(k + "/")), "")


def _cell(v: tuple[int, int] | None) -> str:
    if not v:
        return "–"
    hits, n = v
    return f"{hits}/{n} ({100 * hits / n:.1f}%)"


def to_json(scores: list[SetScore]) -> dict[str, Any]:
    return {s.name: {"n": s.n, "published": published(s.name) or None,
                     "labellers": {k: {f: {"hits": h, "n": n, "rate": round(h / n, 4)} for f, (h, n) in v.items()}
                                   for k, v in s.figures.items()}}
            for s in scores}
