"""mini-swe-agent ``*.traj.json`` trajectories, joined with SWE-bench ``report.json``.

mini-swe-agent speaks plain text: each assistant reply must hold exactly one fenced
```bash block. We turn a well-formed reply into an assistant message with one
``bash`` tool call and the following ``<returncode>...`` user message (or the timeout message, "The last
command <command>...</command> timed out and has been killed ...") into the tool result, so the loop and
friction detectors see real tool calls. Replies the harness
rejected ("Please always provide EXACTLY ONE action ...") stay as text and become
``format_rejected`` events at the rejecting message.

v2 (``trajectory_format`` "mini-swe-agent-1.1"): native ``tool_calls`` and ``tool`` results, text-based
``extra.actions`` / ```mswea_bash_command blocks with ``extra.returncode`` observations, Responses-API items,
``extra.interrupt_type == "FormatError"`` rejections, and the closing ``exit`` message (left out; its
``extra.exit_status`` / ``submission`` used where ``info`` lacks them; ``meta["source_index"]`` then maps our
steps to the file's messages). A reply's ``reasoning_content`` (the model's thinking, saved with its message) is kept
in ``meta["reasoning"]`` (``{step, text}``), not in the reply's text.

Score: SWE-bench's verdict, 1.0 resolved, 0.0 not, unscored (None) when no result names the
instance. The lookup (``find_results``) walks the trajectory's directory and at most
``MAX_PARENTS`` directories above it; in each directory ``d`` it reads:

- ``d/report.json`` (only beside the trajectory): a per-instance report, plain or ``{instance_id: {...}}``;
- ``d/logs/<instance>/report.json`` (the ``<root>/trajs/<instance>/`` + ``<root>/logs/`` layout);
- ``d/logs/run_evaluation/<run_id>/<model>/<instance>/report.json`` (the SWE-bench harness's logs);
- aggregate reports: ``*.json`` in ``d``, ``d/reports`` and ``d/sb-cli-reports`` whose JSON is an object
  with ``resolved_ids`` / ``unresolved_ids`` lists (the harness's ``<model>.<run_id>.json``, sb-cli's
  ``<subset>__<split>__<run_id>.json``). A file over ``SIZE_CAP`` bytes, a ``*.traj.json``, or one that names
  none of those keys (in its first 64 KiB, or at the top level of an object of id lists and counts further
  on: ``looks_aggregate``) is never parsed.

A file taken for results (so no trace) that cannot be read (cut short, not JSON), or a per-instance ``report.json``
that cannot be (cut short, no ``resolved`` flag, or one that is not true / false), gives no verdicts and is named
in ``meta["import_warnings"]``.

Never a guess: an instance in neither id list of an aggregate (an error, an empty patch) gets no verdict
from it. Where harness logs or aggregates of several models hold the instance, those named for the
trajectory's model (``model_name`` with ``/`` as ``__``, as the harness names them) are used when any is.
Two results that disagree (or an aggregate listing the instance as both) are one ``InputError`` naming both
files. ``meta["report"]`` is the first result found.

Only the trajectory's own run's results count (``_in_other_runs_folders``, ``_of_this_run``): results in
another run's output folder above the trajectory's (its trajectory of the instance, or its predictions file
above this run's own) are that run's; its run is a ``run_id`` in its JSON, else a result's run id naming one of
its folders; when neither tells, results of a run whose folder sits beside one of the trajectory's do not count,
and results of several runs count for none. ``meta["results_set_aside"]``
says why results were set aside.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.endings import infra_event, provider_exception
from evoharness.traces.importers import dirscan, neighbours
from evoharness.traces.importers._shape import actions_from_text, arguments, content_text, keep_reasoning
from evoharness.traces.models import Event, Termination, Trajectory, Usage

ACTION_OPENING = re.compile(r"```(?:bash|mswea_bash_command)\s*\n")  # v1 / v2 text-based: see ``action_blocks``
FORMAT_ERROR = re.compile(r"^\s*Please always provide EXACTLY ONE action", re.IGNORECASE)
OBSERVATION = re.compile(r"^\s*<returncode>", re.IGNORECASE)
# v1's timeout_template: the observation of a command that ran out of time ("The last command <command>...</command>
# timed out and has been killed. The output of the command was: ...")
TIMEOUT_OBSERVATION = re.compile(r"^\s*The last command <command>")

# ``info.exit_status`` (v2: also the exit message's ``extra.exit_status``), lower-cased and stripped -> termination. The
# agent's own ends (v1 ``agents/default.py``, v2 ``exceptions.py``): ``Submitted`` delivered; ``LimitsExceeded`` (the
# step or cost limit the harness sets) the step budget; ``TimeExceeded`` (v2: the wall-clock limit it sets) a timeout.
# Anything else the run raised is written as its class name by the batch runner (``run/extra/swebench.py``):
# ``ContextWindowExceededError`` (LiteLLM) / ``ContextWindowExceeded`` (v2) the context window;
# ``ExecutionTimeoutError`` (a command ran out of time, where a fork ends the run on it) a timeout;
# ``UserInterruption`` (v2, interactive: a person stopped it) aborted; a provider or sandbox fault
# (``endings.PROVIDER_EXCEPTIONS``: ``RateLimitError``, ``APIConnectionError``, ...) an error with an ``infra_error``
# event (class E); any other exception (``RuntimeError``, ...) an error; none aborted.
_TERMINATION = {
    "submitted": Termination.delivered,
    "limitsexceeded": Termination.step_budget,
    "executiontimeouterror": Termination.timeout,
    "contextwindowexceedederror": Termination.context_overflow,
    "contextwindowexceeded": Termination.context_overflow,
    "timeexceeded": Termination.timeout,
    "userinterruption": Termination.aborted,
}


MAX_PARENTS = 3  # directories searched above the trajectory's own
SIZE_CAP = 32 << 20  # bytes: a result file larger than this is not read
_HEAD = 64 << 10
_AGGREGATE_KEYS = (b'"resolved_ids"', b'"unresolved_ids"', b'"total_instances"', b'"resolved_instances"')
_LIST_CAP = 10_000  # entries of one directory looked at (run ids, models)
_aggregate_cache: dict[tuple[str, int, int], tuple[frozenset, frozenset] | None] = {}
_AGGREGATE_CACHE_MAX = 64  # files remembered (a long-lived service imports without end): the oldest go first
_aggregate_lock = threading.Lock()
_UNSEEN = object()


def _size(f: Path) -> int | None:
    try:
        st = f.stat()
    except OSError:
        return None
    return st.st_size if f.is_file() else None


def _listdir(d: Path) -> list[Path]:
    try:
        with os.scandir(d) as it:
            return [Path(e.path) for _, e in zip(range(_LIST_CAP), it, strict=False)]
    except OSError:
        return []


def looks_aggregate(f: Path) -> bool:
    """Whether ``f`` names an aggregate's id lists or counts (cheap: never parses, memory bounded): one of
    the keys in its first 64 KiB, or, further on (keys sorted put ``completed_ids`` and ``error_ids`` of a
    full run first), a key at the top level of an object whose values before it are id lists and numbers."""
    try:
        with f.open("rb") as fh:
            head = fh.read(_HEAD)
            if any(k in head for k in _AGGREGATE_KEYS):
                return True
            if len(head) < _HEAD or not head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"{"):
                return False
            fh.seek(0)
            return _top_level_key(fh, {k.strip(b'"') for k in _AGGREGATE_KEYS})
    except OSError:
        return False


_PUNCT = re.compile(rb'["\[\]{},]')
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_MAX_STRING = 1 << 20  # bytes: a longer string is no id or count of an aggregate report
_IDS = re.compile(rb'(?:\s*+"[^"\\]*+"\s*+,)*+')  # a run of plain ids in a list, skipped in C


def _top_level_key(fh, keys: set[bytes], chunk: int = _HEAD) -> bool:
    """Whether the JSON object in ``fh`` has one of ``keys`` at its top level before any nested object.

    A streaming scan of at most ``SIZE_CAP`` bytes holding one chunk and a partial token: an aggregate's
    values are lists of ids, numbers and strings, so the first ``{`` inside it (a trace's messages) ends
    the scan in the first few bytes of any trace file."""
    buf, read, i = b"", 0, 0
    depth, expect_key = 0, False
    while True:
        m = _PUNCT.search(buf, i)
        if m is None or (buf[m.start():m.start() + 1] == b'"' and not _STRING.match(buf, m.start())):
            if read >= SIZE_CAP or (m is not None and len(buf) - m.start() > _MAX_STRING):
                return False
            more = fh.read(chunk)
            if not more:
                return False
            read += len(more)
            buf, i = (buf[m.start():] if m is not None else b"") + more, 0
            continue
        c, i = buf[m.start():m.start() + 1], m.end()
        if c == b'"':
            s = _STRING.match(buf, m.start())
            i = s.end()
            if depth == 1 and expect_key:
                if s.group()[1:-1] in keys:
                    return True
                expect_key = False
        elif c == b"{":
            if depth:
                return False  # an object inside: no aggregate report (a trace's messages, events, ...)
            depth, expect_key = 1, True
        elif c == b"[":
            depth += 1
            i = _IDS.match(buf, i).end()
        elif c == b"]":
            depth -= 1
        elif c == b"}":
            return False  # the top-level object ended
        elif c == b"," and depth == 1:
            expect_key = True
        elif c == b",":
            i = _IDS.match(buf, i).end()


def is_sidecar(f: Path) -> bool:
    """Whether ``f`` is a SWE-bench result or prediction file joined with trajectories, not a trace: a
    ``report.json`` under a ``logs`` directory or beside a ``*.traj.json``, an aggregate report, a
    ``preds.json`` (or a submission's ``all_preds.jsonl``) of patches, SWE-bench/experiments' ``results/``
    folder (``results.json`` and its breakdowns beside it: ``resolved_by_repo.json``, ``resolved_by_time.json``)."""
    if f.name == "report.json" and ("logs" in f.parts[-7:-1] or any(f.parent.glob("*.traj.json"))
                                     or any(f.parent.glob("*.traj"))):
        return True
    if f.name in ("all_preds.jsonl", "preds.jsonl") or f.name.endswith(".predictions.jsonl"):
        return _head_has(f, b'"model_patch"')
    if f.suffix != ".json" or f.name.endswith(".traj.json"):
        return False
    if f.name == "preds.json" or f.name.endswith(".predictions.json"):
        return _head_has(f, b'"model_patch"')
    if f.parent.name == "results" and f.name != "results.json" and looks_experiments(f.parent / "results.json"):
        return True
    return looks_aggregate(f) or looks_experiments(f)


def _head_has(f: Path, needle: bytes) -> bool:
    try:
        with f.open("rb") as fh:
            return needle in fh.read(_HEAD)
    except OSError:
        return False


_EXPERIMENT_KEYS = (b'"no_generation"', b'"generated"', b'"with_logs"', b'"applied"', b'"no_apply"',
                    b'"install_fail"')
# the lists SWE-bench/experiments' results.json holds (get_model_report; newer submissions: no_generation, no_logs,
# resolved)
_EXPERIMENT_LISTS = frozenset({"resolved", "no_generation", "generated", "with_logs", "install_fail", "reset_failed",
                               "no_apply", "applied", "test_errored", "test_timeout", "no_logs"})
_FIRST_KEY = re.compile(rb'\s*\{\s*"([^"\\]{1,64})"\s*:')


def looks_experiments(f: Path) -> bool:
    """Whether ``f`` is SWE-bench/experiments' ``results/results.json`` (``{"no_generation": [ids], ...,
    "resolved": [ids]}``), whole or broken: named ``results.json`` and either its first key is one of those
    lists, or ``"resolved"`` and one of the other lists are in its first 64 KiB; or, when no first key can be
    read (empty, cut before it, unreadable), it sits in a submission's ``results/`` folder (``trajs/``, ``logs/``,
    ``metadata.yaml``, ``preds.json`` or ``all_preds.jsonl`` beside that folder, or ``resolved_by_repo.json`` in
    it). Never a trace: a results file that cannot be read is a warning (``_aggregate``), not a trace to import."""
    if f.name != "results.json":
        return False
    try:
        with f.open("rb") as fh:
            head = fh.read(_HEAD)
    except FileNotFoundError:
        return False
    except OSError:  # permission denied, ...: results by where it is, unread
        return _experiments_layout(f)
    if b'"resolved"' in head and any(k in head for k in _EXPERIMENT_KEYS):
        return True
    first = _FIRST_KEY.match(head.removeprefix(b"\xef\xbb\xbf"))
    if first is not None:
        return first.group(1).decode("utf-8", "replace") in _EXPERIMENT_LISTS
    return _experiments_layout(f)


def _experiments_layout(f: Path) -> bool:
    """Whether ``f`` sits where SWE-bench/experiments keeps its results: ``<submission>/results/`` (``trajs/``,
    ``logs/``, ``metadata.yaml``, or a run's predictions -- ``preds.json``, ``all_preds.jsonl`` -- beside it)."""
    d = f.parent
    return d.name == "results" and ((d.parent / "trajs").is_dir() or (d.parent / "logs").is_dir()
                                    or (d.parent / "metadata.yaml").is_file()
                                    or any((d.parent / n).is_file() for n in _PREDS)
                                    or (d / "resolved_by_repo.json").is_file())


class _Broken(str):
    """Why a file taken for SWE-bench results (named and shaped like one, so no trace) gives no verdict to any run:
    it could not be read, or it lists no instance at all."""


def _aggregate(f: Path) -> tuple[frozenset, frozenset] | _Broken | None:
    """(resolved ids, unresolved ids) of an aggregate report, None when ``f`` is not one, ``_Broken`` (why) when
    it looks like one (``looks_aggregate`` / ``looks_experiments``: so it is not imported as a trace) but cannot be
    read: not JSON (cut short), no object, an experiments ``results.json`` without its ``resolved`` list; or when
    every id list in it is empty (an evaluation that judged nothing)."""
    if f.name.endswith(".traj.json") or f.name == "report.json":
        return None
    try:
        st = f.stat()
    except OSError:
        return None
    key = (str(f), st.st_mtime_ns, st.st_size)
    result = _aggregate_cache.get(key, _UNSEEN)
    if result is _UNSEEN:
        result = None
        experiments = f.name == "results.json" and looks_experiments(f)
        if st.st_size <= SIZE_CAP and (experiments or looks_aggregate(f)):
            result = _read_aggregate(f, experiments)
        if time.time_ns() - st.st_mtime_ns <= dirscan.SETTLED_NS:  # being written: a rewrite within the same
            return result  # mtime tick, of the same size, would keep this stamp
        with _aggregate_lock:  # the service imports in threads: another may evict or insert meanwhile
            while len(_aggregate_cache) >= _AGGREGATE_CACHE_MAX:
                del _aggregate_cache[next(iter(_aggregate_cache))]
            _aggregate_cache[key] = result
    return result  # not read back from the cache: another thread may have evicted it already


def _read_json(f: Path) -> object:
    """``f``'s JSON value, or ``_Broken`` (why) when it cannot be read or parsed (a results file or a report)."""
    try:
        return jsontext.loads(f.read_bytes())
    except OSError as e:
        return _Broken(f"unreadable ({e.strerror or e})")
    except json.JSONDecodeError as e:
        return _Broken(f"not valid JSON ({e.msg}: line {e.lineno} col {e.colno}; cut short?)")
    except (ValueError, RecursionError) as e:  # not UTF-8, nested too deeply, a huge integer
        return _Broken(f"not readable JSON ({type(e).__name__})")


def _read_aggregate(f: Path, experiments: bool) -> tuple[frozenset, frozenset] | _Broken | None:
    data = _read_json(f)
    if isinstance(data, _Broken):
        return data
    if not isinstance(data, dict):
        return _Broken(f"a JSON {type(data).__name__}, not an object of id lists")
    ids = [data.get(k) for k in ("resolved_ids", "unresolved_ids")]
    aggregate = any(isinstance(v, list) for v in ids)
    if not aggregate and not experiments:
        return None  # counts only, no ids: no verdict from it
    if not aggregate and not isinstance(data.get("resolved"), list):
        return _Broken("no 'resolved' list of instance ids")
    if not any(isinstance(x, str) for v in data.values() if isinstance(v, list) for x in v):
        return _Broken("list no instance (every id list is empty)")  # judged nothing: no run beside it has a verdict
    if aggregate:
        return tuple(frozenset(x for x in v if isinstance(x, str)) if isinstance(v, list)
                     else frozenset() for v in ids)
    # experiments: every instance listed (generated, applied, no_apply, ...) and not resolved is not
    resolved = frozenset(x for x in data["resolved"] if isinstance(x, str))
    listed = {x for k, v in data.items() if k != "resolved" and isinstance(v, list)
              for x in v if isinstance(x, str)}
    return resolved, frozenset(listed - resolved)


def _aggregate_name(name: str) -> bool:
    """Whether a file of this name may be an aggregate report: a ``*.json`` other than a trajectory or a
    per-instance report."""
    return Path(name).suffix == ".json" and not name.endswith(".traj.json") and name != "report.json"


def _aggregate_candidate(f: Path) -> bool:
    """Whether ``f`` may be an aggregate report (``_aggregate`` reads it): so named, of at most ``SIZE_CAP``
    bytes, naming an aggregate's keys (its content: re-checked by ``dirscan`` when the file is rewritten)."""
    if not _aggregate_name(f.name):
        return False
    size = _size(f)
    return size is not None and size <= SIZE_CAP and (looks_aggregate(f) or looks_experiments(f))


_AGGREGATE_CANDIDATE = dirscan.Keep(_aggregate_name, _aggregate_candidate)


def _instance_report(f: Path, instance_id: str) -> bool | _Broken | None:
    """The verdict of a per-instance ``report.json`` (None: no such file, or over ``SIZE_CAP``); ``_Broken`` (why)
    when it cannot be read (cut short, not JSON, no ``resolved`` flag): that run gets no verdict from it."""
    size = _size(f)
    return None if size is None or size > SIZE_CAP else _resolved(f, instance_id)


@dataclass(frozen=True)
class _Result:
    """One SWE-bench verdict on the instance, found near the trajectory."""

    file: Path
    resolved: bool
    owner: str | None  # whose it is by name: "<model dir>/" (a harness log), an aggregate's file name; None: anyone's
    run_name: str | None  # what its run id is read from: its harness run directory, or the aggregate's stem
    found_in: Path  # the directory searched (the trajectory's own or one above) that holds it
    run: str | None = None  # its run id, read by ``_run_of`` once all are found; None: it names no run


def find_results(path: Path, instance_id: str, model: str | None = None,
                 run: str | None = None) -> list[tuple[Path, bool]]:
    """Every SWE-bench verdict on ``instance_id`` near ``path`` that counts for it (see the module docstring),
    in search order, as (file, resolved); filtered to the trajectory's model where several models' results hold
    it and to its run (``run``: the trajectory's own run id, when its metadata names one)."""
    return [(r.file, r.resolved) for r in _find(path, instance_id, model, run)[0]]


def _find(path: Path, instance_id: str, model: str | None, run: str | None
          ) -> tuple[list[_Result], str | None, list[dict[str, str]]]:
    """(the results that count, why results found were set aside: None when none were, the results files found
    that could not be read: ``import_warnings`` entries)."""
    found: list[_Result] = []
    broken: list[dict[str, str]] = []
    if not neighbours.looked_up():  # a posted document: its temporary file's folders are the server's
        return found, None, broken
    models: set[str] = set()  # the harness's model directory names seen: models named exactly
    harness_runs: set[str] = set()
    d = path.parent
    named = path_safe(instance_id)  # an id that is a path ("../x", "/etc") names no folder of its own reports
    for level in range(MAX_PARENTS + 1):
        reports = [(d / "report.json", None, None)] if level == 0 else []
        if named:
            reports.append((d / "logs" / instance_id / "report.json", None, None))
        for run_dir in sorted(_listdir(d / "logs" / "run_evaluation")):
            harness_runs.add(run_dir.name)
            for model_dir in sorted(_listdir(run_dir)):
                models.add(model_dir.name)
                if named:
                    reports.append((model_dir / instance_id / "report.json", model_dir.name + "/", run_dir.name))
        for f, owner, run_name in reports:
            if (v := _instance_report(f, instance_id)) is None:
                continue
            if isinstance(v, _Broken):  # as a broken aggregate: no verdict from it, the rest of the import goes on
                broken.append({"kind": "results", "file": str(f),
                               "reason": f"SWE-bench report {v}: no verdict from it"})
            else:
                found.append(_Result(f, v, owner=owner, run_name=run_name, found_in=d))
        for sub in (d, d / "reports", d / "sb-cli-reports", d / "results"):
            for f in dirscan.matching(sub, _AGGREGATE_CANDIDATE):  # listed once per folder, not per trajectory
                if (agg := _aggregate(f)) is None:
                    continue
                if isinstance(agg, _Broken):  # its verdicts unknown: the run is scored by the others, or not at all
                    broken.append({"kind": "results", "file": str(f),
                                   "reason": f"SWE-bench results {agg}: no verdicts from it"})
                    continue
                resolved, unresolved = instance_id in agg[0], instance_id in agg[1]
                if resolved and unresolved:
                    raise InputError(str(f), f"aggregate report lists {instance_id} as both resolved and unresolved")
                if resolved or unresolved:  # experiments' results.json names no model or run: it always counts
                    plain = f.name == "results.json"
                    found.append(_Result(f, resolved, owner=None if plain else f.name,
                                         run_name=None if plain else f.stem, found_in=d))
        if d.parent == d:
            break
        d = d.parent
    # named for this model? A harness model directory ("<name>/") when its name is the model's; an aggregate
    # <model>.<run_id>.json when it starts with "<model>." and no longer model directory name claims it (with
    # openai__gpt-4.1 among the directories, openai__gpt-4.1.run1.json is gpt-4.1's, not gpt-4's; a
    # directory openai__gpt-4.1/ was taken for gpt-4's too, its name starting with "openai__gpt-4.")
    name = model.replace("/", "__") if model else None
    if name:
        longer = [m for m in models if m.startswith(name + ".")]

        def mine(t: str) -> bool:
            if t.endswith("/"):
                return t == name + "/"
            return t.startswith(name + ".") and not any(t.startswith(m + ".") for m in longer)

        if any(r.owner is not None and mine(r.owner) for r in found):
            found = [r for r in found if r.owner is None or mine(r.owner)]
    # then this run's (after the model's: an aggregate's run id is read from its name past the model's)
    named = models | ({name} if name else set())
    found = [replace(r, run=_run_of(r, harness_runs, named)) for r in found]
    found, other = _in_other_runs_folders(path, instance_id, found, run)
    kept, why = _of_this_run(path, found, run)
    return kept, why or other, list({w["file"]: w for w in broken}.values())


_PREDS = ("preds.json", "all_preds.jsonl")  # a run's output folder: mini-swe-agent's / SWE-agent's, experiments'


def instance_id_of(value: Any, file_id: str) -> str:
    """A trajectory's instance id: its ``instance_id`` when that is a name (a string with more than blanks, or a
    whole number), else ``file_id`` (its file's name): a boolean, an object or a list was the id as Python prints
    it (``"True"``, ``"{'id': ...}"``), which names no result, so the run lost the verdict its file name finds."""
    if isinstance(value, str) and value.strip() or isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return file_id


def path_safe(instance_id: str) -> bool:
    """Whether an instance id can name a folder (``logs/<id>/``, the harness's ``.../<model>/<id>/``, OpenHands'
    ``eval_outputs/<id>/``): one plain name (SWE-bench's ``owner__repo-123``), no separator, no ``.`` / ``..``, no
    NUL. Another id ("../x", "/etc", "a\\0b") read a report outside the run's folders, or ended the import."""
    return instance_id not in ("", ".", "..") and not any(c in instance_id for c in "/\\\0")


def _trajectories_of(folder: str, instance_id: str) -> Iterator[str]:
    """Where a run whose output folder is ``folder`` keeps its trajectory of ``instance_id`` (nowhere, for an id
    that names no folder: ``path_safe``)."""
    if not path_safe(instance_id):
        return
    i = instance_id
    for rel in (f"{i}/{i}.traj.json", f"{i}.traj.json", f"trajs/{i}/{i}.traj.json", f"trajs/{i}.traj",
                f"{i}/{i}.traj", f"{i}.traj"):
        yield os.path.join(folder, rel)


def _in_other_runs_folders(path: Path, instance_id: str, found: list[_Result], run: str | None
                           ) -> tuple[list[_Result], str | None]:
    """``found`` without the results that belong to another run's output folder above the trajectory, and why.

    Results sit in (or above) the folder of the run they judged. A folder above the trajectory's own is another
    run's when it holds that run's trajectory of the same instance (``<id>/<id>.traj.json``, ``trajs/<id>.traj``,
    ...: not this file), or its ``preds.json`` / ``all_preds.jsonl`` while a folder below it, the trajectory's own
    run's, holds one too. Results found in such a folder or above it are that run's: an earlier run's
    ``logs/run_evaluation/`` (or report) above a later run's folder is not the later run's verdict. A result
    whose run id the trajectory's metadata names, or that names one of its folders, still counts."""
    ups = list(path.parents[:MAX_PARENTS + 1])  # ups[0]: the trajectory's own folder (level 0)
    top = max((ups.index(r.found_in) for r in found if r.found_in in ups), default=0)
    if not top:  # none above its own folder: nothing to look at
        return found, None
    ups = ups[:top + 1]
    owner: dict[Path, tuple[Path, str]] = {}  # the first other run's folder at or below each level
    first: tuple[Path, str] | None = None
    own_preds = False
    me = str(path)
    for level, d in enumerate(ups):
        preds = next((n for n in _PREDS if os.path.isfile(os.path.join(d, n))), None)
        if first is None and level:
            theirs = next((t for t in _trajectories_of(str(d), instance_id)
                           if t != me and os.path.isfile(t) and not _same(t, path)), None)
            if theirs is not None:
                first = (d, f"its trajectory {os.path.relpath(theirs, d)} of the same instance is there")
            elif preds is not None and own_preds:
                first = (d, f"its {preds} is there, and this run has its own below it")
        own_preds = own_preds or preds is not None
        if first is not None:
            owner[d] = first
    if not owner:
        return found, None
    folders = {p.name for p in ups}
    kept, aside = [], []
    for r in found:
        named = r.run is not None and (r.run == run or (run is None and r.run in folders))
        (aside if r.found_in in owner and not named else kept).append(r)
    if not aside:
        return found, None
    d, reason = owner[aside[0].found_in]
    return kept, (f"{aside[0].file} belongs to the run whose output folder is {d} ({reason}), not to this "
                  "trajectory's run")


def _same(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _run_of(result: _Result, harness_runs: set[str], models: set[str]) -> str | None:
    """The run id of a result: its harness log's run directory; an aggregate's from its name
    (``<model>.<run_id>``, sb-cli's ``<subset>__<split>__<run_id>``, or ending in a harness run id seen)."""
    stem = result.run_name
    if stem is None:
        return None
    if result.owner is not None and result.owner.endswith("/"):
        return stem
    for r in sorted(harness_runs, key=len, reverse=True):
        if stem == r or stem.endswith(("." + r, "__" + r)):
            return r
    for m in sorted(models, key=len, reverse=True):
        if stem.startswith(m + ".") and len(stem) > len(m) + 1:
            return stem[len(m) + 1:]
    return stem.rsplit("__", 1)[-1] if stem.count("__") >= 2 else stem


def _of_this_run(path: Path, found: list[_Result], run: str | None) -> tuple[list[_Result], str | None]:
    """The results of the trajectory's own run (a result with no run id -- a report beside the trajectory,
    ``logs/<id>/report.json`` -- always counts). Its run: ``run`` (its metadata) when given, else a run id
    that names one of its folders. When neither tells: another run's results whose run folder sits beside one
    of the trajectory's folders (``runs/v1`` beside ``runs/v2``) never count, and results of several runs
    count for none."""
    plain = [r for r in found if r.run is None]
    tagged = [r for r in found if r.run is not None]
    if not tagged:
        return found, None
    if run is not None:
        own = [r for r in tagged if r.run == run]
        if own:
            return plain + own, None
        return plain, f"its run {run!r} (metadata) has no result; another run's ({_names(tagged)}) do not count"
    folders = {p.name for p in path.parents[:MAX_PARENTS + 1]}
    own = [r for r in tagged if r.run in folders]
    if own:
        return plain + own, None
    elsewhere = []
    for r in tagged:
        below = path.parent
        while below != r.found_in and below.parent != below:
            if below.name != r.run and (below.parent / r.run).is_dir():
                elsewhere.append(r)
                break
            below = below.parent
    rest = [r for r in tagged if r not in elsewhere]
    if len({r.run for r in rest}) > 1:
        return plain, (f"results of several runs ({_names(rest)}) hold it and its run cannot be told "
                       "(name its run folder as the run id)")
    if elsewhere:
        return plain + rest, f"the results of run(s) {_names(elsewhere)} belong to a run folder beside its own"
    return found, None


def _names(results: list[_Result]) -> str:
    return ", ".join(sorted({str(r.run) for r in results}))


def find_report(path: Path, instance_id: str, model: str | None = None) -> Path | None:
    """The first result file for ``instance_id`` near ``path`` (``find_results``), None when none."""
    results = find_results(path, instance_id, model)
    return results[0][0] if results else None


def score_of(path: Path, instance_id: str, model: str | None = None, run: str | None = None
             ) -> tuple[float | None, Path | None]:
    """(1.0 resolved / 0.0 not / None unscored, the first result file); ``InputError`` when results disagree."""
    return _score(path, instance_id, model, run)[:2]


def _score(path: Path, instance_id: str, model: str | None, run: str | None
           ) -> tuple[float | None, Path | None, str | None, list[dict[str, str]]]:
    results, why, broken = _find(path, instance_id, model, run)
    if not results:
        return None, None, why, broken
    first, verdict = results[0].file, results[0].resolved
    for other, v in ((r.file, r.resolved) for r in results[1:]):
        if v != verdict:
            raise InputError(str(path), f"SWE-bench results disagree on {instance_id}: {first} says "
                                        f"{'resolved' if verdict else 'unresolved'}, {other} says "
                                        f"{'resolved' if v else 'unresolved'}")
    return (1.0 if verdict else 0.0), first, why, broken


def result_meta(report: Path | None, why: str | None, broken: list[dict[str, str]]) -> dict[str, Any]:
    """The ``meta`` keys of a trajectory's SWE-bench lookup: ``report`` (the first result file), and when there
    are any ``results_set_aside`` (why) and ``import_warnings`` (results files that could not be read)."""
    return {"report": str(report) if report else None, **({"results_set_aside": why} if why else {}),
            **({"import_warnings": broken} if broken else {})}


def _resolved(report_path: Path, instance_id: str) -> bool | _Broken:
    """A per-instance report's ``resolved`` flag, or ``_Broken`` (why) when it cannot be read or the flag is not true
    / false (or 1 / 0)."""
    report = _read_json(report_path)
    if isinstance(report, _Broken):
        return report
    if isinstance(report, dict) and instance_id in report and isinstance(report[instance_id], dict):
        report = report[instance_id]  # SWE-bench harness layout {instance_id: {...}}
    if not isinstance(report, dict) or "resolved" not in report:
        return _Broken(f"has no 'resolved' flag for {instance_id}")
    flag = report["resolved"]  # true / false (or 1 / 0, as OpenHands' records): "false" was bool("false"), resolved
    if isinstance(flag, bool) or (isinstance(flag, int) and flag in (0, 1)):
        return bool(flag)
    return _Broken(f"has a 'resolved' flag that is not true or false ({json.dumps(flag)[:40]}) for {instance_id}")


def matches(rec: dict) -> bool:
    return "messages" in rec and isinstance(rec.get("info"), dict) and (
        "exit_status" in rec["info"] or str(rec.get("trajectory_format", "")).startswith("mini-swe-agent"))


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import load_single

    yield from load_single(path, data, convert, skip_invalid=skip_invalid, on_invalid=on_invalid)


def convert(path: Path, data: Any) -> Trajectory:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ValueError("mini-swe-agent trajectory needs a 'messages' list")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    instance_id = instance_id_of(data.get("instance_id"), path.name.removesuffix(".traj.json"))
    messages: list[dict[str, Any]] = []
    events: list[Event] = []
    source_index: list[int] = []  # our message k is data["messages"][source_index[k]]
    pending: list[str] = []  # the last reply's tool call ids still waiting for a result, in order
    exit_extra: dict[str, Any] = {}
    reasoning: list[dict[str, Any]] = []  # {step, text}: a reply's reasoning_content
    steps = 0
    task = None
    real_calls = False  # a reply with tool calls of its own: not a text-action run
    for i, m in enumerate(data["messages"]):
        role, content, calls, extra = _message(m, i)
        step = len(messages)
        if role == "exit":  # v2's closing message (exit status and submission): no turn of the conversation
            exit_extra = extra
            continue
        source_index.append(i)
        if role == "assistant":
            steps += 1
            real_calls = real_calls or bool(calls)
            if not calls:  # text-based: v2's parsed actions, else exactly one fenced bash block
                actions = [a["command"] for a in extra.get("actions") or () if isinstance(a, dict)
                           and isinstance(a.get("command"), str)] if isinstance(extra.get("actions"), list) else []
                if not actions:
                    blocks = action_blocks(content)
                    actions = [blocks[0].strip()] if len(blocks) == 1 else []
                calls = [{"id": f"call_{step}" if len(actions) == 1 else f"call_{step}_{k}", "type": "function",
                          "function": {"name": "bash", "arguments": json.dumps({"command": a})}}
                         for k, a in enumerate(actions)]
            pending = [c["id"] for c in calls]
            messages.append({"role": "assistant", "content": content, "tool_calls": calls} if calls
                            else {"role": "assistant", "content": content})
            keep_reasoning(reasoning, step, m.get("reasoning_content"))
        elif role == "tool":  # v2 tool-call models: the result names its call
            call_id = str(m.get("tool_call_id") or m.get("call_id") or (pending[0] if pending else f"call_{step}"))
            if call_id in pending:
                pending.remove(call_id)
            messages.append({"role": "tool", "tool_call_id": call_id, "name": "bash", "content": content})
        elif (role == "user" and pending and extra.get("interrupt_type") is None
              and (OBSERVATION.match(content) or "returncode" in extra or TIMEOUT_OBSERVATION.match(content))):
            messages.append({"role": "tool", "tool_call_id": pending.pop(0), "name": "bash", "content": content})
        else:
            if role == "user" and (FORMAT_ERROR.match(content) or extra.get("interrupt_type") == "FormatError"):
                events.append(Event(type="format_rejected", step=step, detail=content[:300]))
            elif role == "user" and task is None:
                task = content
            messages.append({"role": role, "content": content})

    exit_status = str(info.get("exit_status") or exit_extra.get("exit_status") or "").strip()
    termination = _TERMINATION.get(exit_status.lower(), Termination.error if exit_status else Termination.aborted)
    submission = info.get("submission") if "submission" in info else exit_extra.get("submission")
    final_answer = submission if termination == Termination.delivered and isinstance(submission, str) else None
    if termination == Termination.delivered and final_answer is None:
        final_answer = ""
    if termination == Termination.step_budget:
        events.append(Event(type="budget_exhausted", step=max(len(messages) - 1, 0), detail=exit_status))
    elif termination == Termination.timeout:
        events.append(Event(type="timeout", step=max(len(messages) - 1, 0), detail=exit_status))
    elif termination == Termination.error and provider_exception(exit_status):
        said = submission if isinstance(submission, str) else ""  # the runner saves str(exception) there
        events.append(infra_event(max(len(messages) - 1, 0), f"{exit_status}: {said}" if said else exit_status))

    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model = (config.get("model") or {}).get("model_name") if isinstance(config.get("model"), dict) else None
    model = model if isinstance(model, str) and model else None  # a number there was a multi-line pydantic error
    run = next((r for r in (data.get("run_id"), info.get("run_id")) if isinstance(r, str) and r), None)
    score, report, why, broken = _score(path, instance_id, model, run)
    return Trajectory.with_messages(  # each message a new plain dict with a string role, made above: not copied
        messages, checked=True,
        id=f"mini-swe-agent:{instance_id}",
        task_id=instance_id,
        model=model,
        task=task,
        events=events,
        final_answer=final_answer,
        score=score,
        termination=termination,
        usage=Usage(steps=steps),
        meta={"source_format": "mini-swe-agent", "exit_status": exit_status,
              "api_calls": stats.get("api_calls"), "cost": stats.get("instance_cost"),
              "mini_version": info.get("mini_version"), **result_meta(report, why, broken),
              **({"source_index": source_index} if len(source_index) != len(data["messages"]) else {}),
              **({"reasoning": reasoning} if reasoning else {}),
              **({} if real_calls else actions_from_text(messages))},
    )


def action_blocks(text: str) -> list[str]:
    """The fenced commands of a reply, exactly as mini-swe-agent's own ``action_regex`` reads them (v1's
    ``DefaultAgent``, v2's text-based models): ``re.findall(r"```(?:bash|mswea_bash_command)\\s*\\n(.*?)\\n```", text,
    re.DOTALL)`` -- the closing fence starts a line, so a fence inside a command's line (``echo '```'``) is part of
    it, and a fence closed on the command's own line closes nothing (the harness finds no action there). Each
    block's end is found by a C scan (``str.find``): ``re`` tried a lazy group's end at every character of every
    reply (the mini-swe-agent sample's 20 runs: 237 M instructions of import, 215 M with the scan). Once no closing
    line is left after an opening, none is after a later one either: only the regex's one way back is looked at
    (an opening with two newlines right before a fence, ``"```bash\\n\\n```"``: one empty block)."""
    blocks: list[str] = []
    at, closed = 0, True
    while (opening := ACTION_OPENING.search(text, at)) is not None:
        start = opening.end()  # after the opening's last newline: where the regex's first try starts its block
        end = text.find("\n```", start) if closed else -1
        if end >= 0:
            blocks.append(text[start:end])
            at = end + 4
            continue
        closed = False
        # the regex backs its \s* up to the opening's newline before the last, so that newline's end is the block's
        # start and the last newline the closing one: possible only with the fence right after the opening
        before = text.rfind("\n", opening.start(), start - 1)
        if before >= 0 and text.startswith("```", start):
            blocks.append(text[before + 1:start - 1])
            at = start + 3
        else:
            at = opening.start() + 1
    return blocks


def _message(m: Any, i: int) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]]:
    """(role, text, tool calls, extra) of one saved message: a chat message (v1; v2 with ``tool_calls`` and
    ``extra``), or v2's Responses-API items (a ``response`` object with ``output`` items, a
    ``function_call_output``, a ``message`` item with content parts)."""
    if not isinstance(m, dict):
        raise ValueError(f"message {i} has no string 'role'")
    extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
    role = m.get("role")
    if m.get("type") == "function_call_output":
        return "tool", content_text(m.get("output")), [], extra
    if not isinstance(role, str) and isinstance(m.get("output"), list):  # a Responses-API reply
        texts, calls = [], []
        for item in m["output"]:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                texts.append(content_text(item.get("content")))
            elif item.get("type") == "function_call":
                calls.append(_call(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments")))
        return "assistant", "".join(texts), _named(calls, i), extra
    if not isinstance(role, str):
        raise ValueError(f"message {i} has no string 'role'")
    content = m.get("content")
    if isinstance(content, list):  # multimodal-style content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    content = content if isinstance(content, str) else ""
    calls = []
    for c in m.get("tool_calls") or () if role == "assistant" and isinstance(m.get("tool_calls"), list) else ():
        if isinstance(c, dict):
            fn = c.get("function") if isinstance(c.get("function"), dict) else {}
            calls.append(_call(c.get("id"), fn.get("name"), fn.get("arguments")))
    return role, content, _named(calls, i), extra


def _named(calls: list[dict[str, Any]], i: int) -> list[dict[str, Any]]:
    """``calls`` with an id each: a call saved without one gets ``call_<message>_<k>`` (an empty id is no id: two
    of them were one call to the results that follow)."""
    for k, c in enumerate(calls):
        c["id"] = c["id"] or f"call_{i}_{k}"
    return calls


def _call(call_id: Any, name: Any, args: Any) -> dict[str, Any]:
    return {"id": str(call_id) if isinstance(call_id, str | int) and not isinstance(call_id, bool) else "",
            "type": "function", "function": {"name": name if isinstance(name, str) and name else "bash",
                                             "arguments": arguments(args)}}
