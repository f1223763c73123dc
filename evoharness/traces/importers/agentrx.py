"""Bare message lists: AgentRx's Magentic-One runs (``[{"role": ..., "content": ...}, ...]``).

AgentRx (microsoft/AgentRx, ``data/magentic_dataset/``) stores each run as a JSON list of
``{role, content}`` messages whose roles name the speaker: ``human``, ``Orchestrator
(thought)``, ``Orchestrator (-> WebSurfer)``, ``WebSurfer``, ``FileSurfer``, ... Message i
of the list is step i (AgentRx's 1-based ``step_number`` n is step n-1).

Roles become agents: ``human`` / ``user`` / ``system`` keep their chat role; every other role
becomes an assistant message whose ``name`` is the agent (the part before `` (``, so the
Orchestrator's thoughts and instructions are all the Orchestrator's), with the full role kept
in ``role_detail``. The final answer is the text after the last ``FINAL ANSWER:`` (else the
last agent message's text). These runs are failure-only and unscored.

A message that carries a ``name`` is that agent's, whatever its role: AG2's / AutoGen 0.2's
``ChatResult.chat_history`` (``{content, role, name}``) gives ``role`` from one agent's view -- the other agent's
turns are ``user`` -- and ``name`` says who spoke. There the first message, the initiator's, is the task, and the
run is unscored but not failure-only (nothing says how it ended). Its tool calls and results become calls and
``tool`` steps (``ag2``); one AG2 message holding several results is several steps (``meta["source_index"]``).

When AgentRx's ground truth (``ground_truth.json`` beside the file or one folder up, or
``*ground_truth.json`` there or in a ``ground_truth/`` folder there: ``ground_truth_files``) holds this run,
its human failure labels are kept in ``meta["human_failures"]`` as ``{step, category, agent, reason}`` with
0-based steps. A ground-truth file that cannot be used (unreadable, not JSON, not a list of
``{trajectory_id, failures: [...]}`` records) is named in ``meta["import_warnings"]`` of every run it may label
(``import`` / ``label`` / ``diagnose`` print one ``warning:`` line per file): labels are optional, but a broken
file is not silently no labels.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.traces import jsontext
from evoharness.traces.importers import ag2, dirscan, neighbours
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.patterns import classify_tool_error

FINAL = re.compile(r"FINAL ANSWER:[ \t]*([^\n]+)", re.IGNORECASE)
CHAT_ROLES = {"human": "user", "user": "user", "system": "system"}
GROUND_TRUTH = "ground_truth.json"
GROUND_TRUTH_DIR = "ground_truth"
SIDECARS = frozenset({GROUND_TRUTH, "steps_by_id.json", "magentic_count.jsonl"})


def is_message_list(data: Any) -> bool:
    """A non-empty JSON list of ``{role, content}`` objects with no trajectory wrapper."""
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return False
    first = data[0]
    return isinstance(first.get("role"), str) and "content" in first and not (
        {"messages", "traj", "task_id"} & first.keys())


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def agent_of(role: str) -> str:
    base = role.split(" (", 1)[0].strip()
    return re.sub(r"[^A-Za-z0-9_-]+", "_", base).strip("_")[:64] or "agent"


def convert(path: Path, data: Any) -> Trajectory:
    if not isinstance(data, list):
        raise ValueError("a message-list run must be a JSON list of {role, content} messages")
    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    source_index: list[int] = []  # our message k is data[source_index[k]] (AG2: one message holds several results)
    pending: list[dict[str, Any]] = []  # AG2: the latest calls, answered by the results that follow
    tools = ag2.is_history(data)
    names = ag2.speakers(data) if tools else set()
    task = None
    final_answer = None
    steps = 0
    named = tools
    for i, m in enumerate(data):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"message {i} has no string 'role'")
        role, content = m["role"], m.get("content")
        content = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        name = m.get("name") if isinstance(m.get("name"), str) and m["name"].strip() else None
        chat = CHAT_ROLES.get(role.strip().lower())
        if tools and ag2.makes_calls(m):  # a model's tool-call reply: its agent's turn
            steps += 1
            pending = ag2.calls(m, i)
            source_index.append(i)
            messages.append({"role": "assistant", "name": agent_of(name or ag2.caller(data, i, names)),
                             "role_detail": role, "content": content, "tool_calls": pending})
            continue
        if tools and (answers := ag2.results(m)) is not None:  # the executor's results, one tool message each
            for k, (call_id, out) in enumerate(answers):
                call = next((c for c in pending if c["id"] == call_id), None) if call_id else (
                    pending[k] if k < len(pending) else None)
                source_index.append(i)
                messages.append({"role": "tool", "tool_call_id": call["id"] if call else call_id or f"call_{i}_{k}",
                                 "name": call["function"]["name"] if call else name or "tool", "content": out})
                if out.startswith("Error"):  # AG2's execute_function: "Error: <what the tool raised>"
                    events.append(Event(type=classify_tool_error(out), step=len(messages) - 1, detail=out[:500]))
            continue
        source_index.append(i)
        if name is not None and chat != "system":  # AG2's chat_history: the role is a reader's view, the name who spoke
            named = True
            steps += 1
            task = content if task is None and not messages else task  # the initiator's opening message: the task
            messages.append({"role": "assistant", "name": agent_of(name), "role_detail": role, "content": content})
            found = FINAL.findall(content)
            final_answer = found[-1].strip() if found else final_answer
            continue
        if chat:
            if chat == "user" and task is None:
                task = content
            messages.append({"role": chat, "content": content})
            continue
        steps += 1
        messages.append({"role": "assistant", "name": agent_of(role), "role_detail": role, "content": content})
        found = FINAL.findall(content)
        if found:
            final_answer = found[-1].strip()
    if final_answer is None:
        for m in reversed(messages):
            if m["role"] == "assistant" and m["content"].strip():
                final_answer = m["content"].strip()
                break
    run_id = path.stem
    meta: dict[str, Any] = {"source_format": "agentrx", "failure_only": not named}
    first: dict[int, int] | None = None  # a label's step_number n names message n - 1 of the file: our first step
    if len(source_index) != len(data):
        meta["source_index"] = source_index
        first = {src: k for k, src in reversed(list(enumerate(source_index)))}
    labels, problems = human_failures(path, run_id, None if first is None else (lambda n: first.get(n - 1)))
    if labels is not None:
        meta["human_failures"] = labels
    if problems:
        meta["import_warnings"] = problems
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"agentrx:{run_id}",
        task_id=run_id,
        task=task,
        events=events,
        final_answer=final_answer,
        score=None,
        termination=Termination.delivered if final_answer is not None else Termination.aborted,
        usage=Usage(steps=steps),
        meta=meta,
    )


def human_failures(path: Path, run_id: str, step_of=None
                   ) -> tuple[list[dict[str, Any]] | None, list[dict[str, str]]]:
    """(The human failure labels of run ``run_id`` from the first ground-truth file near ``path`` that holds it
    (``ground_truth_files``), None when none does; the ground-truth files near it that could not be used, as
    ``import_warnings`` entries ``{kind, file, reason}``). ``step_of`` maps AgentRx's ``step_number`` to our step
    (None: a label it cannot place, left out); by default step_number - 1 (a 1-based index into the message list)."""
    labels = None
    problems: list[dict[str, str]] = []
    for gt in ground_truth_files(path):
        truth = _ground_truth(gt)
        if truth.problem is not None:
            problems.append({"kind": "ground_truth", "file": str(gt),
                             "reason": f"AgentRx ground truth {truth.problem}"})
        rows = truth.rows.get(run_id)
        if rows is None or labels is not None:
            continue
        out = []
        for r in rows:
            step = r["step_number"] - 1 if step_of is None else step_of(r["step_number"])
            if step is not None:
                out.append({"step": step, "category": r["category"], "agent": r["agent"], "reason": r["reason"]})
        labels = sorted(out, key=lambda r: r["step"])
    return labels, problems


def ground_truth_files(path: Path) -> list[Path]:
    """AgentRx ground-truth files for a run at ``path``: ``ground_truth.json`` beside it or one folder up, then
    ``*ground_truth.json`` there and in a ``ground_truth/`` folder there (AgentRx's own layout:
    ``data/tau_dataset/<id>.json`` with ``data/ground_truth/tau_ground_truth.json``)."""
    out: list[Path] = []
    if not neighbours.looked_up():  # a posted document: its temporary file's folders are the server's
        return out
    for folder in (path.parent, path.parent.parent):
        for gt in (folder / GROUND_TRUTH, *_glob_gt(folder), *_glob_gt(folder / GROUND_TRUTH_DIR)):
            if gt not in out and gt.is_file():
                out.append(gt)
    return out


def _glob_gt(folder: Path) -> list[Path]:
    """``folder``'s ``*ground_truth.json`` (listed once per folder, not once per run: ``dirscan``)."""
    return dirscan.matching(folder, _NAMED_GROUND_TRUTH)


def _named_ground_truth(name: str) -> bool:
    return name.endswith(GROUND_TRUTH) and not name.startswith(".")


_NAMED_GROUND_TRUTH = dirscan.Keep(_named_ground_truth)


def is_ground_truth(f: Path) -> bool:
    """Whether ``f`` is an AgentRx ground-truth file (joined with the runs, not a trace): named
    ``*ground_truth.json`` or in a ``ground_truth/`` folder, naming ``trajectory_id`` in its first 64 KiB (a
    ``*ground_truth.json`` that cannot be opened is one too)."""
    if not (f.name.endswith(GROUND_TRUTH) or f.parent.name == GROUND_TRUTH_DIR):
        return False
    try:
        with f.open("rb") as fh:
            head = fh.read(64 << 10)
    except OSError:  # an unreadable *ground_truth.json is a broken ground truth (a warning), not a broken trace
        return f.name.endswith(GROUND_TRUTH)
    return b'"trajectory_id"' in head or (f.parent.name == GROUND_TRUTH_DIR and head.lstrip()[:1] == b"[")


class _Truth:
    """One ground-truth file read: rows by run id (raw ``step_number``), and why (part of) it could not be used."""

    __slots__ = ("rows", "problem")

    def __init__(self, rows: dict[str, list[dict[str, Any]]], problem: str | None) -> None:
        self.rows, self.problem = rows, problem


_RECORD = "{trajectory_id, failures: [...]}"
_NONE = ": no human labels from it"
_TRUTH_MAX = 8  # files remembered; a file rewritten in place (new mtime, size or inode) is read again, and one
# changed within dirscan.SETTLED_NS is not remembered (a rewrite in the same mtime tick, of the same size)
_truths: OrderedDict[tuple[str, int, int, int], _Truth] = OrderedDict()
_truth_lock = threading.Lock()  # the service imports in threads


def _ground_truth(path: Path) -> _Truth:
    """AgentRx ground truth by run id, remembered per (path, inode, mtime, size)."""
    try:
        st = os.stat(path)
        key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError as e:
        return _Truth({}, f"unreadable ({e.strerror or e}){_NONE}")
    with _truth_lock:
        hit = _truths.get(key)
        if hit is not None:
            _truths.move_to_end(key)
            return hit
    truth = _read_ground_truth(path)
    if time.time_ns() - st.st_mtime_ns <= dirscan.SETTLED_NS:  # being written: read again next time
        return truth
    with _truth_lock:
        _truths[key] = truth
        while len(_truths) > _TRUTH_MAX:
            _truths.popitem(last=False)
    return truth


def _read_ground_truth(path: Path) -> _Truth:
    try:
        data = jsontext.loads(path.read_bytes())
    except OSError as e:
        return _Truth({}, f"unreadable ({e.strerror or e}){_NONE}")
    except json.JSONDecodeError as e:
        return _Truth({}, f"is not valid JSON ({e.msg}: line {e.lineno} col {e.colno}){_NONE}")
    except (ValueError, RecursionError) as e:  # not UTF-8, nested too deeply, a huge integer
        return _Truth({}, f"is not readable JSON ({type(e).__name__}){_NONE}")
    if not isinstance(data, list):
        kind = {dict: "an object", str: "a string"}.get(type(data), "a number or literal")
        return _Truth({}, f"is {kind}, not a list of {_RECORD} records{_NONE}")
    out: dict[str, list[dict[str, Any]]] = {}
    bad = 0
    for rec in data:
        if not isinstance(rec, dict) or rec.get("trajectory_id") is None or not isinstance(rec.get("failures"), list):
            bad += 1
            continue
        rows = []
        for f in rec["failures"]:
            n = _step_number(f.get("step_number")) if isinstance(f, dict) else None
            if n is not None and n >= 1:
                rows.append({"step_number": n, "category": str(f.get("failure_category", "")),
                             "agent": str(f.get("failed_agent", "")), "reason": str(f.get("step_reason", ""))})
        out[str(rec.get("trajectory_id"))] = sorted(rows, key=lambda r: r["step_number"])
    problem = None
    if bad:
        problem = (f"has {bad} of {len(data)} records that are no {_RECORD} object: "
                   + ("no human labels from it" if not out else "the runs they name get no human labels"))
    return _Truth(out, problem)


def _step_number(n: Any) -> int | None:
    """A ``step_number`` as an int: AgentRx's scorers read it with ``int()`` (``score_tau_ablation.py``,
    ``step_accuracy.py``), so ``7``, ``"7"`` and ``7.0`` are one step; anything else (a fraction, a word, a bool)
    is none."""
    if isinstance(n, bool):
        return None
    if isinstance(n, int):
        return n
    if isinstance(n, float) and n.is_integer():
        return int(n)
    if isinstance(n, str) and n.strip().isascii() and n.strip().isdigit():
        return int(n.strip())
    return None
