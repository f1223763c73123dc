"""The signal catalogue: one small detector per signal, each with its threshold in config.

A detector returns the signals it fires for one trajectory (usually zero or one),
each at the step where it *became* consequential. Steps index ``Trajectory.messages``.

Friction (rejections, blocked calls, tool errors: ``Error: ...`` results, non-zero exits,
exceptions) must be consequential to fire: the first occurrence the agent did not recover
from -- the ``friction_min`` - 1 assistant turns after it also hit friction, or the run ended
on it, and no later call of the same tool went through (after a format rejection: no later
accepted action). A rejection fixed on the next turn, or after several, is friction, never the failure -- unless
it explains how the run failed: the run ran out of its step budget and friction took at least half its assistant
turns. An unrecovered infrastructure fault (``tool_infra_error``) is class E (environment), not F2.
"""

from __future__ import annotations

import json
import posixpath
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Literal, Protocol

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.consent import DECLINE, accepts, affirmed, leave_asked
from evoharness.diagnosis.context import ToolCall, TraceView
from evoharness.diagnosis.invariants import policy_violations_of, write_calls
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.diagnosis.multiagent import AgentLog
from evoharness.diagnosis.write_targets import change_words, normal, same_change, same_file, shell_writes
from evoharness.traces.models import Termination
from evoharness.traces.patterns import gate_text

F1, F2, F3, F4 = FailureClass.F1, FailureClass.F2, FailureClass.F3, FailureClass.F4
F2_FRICTION = ("blocked_call", "unknown_tool", "invalid_arguments", "format_rejected", "tool_error")
FRICTION_EVENTS = (*F2_FRICTION, "tool_infra_error")
E = FailureClass.E


def quote(text: object, limit: int = 200) -> str:
    """``text`` on one line (white space runs made one blank), cut to ``limit`` characters with "…". Made from the
    text's first ``2 * limit`` characters where they already give more than ``limit``: the one-line form of a head
    is a head of the text's, so its first ``limit - 1`` characters are the same (a signal's evidence quotes a
    tool result or a call's arguments, often many KB)."""
    text = str(text)
    s = " ".join(text[:2 * limit].split())
    if len(s) <= limit and len(text) > 2 * limit:  # the head's white space took it to the limit or under
        s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class Detector(Protocol):
    """``id`` is the catalogue id; ``detect`` never raises for odd but valid trajectories.

    A detector may also make promises that let the labeller call it less: class attributes set to True, each absent
    meaning False (a detector need declare none), read through ``promises``; ``PROMISES`` names them all:

    - ``multi_agent_only``: returns nothing unless the log has no tool calls (``AgentLog.applies``);
    - ``reads_friction``: returns nothing when ``friction_occurrences`` is empty;
    - ``skips_healthy``: returns nothing on a Healthy run (its label cannot change);
    - ``bounded``: it is a ``BoundedDetector`` (``detect`` takes ``stop``).
    """

    id: str
    failure_class: FailureClass

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]: ...


class BoundedDetector(Detector, Protocol):
    """A detector that takes a bound (``bounded = True``): ``detect(view, cfg, stop)`` with ``stop`` a step gives
    what ``detect(view, cfg)`` gives where that lies at or before ``stop``, else ``[]``, and may read less to tell
    (the claim check reads no reply after ``stop``); ``stop=None`` is ``detect(view, cfg)``. ``Labeller.first_signal``
    runs these last, told the step of the first signal the others found: none after it can come first."""

    bounded: Literal[True]

    def detect(self, view: TraceView, cfg: DiagnosisConfig, stop: int | None = None) -> list[Signal]: ...


PROMISES = ("multi_agent_only", "reads_friction", "skips_healthy", "bounded")


def promises(detector: Detector, promise: str) -> bool:
    """Whether ``detector`` makes ``promise`` (one of ``PROMISES``: see ``Detector``)."""
    return bool(getattr(detector, promise, False))


def friction_occurrences(view: TraceView) -> dict[str, list[tuple[int, str]]]:
    """Friction occurrences by kind: (step, evidence), from events and unparseable call arguments.

    A call whose arguments did not parse counts as ``invalid_arguments`` unless the harness
    already reported it (an event naming its ``call_id``: rejected, or repaired by middleware).
    Computed once per view (every friction detector asks); treat the result as read-only.
    """
    memo = view.__dict__.get("_friction")
    if memo is not None:
        return memo
    occ: dict[str, list[tuple[int, str]]] = defaultdict(list)
    handled: set[str] = set()
    for e in view.traj.events:
        if e.data.get("call_id"):
            handled.add(str(e.data["call_id"]))
        if e.type in FRICTION_EVENTS:
            occ[e.type].append((e.step, e.detail or e.type))
    seen = {s for s, _ in occ.get("invalid_arguments", ())}
    for c in view.calls:
        if not c.parsed_ok and c.step not in seen and c.call_id not in handled:
            occ["invalid_arguments"].append((c.step, f"{c.name}({c.arguments})"))
    for k in occ:
        occ[k].sort(key=lambda x: x[0])
    view.__dict__["_friction"] = occ
    return occ


class FrictionDetector:
    reads_friction = True  # returns nothing when friction_occurrences is empty: the labeller then skips it

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.failure_class = E if kind == "tool_infra_error" else F2
        self.id = f"{self.failure_class.value}.{kind}"

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        occ = friction_occurrences(view)
        mine = occ.get(self.kind)
        if not mine:
            return []
        friction_turns = {view.turn_of(s) for items in occ.values() for s, _ in items}
        spent = _budget_spent_on_friction(view, friction_turns)
        for step, ev in mine:
            turn = view.turn_of(step)
            streak, nxt = 1, view.next_turn(turn)
            while streak < cfg.friction_min and nxt is not None and nxt in friction_turns:
                streak, nxt = streak + 1, view.next_turn(nxt)
            if (nxt is None or streak >= cfg.friction_min) and (spent or not _recovered(view, occ, step)):
                why = "run ended" if nxt is None and streak < cfg.friction_min else (
                    f"{streak} turns in a row hit friction")
                if spent:
                    why += f"; friction took {spent} of the run's {len(view.assistant_steps)} turns and its step " \
                        "budget ran out"
                how = "consequential" if spent else "unrecovered"
                return [Signal(id=self.id, failure_class=self.failure_class, step=step,
                               evidence=f"{how} {self.kind} ({why}): {quote(ev, 160)}")]
        return []


def _budget_spent_on_friction(view: TraceView, friction_turns: set[int | None]) -> int:
    """The number of assistant turns that hit friction, when they explain how the run failed: it ran out of its
    step budget (termination or a ``budget_exhausted`` event) and friction took at least half its turns. Then
    friction the agent got past is still consequential; otherwise 0."""
    traj = view.traj
    if traj.termination != Termination.step_budget and not any(e.type == "budget_exhausted" for e in traj.events):
        return 0
    n = len(friction_turns - {None})
    return n if view.assistant_steps and 2 * n >= len(view.assistant_steps) else 0


_SHELL_SEGMENTS = re.compile(r"&&|\|\||[;|\n]")


def _lookup_of(name: str) -> str:
    """A tool's name less a ``_by_...`` qualifier: what it looks up, whichever key it looks it up by. tau-bench retail
    finds a user by e-mail or by name and zip (``find_user_id_by_email``, ``find_user_id_by_name_zip``): a mistyped
    e-mail that fails is got past when the name-and-zip look-up goes through."""
    cut = name.find("_by_")
    return name[:cut] if cut > 0 else name


def _call_kind(call) -> tuple[str, str | None]:
    """What a later call must match to count as getting past friction: the tool -- or another that looks the same
    thing up by another key (``_lookup_of``) -- and for a shell tool (a ``command``/``cmd`` string argument) the
    program it runs, the first word of the first segment that is no ``cd`` (``cd /testbed && python x.py`` runs
    python). A shell tool runs anything, so a blocked ``rm`` is not got past by an ``ls`` that went through."""
    args = call.args if call.parsed_ok else None
    cmd = args.get("command", args.get("cmd")) if isinstance(args, dict) else None
    if not isinstance(cmd, str):
        return _lookup_of(call.name), None
    for seg in _SHELL_SEGMENTS.split(cmd):
        words = seg.split()
        if words and words[0] != "cd":
            return call.name, words[0]
    return call.name, ""


def _recovered(view: TraceView, occ: dict[str, list[tuple[int, str]]], step: int) -> bool:
    """Did the agent get past the friction at ``step``: a later call went through (a result that is no friction
    occurrence, a call the harness did not block) that does what the failed call was for -- the same tool (for a
    shell tool, running the same program: ``_call_kind``), where the failed call only read a sibling tool
    (``_siblings``: ``find_user_id_by_email`` after ``find_user_id_by_name_zip`` failed; a failed write's sibling,
    ``modify_pending_order_address`` after ``modify_pending_order_payment``, is another change), or, where the failed
    call only read or wrote nothing of the change the run is judged on (``_may_write_patch``: a package install, a
    clean-up), any write (``write_calls``: a hand-off to a human is none): the agent acted after all, with what it
    found another way or without it. Friction at a tool result is the call it answers; at an assistant turn, that
    turn's calls; anywhere else (a harness message rejecting a reply's format) any tool, so any later accepted action
    recovers it."""
    role = view.roles[step] if 0 <= step < len(view.roles) else None
    went = _went_through(view, occ)
    failed: list[ToolCall] = []
    if role == "tool":
        failed = went.by_id.get(view.answered(step), [])
    elif role == "assistant":
        failed = went.by_step.get(step, [])
    if not failed:
        return went.last > step
    names = {_call_kind(c) for c in failed}
    if any(went.by_kind.get(k, -1) > step for k in names):
        return True
    # a sibling is another way to what a failed read was for; a sibling of a failed write is another change
    # (``modify_pending_order_address`` after ``modify_pending_order_payment``), which leaves the refused one undone
    readers = {_call_kind(c) for c in failed if not changes_state(c)}
    if readers and any(last > step and _siblings(k, r) for k, last in went.by_kind.items() for r in readers):
        return True
    return not any(changes_state(c) and _may_write_patch(view, c) for c in failed) and went.last_write(view) > step


class _WentThrough:
    """The calls that went through (parsed, a result that is no friction occurrence, at no friction step, not
    blocked), once per view: the last step of each ``_call_kind`` among them, of any and of a write (``write_calls``),
    and every call by id and by step. ``_recovered`` asks it at each friction step; it read every call each time
    (4,000 failed look-ups before a good one: 7.7 s a label)."""

    def __init__(self, view: TraceView, occ: dict[str, list[tuple[int, str]]]) -> None:
        self.occ = occ  # (not the view, which keeps this memo: the two would be a reference cycle, as in AgentLog)
        friction_steps = {s for items in occ.values() for s, _ in items}
        blocked = _blocked_calls(view) if view.traj.events else ()
        results = view.results
        self.by_id: dict[str, list[ToolCall]] = {}
        self.by_step: dict[int, list[ToolCall]] = {}
        self.by_kind: dict[tuple[str, str | None], int] = {}
        self.ok: set[str] = set()
        self.last = -1
        for c in view.calls:
            self.by_id.setdefault(c.id, []).append(c)
            self.by_step.setdefault(c.step, []).append(c)
            if not c.parsed_ok or c.step in friction_steps or c.call_id in blocked:
                continue
            res = results.get(c.id)
            if res is None or res[0] in friction_steps:
                continue
            self.ok.add(c.id)
            kind = _call_kind(c)
            self.by_kind[kind] = max(self.by_kind.get(kind, -1), c.step)
            self.last = max(self.last, c.step)
        self._last_write: int | None = None

    def last_write(self, view: TraceView) -> int:
        """The last step of a write that went through (-1: none); ``view`` is the view this memo was made for."""
        if self._last_write is None:
            self._last_write = max((c.step for c in write_calls(view) if c.id in self.ok), default=-1)
        return self._last_write


def _went_through(view: TraceView, occ: dict[str, list[tuple[int, str]]]) -> _WentThrough:
    memo = view.__dict__.get("_went_through")
    if memo is None or memo.occ is not occ:
        memo = view.__dict__["_went_through"] = _WentThrough(view, occ)
    return memo


def _may_write_patch(view: TraceView, c: ToolCall) -> bool:
    """Whether write call ``c`` may write the change the run is judged on: with a delivered patch, where it writes one
    of its files (``writes_file``); without one, in a run that edits files in place (a coding agent that ends with a
    message), where it is such an edit (``_edits_in_place``); otherwise always (a tau-bench booking). Installing a
    package, cleaning a build folder or writing a scratch file leaves the change alone."""
    writes = write_calls(view)
    paths = delivered_paths(view.traj.final_answer)
    if paths:
        target = _write_targets(view, writes)
        return any(writes_file(view, c, p, target) for p in paths)
    return _edits_in_place(c) or not any(_edits_in_place(w) for w in writes)


_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _siblings(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """Two tools (``_call_kind``s, not shell programs) named by the same leading words, at least two and at least half
    of the shorter name's (snake, kebab or camel case): ways to the same thing (``find_user_id_by_name_zip`` and
    ``find_user_id_by_email``, ``get_order_details`` and ``get_order_status``), not ``get_user_details`` and
    ``get_order_details``."""
    if a[1] is not None or b[1] is not None or a[0] == b[0]:
        return False
    wa, wb = [w.lower() for w in _NAME_WORDS.findall(a[0])], [w.lower() for w in _NAME_WORDS.findall(b[0])]
    n = 0
    for x, y in zip(wa, wb, strict=False):
        if x != y:
            break
        n += 1
    return n >= 2 and 2 * n >= min(len(wa), len(wb))


class HarnessErrorDetector:
    """The harness itself broke (syntax error, crashing middleware, sandbox violation)."""

    id = "F2.harness_error"
    failure_class = F2

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        for e in view.traj.events:
            if e.type in ("harness_error", "sandbox_violation"):
                return [Signal(id=self.id, failure_class=F2, step=e.step, evidence=quote(e.detail or e.type))]
        return []


FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[a-zA-Z]*\n")


def reply_blocks(text: str) -> list[str]:
    """The fenced blocks of a reply, and the rest of the reply after an opening fence that never closes: a reply the
    harness rejected for its format is often one whose block the model did not close (mini-swe-agent answers it with
    its format error), and the action in it is the one the agent re-sends."""
    blocks, end = [], 0
    for m in FENCE.finditer(text):
        blocks.append(m.group(1))
        end = m.end()
    tail = _OPEN_FENCE.search(text, end)
    if tail is not None and "```" not in text[tail.end():]:
        blocks.append(text[tail.end():])
    return blocks


def _blocked_calls(view: TraceView) -> set[str]:
    """Ids of calls the harness did not execute (blocked, or rejected as malformed), as the events name them: a
    call's ``ToolCall.call_id``."""
    ids = set()
    for e in view.traj.events:
        if e.type in ("blocked_call", "format_rejected", "unknown_tool") and e.data.get("call_id"):
            ids.add(str(e.data["call_id"]))
        elif e.type == "middleware_action" and e.data.get("call_id") and e.data.get("blocked"):
            ids.add(str(e.data["call_id"]))
    return ids


# by its name's start; and SWE-agent's windowed viewer's tools by their whole name (``open`` FILE, ``goto`` LINE,
# ``scroll_up`` / ``scroll_down``: they move the window over a file and print it); coding agents' search tools
# (``grep``, ``glob``, ``LS``), to-do list (``TodoWrite``: the agent's plan, no file) and web look-ups
READ_ONLY_TOOL = re.compile(
    r"(get|find|list|search|read|view|lookup|look_up|check|query|fetch|calculate|think|describe|show|"
    r"grep|glob|todo|web_?search|web_?fetch|(?:open|goto|scroll_up|scroll_down|ls)$)"
    # a whole word: not a lower-case letter after it, whatever the case of the verb (``checkin_passenger`` is no
    # check, ``getaway`` no get; ``getUserDetails`` and ``TodoWrite`` still are)
    r"(?-i:(?![a-z]))", re.IGNORECASE)
# in-place edits whatever the other flags and where ``-i`` stands (``sed -i``, ``sed -E -i``, ``sed -ri``,
# ``sed -e S -i``, ``sed --in-place``, ``perl -pi -e``; not past a pipe, and an ``i`` inside another option, as in
# ``perl -Mstrict`` or ``-Ilib``, is none), redirections, file moves, patches, git and pip changes, writes from Python
# SWE-agent's editors: ``str_replace`` (a command of ``str_replace_editor``, not the tool's name: its ``view`` only
# reads), its ``create`` / ``insert`` / ``undo_edit``, and the classic windowed ``edit N:M`` / ``create FILE`` at the
# start of the command or of a line (``\n`` stays escaped in a call's canonical JSON). ``sed`` / ``perl``'s ``-i`` is
# looked for on the command's own line (a ``grep -i`` on the next line made a printing ``sed -n`` an edit). After a
# line start only blanks
# that end no line (``[^\S\n]*``, not ``\s*``): a newline among them is a line start itself, so the same texts match,
# and a run of blank lines is not re-read from each of its line starts (quadratic: 20,000 blank lines 1.6 s a search)
SWE_EDITOR = (r"\bstr_replace\b|str_replace_editor\s+(?:create|insert|undo_edit)\b|"
              r"(?:^|\n|\\n|\"command\":\")[^\S\n]*(?:edit\s+\d+:\d+|create\s+[\w./-])")
MUTATING_COMMAND = re.compile(
    r"(?:\b|(?<=\\n))(?:sed|perl)[^\S\n]+(?:(?:[^\s|;&\\]|\\(?!n))+[^\S\n]+)*?-(?:[a-zA-Z]*i(?![a-zA-Z])|-in-place)|>>?\s*[\w./'\"-]|\btee\b|\bmv\b|\bcp\b|"
    r"\brm\b|\bpatch\b|\btouch\b|\bmkdir\b|git\s+(apply|checkout|reset|stash|commit|restore)|pip\s+install|"
    # Python: a write call, a file opened to write (``"w"`` escaped in canonical JSON too), fileinput's in-place edit
    r"apply_patch|\.write(?:_text|_bytes)?\(|open\([^)]*['\"](?:[wax]|r\+)[bt+]*\\?['\"]|inplace\s*=\s*True|"
    # Python putting a file in place of another (shutil's copies and moves, os.replace / os.rename / os.symlink)
    # (after a line break, escaped ``\n`` in canonical JSON: no word boundary there)
    r"(?:\b|(?<=\\n))(?:shutil\.(?:copy\w*|move)|os\.(?:replace|rename|symlink)|copyfile|copy2)\s*\(|"
    # as a command (not ``pip install``'s word, not Python's ``f.truncate()``): ``install`` / ``truncate``, formatters
    # that rewrite files (``black``, ``isort``, ``ruff format``; ``autopep8`` / ``yapf`` / ``autoflake`` with ``-i``),
    # ``ed`` / ``ex`` scripts, ``dd of=``, ``rsync``, ``ln`` (a link in place of the file), ``find ... -delete``
    r"(?:^|\n|\\n|\"command\":\"|[;&|(]\s*|\bsudo\s+|-exec(?:dir)?\s+|\bxargs\s+|python[\d.]*\s+-m\s+)"
    r"(?:install|truncate|black|isort|ruff\s+format|ruff\s+check\s[^\n;&|]*--fix|autopep8|yapf|autoflake|ed|ex|dd|"
    r"rsync|ln)\s+[\w./'\"-]|\s-delete\b|" + SWE_EDITOR)
# an editor tool called with a command argument (SWE-agent's ``str_replace_editor``): its ``view`` only reads
EDITOR_TOOL = re.compile(r"(?:^|[_.-])edit|str_replace", re.IGNORECASE)  # not "credit"
VIEW_COMMAND = re.compile(r'"command":"view"')


SHELL_TOOLS = frozenset({"bash", "code", "shell", "execute", "run"})
# other agents' shell tools, by a name word: Claude Code's ``Bash``, OpenHands' ``execute_bash``, ``run_terminal_cmd``,
# ``shell_command``, ``execute_command`` (not ``BashOutput`` / ``KillShell``: they read or stop a running command)
SHELL_NAME = re.compile(r"(?:^|[_.-])(?:bash|shell|terminal|cmd)(?:$|[_.-])|^(?:execute|exec|run)_command$",
                        re.IGNORECASE)
_SHELL_NAMES: dict[str, bool] = {}


def is_shell(name: str) -> bool:
    """A shell tool: its ``command`` argument says what it does (``SHELL_TOOLS``, or ``SHELL_NAME``; once per name)."""
    if name in SHELL_TOOLS:
        return True
    known = _SHELL_NAMES.get(name)
    if known is None:
        if len(_SHELL_NAMES) >= _WRITE_NAMES_MAX:
            _SHELL_NAMES.clear()
        known = _SHELL_NAMES[name] = name.lower() in SHELL_TOOLS or SHELL_NAME.search(name) is not None
    return known


# a tool's own name after the namespace an MCP server, a plug-in or a toolkit puts before it
# (``mcp__airline__get_user``, ``functions.get_user``, ``airline/get_user``, ``airline:get_user``): what the tool does
# is in that name
_NAMESPACE = re.compile(r"^.*(?:__|[./:])(?=[A-Za-z])")
# a look-up whose name opens with another reading verb than READ_ONLY_TOOL's (a general vocabulary of reading and
# asking, not one benchmark's: ``retrieve_customer_details``, ``lookupOrder``, ``inspect_logs``, ``is_refundable``)
READ_VERBS = frozenset((
    "retrieve", "lookup", "look", "inspect", "browse", "count", "compute", "estimate", "display", "preview", "peek",
    "see", "verify", "validate", "is", "has", "exists", "compare", "analyze", "analyse", "summarize", "summarise",
    "explain", "locate", "scan", "poll", "ping", "stat", "evaluate", "assess", "measure", "translate",
    "parse", "extract", "match", "detect", "diff", "test",
    # whether the person or the system can or does (tau2 telecom's ``can_send_mms``, ``does_user_exist``)
    "can", "does"))
# a run of a test, a check or a diagnostic measures and changes nothing it would observe again (tau2 telecom's
# ``run_speed_test``, ``run_tests``, ``execute_health_check``, ``perform_diagnostics``): the verb opens the name and
# one of these ends it (``run_migration`` writes)
_RUN_VERBS = frozenset(("run", "execute", "perform"))
_CHECKS = frozenset(("test", "tests", "check", "checks", "diagnostic", "diagnostics", "benchmark", "benchmarks",
                     "scan", "scans"))


# a name that reads first and then acts says so in a later clause: after ``and`` / ``or`` / ``then``
# (``validate_and_submit_order``, ``get_or_create_user``, ``fetch_report_then_upload``), whose verb is one of
# WRITE_VERBS. After the verb's object ``and`` may join nouns (``get_user_and_order_details``), so a verb that is as
# often a tool name's noun (``_ACTS_AS_VERB``: ``order``, ``return``, ``exchange``, ``transfer``, ...) acts only where
# a verb must stand: after ``then``, or right after the opening verb (``verify_and_transfer_funds`` writes,
# ``get_order_and_return_status`` reads)
_CONJUNCTIONS = frozenset(("and", "or", "then"))
WRITE_VERBS = frozenset((
    "create", "add", "insert", "append", "update", "modify", "edit", "change", "set", "delete", "remove", "drop",
    "clear", "purge", "erase", "cancel", "void", "book", "reserve", "submit", "send", "publish", "place", "buy",
    "purchase", "sell", "move", "copy", "rename", "write", "save", "store", "upload", "download", "apply", "commit",
    "push", "merge", "deploy", "install", "uninstall", "execute", "launch", "restart", "kill", "terminate", "reset",
    "enable", "disable", "activate", "deactivate", "suspend", "approve", "reject", "assign", "grant", "revoke",
    "register", "enroll", "subscribe", "unsubscribe", "invite", "notify", "reschedule", "finalize", "overwrite",
    "replace", "fix", "upgrade", "downgrade", "redeem", "restore", "revert", "rollback", "unzip", "unpack",
    # a host, a device or an account cut off from the network (an EDR's ``isolate_host``); also what keeps the reading
    # verb ``is`` from opening ``isolatehost`` (``_joined_verb``: the longest verb that opens a name)
    "isolate"))
_ACTS_AS_VERB = frozenset((
    "order", "return", "exchange", "transfer", "refund", "pay", "charge", "post", "share", "run", "schedule",
    "process", "issue", "lock", "unlock", "close", "start", "stop", "complete", "confirm", "open"))
# ``extract`` reads a text's parts (``extract_entities``), but an archive extracted, or anything extracted to a place,
# is files written (``extract_archive``, ``extract_zip_to_folder``)
_UNPACKED = frozenset(("archive", "archives", "zip", "tar", "tarball", "tgz", "gz", "gzip", "bz2", "xz", "rar", "7z",
                       "compressed", "to", "into"))


# WRITE_VERBS that are as often nouns of what a read returns (merge requests, store hours, push events, update
# logs, book details, write permissions): after the verb's object (not right after the opening verb, not after
# ``then``) and before a last word of such information (``_READ_HEADS``), the clause names things
# (``get_issues_and_merge_requests``, ``get_author_and_book_details`` read; ``check_availability_and_book_room``,
# ``get_user_and_update_profile`` write)
_NOUN_TOO = frozenset(("update", "change", "set", "store", "place", "book", "move", "copy", "commit", "push", "merge",
                       "install", "write", "drop", "download", "upload", "launch", "register", "reset", "fix",
                       "upgrade", "rollback", "grant", "save"))
_READ_HEADS = frozenset(("details", "detail", "info", "information", "history", "events", "requests", "logs", "log",
                         "permissions", "hours", "summary", "metadata", "stats", "statistics"))


def _acts_later(words: list[str]) -> bool:
    """A name's words (lower case) that go on to act after its reading verb: a later clause that writes
    (``_CONJUNCTIONS``, ``WRITE_VERBS``, ``_ACTS_AS_VERB``) or ``extract`` of an archive or to a place
    (``_UNPACKED``)."""
    if words[0] == "extract" and not _UNPACKED.isdisjoint(words):
        return True
    for i in range(1, len(words) - 1):
        if words[i] not in _CONJUNCTIONS:
            continue
        verb = words[i + 1]
        if verb in _NOUN_TOO and words[i] != "then" and i > 1 and i + 2 < len(words) and words[-1] in _READ_HEADS:
            continue  # the objects' names: get_issues_and_merge_requests
        if verb in WRITE_VERBS:
            return True
        if verb in _ACTS_AS_VERB and (words[i] == "then" or i == 1):
            return True
    return False


# a name written as one lower-case word (``searchflights``, ``getpriceandchange``, ``cancelreservation``,
# ``transfertohumanagents``): no separator and no capital shows its words, so they are read off a small vocabulary of
# action verbs (``_joined_words``). The verbs that may open such a name and read: READ_ONLY_TOOL's and READ_VERBS'
# less those that open as many nouns (``check``: checkin / checkout; ``stat``: status, station; ``see``: seed;
# ``count``: country, counter; ``can``: canvas, candidate; and the coding agents' whole-name tools); a verb of
# WRITE_VERBS, _ACTS_AS_VERB or HANDOFF_VERBS opens it where it is the longer prefix (``issue`` over ``is``,
# ``cancel`` over ``can``). Any other opening is no verb: the name writes, as a name of other words does
_JOINED_READ_VERBS = frozenset((
    "get", "find", "list", "search", "read", "view", "lookup", "query", "fetch", "describe", "show", "calculate",
    "retrieve", "inspect", "browse", "compute", "estimate", "display", "preview", "verify", "validate", "is", "has",
    "exists", "compare", "analyze", "analyse", "summarize", "summarise", "explain", "locate", "scan", "evaluate",
    "assess", "measure", "translate", "parse", "extract", "detect", "diff", "test", "does"))
# a verb after a conjunction that ends the name in one of these, or is followed by one of the others, is a noun's
# start, no act: ``getauthorupdates``, ``getcolorsettings``, ``getpriceandchangelog``
_NOUN_ENDINGS = frozenset(("s", "es", "d", "ed"))
_NOUN_OPENINGS = ("ing", "ting", "er", "ter", "log")
# nouns that end in "and" after three letters or more (``getcommandupdate``: get + command + update, no "comm and
# update"; ``getcolorbrandupdate``): their "and" is no conjunction. ("and" after one or two letters -- handset, brand,
# standard -- is skipped whatever the word)
_AND_NOUNS = ("command", "demand", "operand", "errand", "island", "thousand", "broadband", "wideband", "brand",
              "strand", "husband", "mainland", "homeland")


def _joined_verb(text: str, verbs: frozenset[str]) -> str:
    """The longest word of ``verbs`` that opens ``text`` ("" if none; the words are 2 to 16 letters long)."""
    for n in range(min(len(text), 16), 1, -1):
        if text[:n] in verbs:
            return text[:n]
    return ""


def _joined_words(own: str) -> list[str] | None:
    """A name written as one lower-case word (``[a-z][a-z0-9]*``) in words, as ``reads_by_name`` reads a name's: the
    opening verb (the longest of ``_JOINED_VERBS`` that opens it), and then the first clause that acts (the object,
    the conjunction ``and`` / ``or`` / ``then``, the clause's verb and what follows: ``getpriceandchange`` -> get,
    price, and, change; ``getorcreateuser`` -> get, or, create, user), else the rest as one word. None for a name
    that is no such word or opens with no such verb. A conjunction counts right after the opening verb or, ``and`` and
    ``then``, after an object of three letters or more (``handset``, ``brandupdate``, ``standard`` hold "and" in a
    short word; ``vendorupdate``, ``errorupdate``, ``sensorreset`` end a noun in "or" before a verb), not the end of
    a noun in "and" (``_AND_NOUNS``: ``commandupdate``), with a
    verb of ``_CLAUSE_VERBS`` after it that is no noun's start (``_NOUN_ENDINGS``, ``_NOUN_OPENINGS``); a last word
    of ``_READ_HEADS`` is split off what follows the verb (``getinstallandupdatelogs`` reads)."""
    if not (own.isascii() and own.isalnum() and own.islower() and own[0].isalpha()):
        return None
    verb = _joined_verb(own, _JOINED_VERBS)
    if not verb:
        return None
    rest = own[len(verb):]
    found = sorted((at, conj) for conj in _CONJUNCTIONS for at in range(len(rest)) if rest.startswith(conj, at))
    for at, conj in found:
        if 0 < at < 3 or (at and conj == "or"):  # "or" after an object ends a noun as often: vendor, error, sensor
            continue
        if conj == "and" and at and rest.endswith(_AND_NOUNS, 0, at + 3):  # the "and" of "command"
            continue
        after = rest[at + len(conj):]
        act = _joined_verb(after, _CLAUSE_VERBS)
        tail = after[len(act):]
        if not act or tail in _NOUN_ENDINGS or tail.startswith(_NOUN_OPENINGS):
            continue
        head = next((h for h in _READ_HEADS if tail.endswith(h)), "")
        words = [verb, rest[:at], conj, act, tail[:len(tail) - len(head)], head]
        words = [w for w in words if w]
        if _acts_later(words):
            return words
    return [verb, rest] if rest else [verb]


def _joined_handoff(own: str) -> bool:
    """``is_handoff`` of a name written as one lower-case word: a verb of ``HANDOFF_VERBS`` (``handoff`` and
    ``handover`` for ``hand``) followed by nothing or by words of ``HANDOFF_TO`` alone (``transfertohumanagents``,
    ``escalatetosupervisor``, ``transfercall``; not ``transferfunds``, ``transfertokens``, ``transferrepayment``)."""
    verb = _joined_verb(own, _JOINED_HANDOFF_VERBS)
    rest = own[len(verb):]
    while verb and rest:
        word = _joined_verb(rest, HANDOFF_TO)
        if not word:
            return False
        rest = rest[len(word):]
    return bool(verb)


def reads_by_name(name: str) -> bool:
    """A tool its name says only reads: the name (less a namespace, ``_NAMESPACE``) opens with a word of
    ``READ_ONLY_TOOL`` or with a verb of ``READ_VERBS``, or runs a check (``_RUN_VERBS`` ... ``_CHECKS``), and does
    not go on to act (``_acts_later``: ``validate_and_submit_order`` writes); a name written as one lower-case word is
    read in the words ``_joined_words`` finds (``searchflights`` reads, ``getpriceandchange`` writes)."""
    own = _NAMESPACE.sub("", name)
    joined = _joined_words(own)
    if joined is not None and (joined[0] in _JOINED_READ_VERBS
                               or joined[0] in _RUN_VERBS and own.endswith(_CHECK_ENDINGS)):
        return not _acts_later(joined)
    words = [w.lower() for w in _NAME_WORDS.findall(own)]
    if READ_ONLY_TOOL.match(own) is None and (not words or words[0] not in READ_VERBS) \
            and (len(words) < 2 or words[0] not in _RUN_VERBS or words[-1] not in _CHECKS):
        return False
    return not words or not _acts_later(words)


# handing the conversation over to a person (tau-bench's ``transfer_to_human_agents``; ``escalate_to_supervisor``,
# ``handoff_to_human``, ``hand_over_to_agent``, ``transfer_call``): no change of the domain's state, so no write the
# policy asks a yes for. The verb alone does not say so: ``transfer_funds``, ``transfer_ownership`` or
# ``escalate_ticket`` change the state like any write, so the word after the verb must say to whom (or what: the call)
HANDOFF_VERBS = frozenset(("transfer", "escalate", "handoff", "handover", "hand"))
HANDOFF_TO = frozenset((
    "to", "human", "humans", "agent", "agents", "person", "people", "operator", "operators", "supervisor",
    "supervisors", "representative", "representatives", "rep", "staff", "support", "specialist", "manager",
    "expert", "team", "live", "call", "chat", "conversation", "session"))
# the vocabularies a name written as one lower-case word is read with (``_joined_words``, ``_joined_handoff``)
_JOINED_VERBS = _JOINED_READ_VERBS | WRITE_VERBS | _ACTS_AS_VERB | HANDOFF_VERBS | _RUN_VERBS
_CLAUSE_VERBS = WRITE_VERBS | _ACTS_AS_VERB
_JOINED_HANDOFF_VERBS = frozenset(("transfer", "escalate", "handoff", "handover"))
_CHECK_ENDINGS = tuple(_CHECKS)


@lru_cache(maxsize=4096)
def is_handoff(name: str) -> bool:
    """A hand-off tool: its name (less a namespace) opens with a verb of ``HANDOFF_VERBS`` (``hand`` with ``over`` or
    ``off``) followed by nothing or by a word of ``HANDOFF_TO`` (``transfer_to_human_agents``, ``escalate``,
    ``transferCall``; not ``transfer_funds``)."""
    own = _NAMESPACE.sub("", name)
    if own.isalpha() and own.islower() and own.isascii() and _joined_handoff(own):
        return True
    words = [w.lower() for w in _NAME_WORDS.findall(own)]
    if not words or words[0] not in HANDOFF_VERBS:
        return False
    rest = words[1:]
    if words[0] == "hand":
        if not rest or rest[0] not in ("over", "off"):
            return False
        rest = rest[1:]
    return not rest or rest[0] in HANDOFF_TO


def _name_kind(name: str) -> int:
    """0 a tool that reads, 1 one that writes, 2 an editor (its command says), 3 a shell tool; once per name."""
    kind = _WRITE_NAMES.get(name)
    if kind is None:
        if len(_WRITE_NAMES) >= _WRITE_NAMES_MAX:
            _WRITE_NAMES.clear()
        kind = _WRITE_NAMES[name] = 3 if is_shell(name) else 0 if reads_by_name(name) else \
            2 if EDITOR_TOOL.search(name) else 1
    return kind


def is_state_changing(name: str, canonical_args: str) -> bool:
    """A call that may change the state a repeat would observe: a write tool (an editor tool's ``view`` is none),
    or a shell command that edits."""
    kind = _name_kind(name)
    if kind == 3:
        return bool(MUTATING_COMMAND.search(canonical_args[:20_000]))
    if kind == 2:
        return not VIEW_COMMAND.search(canonical_args[:2_000])
    return kind == 1


_WRITE_NAMES: dict[str, int] = {}  # tool name -> 0 reads, 1 writes, 2 an editor (its command says), 3 a shell tool
_WRITE_NAMES_MAX = 4096  # a hostile trace's made-up names cannot grow it without bound (emptied when full)


def changes_state(call: ToolCall, commands: dict[str, bool] | None = None) -> bool:
    """``is_state_changing`` of a call, its canonical arguments read only for a shell tool and an editor tool (the
    others' names say). A name's kind is the regexes' once per name (a dict look-up, not an IGNORECASE match of 15
    alternatives, for each of the calls that the write, repeat and user-quit rules ask about). A call's answer is
    kept on it (``ToolCall.writes``): those rules ask it of the same calls. ``commands`` (canonical text -> answer,
    the caller's, one run's) keeps a shell call's answer, a regex scan of its command, per text: a coding agent runs
    the same command again and again (its tests, ``ls``, ``git diff``)."""
    known = call.writes
    if known is not None:
        return known
    name = call.name
    kind = 3 if name in SHELL_TOOLS else _name_kind(name)
    if kind == 3:
        text = call.canonical[:20_000]
        known = commands.get(text) if commands is not None else None
        if known is None:
            known = MUTATING_COMMAND.search(text) is not None
            if commands is not None:
                commands[text] = known
    elif kind == 2:  # an editor tool: its command says (``view`` only reads)
        known = VIEW_COMMAND.search(call.canonical[:2_000]) is None
    else:
        known = kind == 1
    call.writes = known
    return known


class RepeatedActionDetector:
    """A loop: one action (same tool, same canonical arguments) ``repeat_min`` times within ``repeat_window``
    turns with no progress between the repeats -- no state-changing call in between, nothing new seen in between
    (every action between them is one the agent had already taken with the same result), and the same result.
    An agent exploring a code base looks at the same file again between new searches: each search shows it
    something new, so the look-back is no loop.

    The edit -> re-run cycle of a coding agent (an edit between two test runs, a different output each
    time) is progress, not a loop; so is a retry that got through (a later try of the same action gets another
    result: a tool that failed a few times and then answered), and a rejection repeated until the agent got past
    it (the repeats' result is friction -- an ``Error:`` result, a rejection -- and a later call of the same tool
    went through: the friction rule's recovery). Messages without tool calls count their fenced
    code block as the action (text agents; the next message is its result). Calls the harness blocked are not
    repeats.
    """

    id = "F3.repeated_action"
    failure_class = F3

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        blocked = _blocked_calls(view) if view.traj.events else ()
        msgs, texts = view.traj.messages, view.texts
        calls = [c for c in view.calls if c.call_id not in blocked] if blocked else view.calls
        code: list[tuple[int, tuple[str, str], str]] = []  # text agents' actions: (step, key, result)
        fenced = [s for s in view.assistant_steps if "`" in texts[s] and "```" in texts[s]]  # (see has_fence)
        with_calls = {c.step for c in view.calls} if fenced else ()
        for s in fenced:
            if s not in with_calls:
                blocks = FENCE.findall(texts[s])
                if len(blocks) == 1:
                    nxt = msgs[s + 1].get("content") if s + 1 < len(msgs) else ""
                    code.append((s, ("code", " ".join(blocks[0].split())), str(nxt or "")))
        # a streak holds one action's repeats only, so some action must occur repeat_min times; an action's key
        # starts with its tool's name, so some name must too (checked first: no canonical arguments needed). A name
        # that occurs repeat_min times makes at least repeat_min - 1 of the names repeats (checked before counting)
        listed = [c.name for c in calls]
        if code:
            listed += [key[0] for _, key, _ in code]
        elif len(listed) - len(set(listed)) < cfg.repeat_min - 1:
            return []
        # counted in a loop, not by ``Counter``: its constructor and ``update`` are Python frames (~2 microseconds a
        # run that gets here, more than the count of its few names)
        names: dict[str, int] = {}
        for name in listed:
            names[name] = names.get(name, 0) + 1
        frequent = {name for name, n in names.items() if n >= cfg.repeat_min}
        if not frequent:
            return []
        # a bound made without canonical text (``ToolCall.shape``: equal canonical texts, equal shapes): no shape
        # repeat_min times, no action; counted until one is. Not for a shell tool: a coding agent runs its tests and
        # ``git diff`` again and again, so the bound seldom ends the check there: its shapes would be made for nothing
        if not code and not any(map(is_shell, frequent)):
            seen: dict[tuple[str, frozenset], int] = {}
            for c in calls:
                if c.name in frequent:
                    shape = c.shape()
                    if shape is None:
                        break
                    n = seen[c.name, shape] = seen.get((c.name, shape), 0) + 1
                    if n >= cfg.repeat_min:
                        break
            else:
                return []
        keys: dict[tuple[str, str], int] = {}
        for key in [(c.name, c.canonical) for c in calls if c.name in frequent] + [  # canonical text: these only
                key for _, key, _ in code if key[0] in frequent]:
            keys[key] = keys.get(key, 0) + 1
        if max(keys.values(), default=0) < cfg.repeat_min:
            return []  # no action occurs often enough to make a streak
        actions = [(c.step, (c.name, c.canonical), view.results.get(c.id, (0, ""))[1]) for c in calls] + code
        turn_no = {s: n for n, s in enumerate(view.assistant_steps)}
        actions.sort(key=lambda x: x[0])
        # whether a later occurrence of each action got another result with nothing changed in between (a retry
        # that got through: the answer changed by itself), found backwards once: asked of every repeat by a scan of
        # the rest, 8,000 same ``ls`` then one other answer took 1.8 s. A later try after a state-changing action
        # is no retry of the streak: its other answer is the change's (an ``ls -la`` after files were written)
        differs_later = [False] * len(actions)
        later: dict[tuple[str, str], tuple[str] | None] = {}  # the one later result, or None: more than one
        writes = _call_changes(calls)  # is_state_changing per action, once asked (a shell command's: a scan)
        for j in range(len(actions) - 1, -1, -1):
            _, key, result = actions[j]
            if key in later:
                one = later[key]
                differs_later[j] = one is None or one[0] != result
                if one is not None and one[0] != result:
                    later[key] = None
            else:
                later[key] = (result,)
            if _changes(writes, key):
                later = {key: later[key]}  # the tries after this change are no retries of any action before it
        streak: dict[tuple[str, str], list[tuple[int, str]]] = {}
        # progress since an action's last occurrence: an action after it (another one: between two occurrences of
        # an action come only others) that changed state or showed something new. Indices, not a flag per action
        # set at each such action (a run of 20,000 new reads took ~12 s so)
        last_at: dict[tuple[str, str], int] = {}
        progress = -1  # the index of the latest action that changed state or showed something new
        seen: set[tuple[tuple[str, str], str]] = set()  # (action, result) pairs the agent has been shown
        said = _user_turns(view) if view.user_steps and not code else ()
        for j, (step, key, result) in enumerate(actions):
            runs = streak.get(key)
            if runs and (progress > last_at[key] or runs[-1][1] != result or (
                    said and _said_between(said, runs[-1][0], step) and not _changes(writes, key))):
                runs = None  # progress since the last repeat: the state changed, something new was seen, the
                # result differs, or -- for a look-up -- the user spoke in between (the record is read again for
                # what the user said since: a customer who changes their mind)
            runs = (runs or []) + [(step, result)]
            runs = [(t, r) for t, r in runs if turn_no[step] - turn_no[t] < cfg.repeat_window]
            streak[key] = runs
            last_at[key] = j
            new = (key, result) not in seen
            if new:
                seen.add((key, result))
            if new or _changes(writes, key):
                progress = j
            if len(runs) >= cfg.repeat_min and not differs_later[j] and not self._rejection_got_past(view, step):
                # (a later try of the same action that got another result: a retry that got through, not a loop)
                name, args = key
                return [Signal(
                    id=self.id, failure_class=F3, step=step,
                    evidence=f"{len(runs)}x {name} {quote(args, 120)} at steps {', '.join(str(t) for t, _ in runs)} "
                             f"with nothing changed between (same result: {quote(result, 80)})",
                )]
        return []


    @staticmethod
    def _rejection_got_past(view: TraceView, step: int) -> bool:
        """The repeats were one rejection or tool error over and over (their result is friction), and the agent
        then got past it (``_recovered``: a later call of the same tool went through): friction it recovered
        from, like a single rejection fixed later, not the run's failure."""
        calls = [c for c in view.calls if c.step == step]
        occ = friction_occurrences(view) if view.traj.events else None
        if occ:
            friction_steps = {s for items in occ.values() for s, _ in items}
            rejected = [c for c in calls if view.results.get(c.id, (-1, ""))[0] in friction_steps]
            if rejected and _recovered(view, occ, view.results[rejected[0].id][0]):
                return True
        # an edit its tool refused each time (``_refused``: nothing was written; no event need say so -- OpenHands'
        # editor answers "ERROR: No replacement was performed ..." in plain text), then an edit of the same tool
        # that went through
        refused = [c for c in calls if changes_state(c) and _refused(view, c)]
        return any(c.step > step and c.name == r.name and changes_state(c) and c.id in view.results
                   and not _refused(view, c) for r in refused for c in view.calls)


def _call_changes(calls: list[ToolCall]) -> dict[tuple[str, str], bool]:
    """``is_state_changing`` of each call's action (name, canonical arguments), by ``changes_state``: the answer is kept
    on the call, where the write list (``invariants.write_calls``, asked after the repeat check) finds it, so a shell
    command is scanned once a run, not once here and again there (the mini-swe-agent sample: 82 M of 555 M)."""
    commands: dict[str, bool] = {}
    return {(c.name, c.canonical): changes_state(c, commands) for c in calls}


def _changes(memo: dict[tuple[str, str], bool], key: tuple[str, str]) -> bool:
    """``is_state_changing(*key)`` of a repeat check's action, kept in ``memo``: asked at every occurrence of an action
    the agent takes again."""
    known = memo.get(key)
    if known is None:
        known = memo[key] = is_state_changing(*key)
    return known


def _user_turns(view: TraceView) -> list[int]:
    """The user's own turns in a tool-calling conversation: its user messages, less those that are friction (a
    harness rejecting a reply's format speaks as the user)."""
    occ = friction_occurrences(view) if view.traj.events else None
    if not occ:
        return view.user_steps
    friction = {s for items in occ.values() for s, _ in items}
    return [i for i in view.user_steps if i not in friction]


def _said_between(said: list[int], a: int, b: int) -> bool:
    """Whether a step of the sorted ``said`` lies strictly between steps ``a`` and ``b``."""
    k = bisect_right(said, a)
    return k < len(said) and said[k] < b


class TerminationDetector:
    def __init__(self, name: str, termination: Termination, event: str) -> None:
        self.id = f"F3.{name}"
        self.failure_class = F3
        self.termination = termination
        self.event = event

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        for e in view.traj.events:
            if e.type == self.event:
                return [Signal(id=self.id, failure_class=F3, step=e.step, evidence=quote(e.detail or e.type))]
        if view.traj.termination == self.termination:
            return [Signal(id=self.id, failure_class=F3, step=view.final_step,
                           evidence=f"termination={self.termination.value}")]
        return []


class StepBudgetDetector(TerminationDetector):
    def __init__(self) -> None:
        super().__init__("step_budget_exhausted", Termination.step_budget, "budget_exhausted")

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        found = super().detect(view, cfg)
        if found:
            return found
        turns = len(view.assistant_steps)
        if cfg.step_budget and turns >= cfg.step_budget and not view.traj.delivered:
            return [Signal(id=self.id, failure_class=F3, step=view.final_step,
                           evidence=f"{turns} assistant turns (budget {cfg.step_budget}), no delivery")]
        return []


class NoDeliveryDetector:
    """No final answer -- on a run that did not reach the healthy threshold. A run whose score reached it delivered
    what its task asked for, whatever its last message: a task done by a write (a message sent, an order changed)
    may end on an empty reply (``final_answer`` None), and "no delivery" there is a control failure on a run that
    succeeded, read by verification as the signal firing (``observations``) and by the culprit search as support.
    An unscored run is judged by its final answer alone."""

    id = "F3.no_delivery"
    failure_class = F3
    skips_healthy = True  # returns nothing on a Healthy run: the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if t.delivered or (t.score is not None and t.score >= cfg.healthy_threshold):
            return []
        last = view.traj.messages[view.final_step] if view.traj.messages else {}
        text = last.get("content") or (last.get("tool_calls") and "tool call") or ""
        return [Signal(id=self.id, failure_class=F3, step=view.final_step,
                       evidence=f"no final answer (termination={view.traj.termination.value}); "
                                f"last message: {quote(text, 150)}")]


FENCE_ANY = re.compile(r"```[^`]*(?:`(?!``)[^`]*)*```")  # a fenced block (unrolled: linear)
TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]+")  # one character class, no nested quantifier: linear time
_RUN_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-")  # [A-Za-z0-9_-] less the digits
_ASCII_DIGITS = frozenset("0123456789")


# each byte of ASCII text as its class: a run letter ([A-Za-z_-]) b"a", a digit b"0", anything else b" "
_CLASSES = bytes(ord("0") if chr(b) in _ASCII_DIGITS else ord("a") if chr(b) in _RUN_LETTERS else ord(" ")
                 for b in range(256))


def has_digit(text: str) -> bool:
    """``ANY_DIGIT.search(text)`` is not None; ASCII text is searched for each digit in turn (a C byte search,
    many times cheaper than the regex engine's per-character class test)."""
    if text.isascii():
        return any(d in text for d in "0123456789")
    return ANY_DIGIT.search(text) is not None


def _ascii_digit_runs(text: str) -> list[tuple[int, int]]:
    """In ASCII text, where ``\\d`` is ``[0-9]``, the runs ``DigitRuns`` finds are the maximal runs of
    [A-Za-z0-9_-] that hold a digit: found on the text's classes (one byte each, ``_CLASSES``) by C byte searches,
    three per run and none per character."""
    z = text.encode("ascii").translate(_CLASSES)
    out = []
    pos = 0
    while (digit := z.find(b"0", pos)) >= 0:
        start = z.rfind(b" ", pos, digit) + 1  # pos is 0 or the last run's end, a b" ": never past it
        end = z.find(b" ", digit)
        if end < 0:
            end = len(z)
        out.append((start, end))
        pos = end
    return out


class DigitRuns:
    """The runs of [A-Za-z0-9_-] that hold a digit (``digit``: ``[0-9]``, or ``\\d``: any Unicode digit), found as
    ``findall`` of the regex ``pattern`` finds them --
    ``(?<![A-Za-z0-9_-])[A-Za-z_-]*+DIGIT[A-Za-z0-9_-]*+``: from a run's start, letters up to the first digit, then
    the rest of the run -- but digit first: the regex engine skips to the next digit in its tight first-character
    loop (most characters are no digit; the pattern above tries a match at every one of them, several times the
    cost), and the letters before that digit are walked back here. Each character is walked at most once, so
    the cost stays linear in the text (a 120 KB run of letters and dashes takes milliseconds)."""

    def __init__(self, digit: str) -> None:
        self.pattern = re.compile(rf"(?<![A-Za-z0-9_-])[A-Za-z_-]*+{digit}[A-Za-z0-9_-]*+")  # the definition
        self._from_digit = re.compile(rf"{digit}[A-Za-z0-9_-]*+")

    def spans(self, text: str) -> list[tuple[int, int]]:
        if text.isascii():
            return _ascii_digit_runs(text)
        out = []
        pos = 0  # where the pattern's scan would resume: no match starts before it
        search = self._from_digit.search
        while (m := search(text, pos)) is not None:
            digit, end = m.span()
            start = digit
            while start > pos and text[start - 1] in _RUN_LETTERS:
                start -= 1
            # a match starts where its run starts (the lookbehind): not after a letter, nor after a digit of the
            # run (a Unicode digit ends the class's run, and the one before it belonged to an earlier match)
            if start and (text[start - 1] in _RUN_LETTERS or text[start - 1] in _ASCII_DIGITS):
                pos = digit + 1  # no match takes this digit; one may start after it
                continue
            out.append((start, end))
            pos = end
        return out

    def findall(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.spans(text)]


# the TOKEN_RUN runs that hold an ASCII digit (the only ones ``_id_like`` can accept), without building the others
DIGIT_TOKEN = DigitRuns("[0-9]")
ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
ANY_DIGIT = re.compile(r"\d")
# a run holding a digit: unlike [..]*\d[..]* (quadratic in a long run without digits), linear
DIGIT_RUN = DigitRuns(r"\d")


def claim_tokens(text: str) -> list[str]:
    """Ids and numbers: maximal runs of [A-Za-z0-9_-] holding a digit, not just after '$' or '.' (prices'
    cents, decimals), leading '-'/'_' stripped. Linear in the text (a 120 KB answer takes milliseconds)."""
    out = []
    for a, end in DIGIT_RUN.spans(text):
        tok = text[a:end].lstrip("-_")
        start = end - len(tok)
        if tok and not (start and text[start - 1] in "$.") and tok[0].isalnum():
            out.append(tok)
    return out


ISO_TIME = re.compile(r"(\d{4}-\d\d-\d\d)t(\d)")
DATE = re.compile(r"\d{4}-\d\d-\d\d")
ORDINAL = re.compile(r"\d+(st|nd|rd|th|s)", re.IGNORECASE)


class GroundTokens:
    """Everything the agent was shown (lower-cased), for "was this token there?" tests.

    A substring search (C speed, no token objects) answers the first ``SCAN_LIMIT`` questions; past
    that (a huge answer full of numbers) the text is tokenized once into a set -- runs and their
    alphanumeric parts, an ISO timestamp's date and time apart -- so the cost stays linear.

    The texts are searched one by one, the latest first (a claim usually repeats what the last tool
    said), each lower-cased only when a search first reaches it: the same answers as searching all of
    them joined by newlines, since a question (a token) holds no newline. A question that does hold one
    (or is empty) is asked of the joined text.

    Texts are only ever added, so a token a search found stays found: a question asked again (a reply
    repeating a reservation id or a flight; ~45% of tau-bench's) is answered from ``found`` without searching.
    It still counts towards ``SCAN_LIMIT``, so the answers past it (the token set's) stay those of every
    question searched.

    ``later`` (a callable giving texts, or None) holds texts the grounding has that are costly to make and seldom
    needed: they are made and added when a search first misses the others (or the token set or the joined text is
    needed), then searched. The answers are those of a grounding that held them from the start (a text's place
    in the list changes no answer: a token holds no newline), and every question counts once.
    """

    SCAN_LIMIT = 64

    def __init__(self, texts: list[str] | None = None, later: Callable[[], list[str]] | None = None) -> None:
        self.texts: list[str] = list(texts or ())  # as added
        self.lowered: list[str | None] = [None] * len(self.texts)  # each lower-cased once, when first searched
        self.seen = 0  # texts added before the last question: the ones a question searches
        self.asked = 0
        self.tokens: set[str] | None = None
        self.found: set[str] = set()  # the tokens a search found (each question up to SCAN_LIMIT)
        self.later = later

    def add(self, text: str) -> None:
        self.texts.append(text)
        self.lowered.append(None)

    def _low(self, i: int) -> str:
        low = self.lowered[i]
        if low is None:
            low = self.lowered[i] = self.texts[i].lower()
        return low

    def __contains__(self, tok: str) -> bool:
        texts = self.texts
        if self.seen != len(texts):  # texts added since the last question
            self.seen = len(texts)
            self.tokens = None
        self.asked += 1
        if self.asked <= self.SCAN_LIMIT:
            if tok in self.found:
                return True
            if not tok or "\n" in tok:
                self._add_later()
                return tok in self._joined()
            if self._searched(tok, 0):
                return True
            if self.later is None:
                return False
            searched = self.seen
            self._add_later()  # the texts held back: the only ones not searched yet
            return self._searched(tok, searched)
        self._add_later()
        if self.tokens is None:
            text = ISO_TIME.sub(r"\1 \2", self._joined())
            self.tokens = set(TOKEN_RUN.findall(text)) | set(ALNUM_RUN.findall(text))
        return tok in self.tokens

    def _searched(self, tok: str, start: int) -> bool:
        """Whether ``tok`` is in one of the texts ``start`` to ``seen`` (lower-cased), the latest first."""
        texts, lowered = self.texts, self.lowered
        for i in range(self.seen - 1, start - 1, -1):
            low = lowered[i]
            if low is None:
                low = lowered[i] = texts[i].lower()
            if tok in low:
                self.found.add(tok)
                return True
        return False

    def _add_later(self) -> None:
        """Add the texts ``later`` gives (once): a question then searches them too."""
        if self.later is not None:
            more, self.later = self.later(), None
            self.texts.extend(more)
            self.lowered.extend([None] * len(more))
            self.seen = len(self.texts)
            self.tokens = None

    def _joined(self) -> str:
        return "\n" + "\n".join(self._low(i) for i in range(self.seen)) if self.seen else ""


def _id_like(tok: str) -> bool:
    """An identifier (letters and digits: HAT069, W2378156, mia_li_3668) or a long number (a tracking number);
    not a date (an agent turns "the 19th" into one), an ordinal (10th) or a phrase (24-hour)."""
    if tok.isdigit():
        return len(tok) >= 8
    if tok.isalnum() and tok.isalpha():
        return False
    if DATE.fullmatch(tok) or ORDINAL.fullmatch(tok):
        return False
    parts = tok.split("-")
    if len(parts) > 1 and any(p.isalpha() for p in parts) and any(p.isdigit() for p in parts):
        return False
    digits = sum(map(str.isdigit, tok))
    return bool(digits and digits < len(tok.replace("-", "").replace("_", ""))) or digits >= 8


def id_like_tokens(tokens: Iterable[str]) -> list[str]:
    """The ``_id_like`` tokens, in order; a number shorter than 8 digits (most tokens) is dropped before the call."""
    return [t for t in tokens if not (len(t) < 8 and t.isdigit()) and _id_like(t)]


def id_like_runs(text: str) -> list[str]:
    """``id_like_tokens(dict.fromkeys(DIGIT_TOKEN.findall(text)))`` without building the runs it drops.

    A run ``_id_like`` can accept holds a digit beside a run letter ([A-Za-z_-]) or is eight digits or more: a
    shorter number (most runs: prices, times, counts) never is. Only the runs around such a pair of classes
    are cut out and tested. On the text's classes (``_CLASSES``; a character outside ASCII is no run character, so
    it is read as one ``?``: positions stay the text's), each such pair is marked with an ``X`` by three C
    replacements (a letter then a digit, a digit then a letter, eight digits: none crosses a blank, so a run holds
    an ``X`` exactly when it holds a pair), and the marked runs are found by one byte search for ``X`` each, in
    order and once: a run holding several pairs (a date: ``-0`` and ``0-``) is reached once, not once per pair
    kind, and no run is sorted or looked up again. In ASCII text this is also
    ``id_like_tokens(dict.fromkeys(DIGIT_RUN.findall(text)))`` (``\\d`` is ``[0-9]`` there)."""
    z = (text.encode() if text.isascii() else text.encode("ascii", "replace")).translate(_CLASSES)
    if 48 not in z:  # no digit: most texts (an int operand is a memchr)
        return []
    marked = z.replace(b"a0", b"aX").replace(b"0a", b"Xa").replace(b"00000000", b"X0000000")
    pos = marked.find(88)  # b"X"
    if pos < 0:
        return []
    runs = []
    find, rfind = marked.find, marked.rfind
    while True:
        start = rfind(32, 0, pos) + 1  # the run's blank-bounded extent (32: b" ")
        end = find(32, pos)
        if end < 0:
            runs.append(text[start:])
            break
        runs.append(text[start:end])
        pos = find(88, end)  # the rest of this run holds no other run
        if pos < 0:
            break
    return [t for t in dict.fromkeys(runs) if _run_id_like(t)]


def _run_id_like(tok: str) -> bool:
    """``_id_like`` of a run of [A-Za-z0-9_-] that holds a digit. Without a dash it can be no date and no
    phrase: digits (and underscores) alone are an id from eight digits on; with a letter it is one unless it
    is an ordinal (which ends in one of ``tdhs``)."""
    if "-" in tok:
        return _id_like(tok)
    core = tok.replace("_", "") if "_" in tok else tok
    if core.isdigit():
        return len(core) >= 8
    return not (tok[-1] in "tTdDhHsS" and ORDINAL.fullmatch(tok))


def has_fence(text: str) -> bool:
    """``"```" in text``, a one-character search first: a single character is looked for with memchr, ~10x faster
    than the three-character search on text without one (most replies hold no backtick)."""
    return "`" in text and "```" in text


def _looks_like_patch(text: str) -> bool:
    return text.lstrip().startswith(("diff --git", "--- ")) or ("@" in text and "\n@@ " in text)  # (as has_fence)


def answer_step(view: TraceView) -> int:
    """Where the final answer was delivered: the last assistant message holding the whole answer (whitespace aside),
    not one that merely begins as it does (a sign-off repeating the answer's opening words and going on otherwise);
    the last assistant step when none holds it (an answer given as a call's argument, a patch). Once per view."""
    memo = view.__dict__.get("_answer_step")
    if memo is None:
        memo = view.__dict__["_answer_step"] = _find_answer_step(view)
    return memo


def _find_answer_step(view: TraceView) -> int:
    fa = view.traj.final_answer
    verbatim = fa.strip() if fa else ""
    if verbatim:  # (exactly when the collapsed answer is not empty: strip and split read the same blanks)
        first = verbatim.split(None, 1)[0]  # the collapsed answer's first word
        msgs = view.traj.messages
        for s in reversed(view.assistant_steps):
            c = msgs[s].get("content")
            # the answer as it was written, else (a message holding its first word) with the blanks collapsed: the
            # collapsed answer made only then (the answer is most often its last reply, verbatim)
            if isinstance(c, str) and (verbatim in c or (first in c and _answer_text(view) in " ".join(c.split()))):
                return s
    return view.final_step


def _unbacked(tokens: list[str], ground: GroundTokens, min_len: int) -> list[str]:
    missing = []
    for tok in dict.fromkeys(tokens):
        t = tok.strip("-_").lower()
        if len(t) >= min_len and t not in ground and t.replace(",", "") not in ground:
            missing.append(tok)
    return missing


# a number-and-word phrase: "24-hour", "7-day-old" (digits, then words joined by hyphens)
NUMBER_PHRASE = re.compile(r"\d+(?:-[A-Za-z]+)+")


def _phrase_number(tok: str) -> str:
    """A final-answer token as the claim it makes: a number-and-word phrase (``NUMBER_PHRASE``: "the 24-hour window")
    claims its number, as the reply check reads it (``_id_like``: "not ... a phrase (24-hour)"); a policy's "within 24
    hours" backs it, and a number shorter than ``unbacked_min_len`` is no claim checked. Any other token (an id,
    "HAT-999", "RES-ZFA04Y") as it is."""
    if tok[0].isdigit() and NUMBER_PHRASE.fullmatch(tok):
        return tok.partition("-")[0]
    return tok


class UnbackedClaimDetector:
    """A claim no tool result supports, located at the turn where it is first made.

    Every reply to the user (an assistant turn without tool calls, fenced code left out; single-agent
    traces): an id (letters and digits) or a long number that nothing before the turn -- task, system
    and user messages, tool results -- contains, or a status of an entity that contradicts the latest
    tool result about it (`EntityStatus`). The final
    answer: any token with a digit found nowhere the agent was told or shown, a number-and-word phrase ("the 24-hour
    window") read as its number (``_phrase_number``; not when a multi-agent log
    ends on a tool agent's output: a terminal's output is no agent's claim). Tokens shorter than
    ``unbacked_min_len`` are ignored; patches (a diff as the final answer) are not claims. Healthy runs
    are not checked (their label cannot change; the check is the costliest in the catalogue).
    """

    id = "F1.unbacked_claim"
    failure_class = F1
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it
    bounded = True  # a BoundedDetector: Labeller.first_signal passes the step of the first signal found as ``stop``

    def detect(self, view: TraceView, cfg: DiagnosisConfig, stop: int | None = None) -> list[Signal]:
        """The signal, or ``[]``. With ``stop`` (a step; the caller wants no signal after it): the same signal where it
        is at or before ``stop``, else ``[]``, reading no reply after ``stop`` and checking the final answer only where
        it is at or before ``stop`` -- where it is, every reply is read, as without ``stop`` (a claim in a reply after
        ``stop`` comes first and hides the final answer's)."""
        t = view.traj
        if t.score is not None and t.score >= cfg.healthy_threshold:
            return []  # a Healthy run's label cannot change: the claim checks are spent on failures only
        if stop is not None and answer_step(view) <= stop:
            stop = None
        ground: GroundTokens | None = None
        log = AgentLog.of(view)
        if not log.applies:
            found, ground = self._first_turn_claim(view, cfg, stop)
            if found or stop is not None:
                return found
        elif stop is not None:
            return []  # the final answer's check alone, and the answer lies after ``stop``
        fa = view.traj.final_answer
        if not fa or _looks_like_patch(fa):
            return []
        if log.applies and log.is_tool(answer_step(view)):
            return []  # a multi-agent log that ends on a tool's output (a terminal's): no agent claimed it
        tokens = [_phrase_number(t) if "-" in t else t for t in claim_tokens(fa)]  # "24-hour": 24
        tokens = [t for t in tokens if len(t.strip("-_")) >= cfg.unbacked_min_len]
        if not tokens:
            return []
        missing = _unbacked(tokens, ground or GroundTokens([view.grounding_text]), cfg.unbacked_min_len)
        if len(missing) >= cfg.unbacked_min:
            return [Signal(id=self.id, failure_class=F1, step=answer_step(view),
                           evidence=f"not in any tool result or the task: {', '.join(missing[:5])} "
                                    f"— in: {quote(fa, 120)}")]
        return []

    def _first_turn_claim(self, view: TraceView, cfg: DiagnosisConfig,
                          stop: int | None = None) -> tuple[list[Signal], GroundTokens]:
        """The first reply with an unbacked id or a contradicted status (none after step ``stop``, where given), and the
        grounding of the whole run (the final check reuses it: for a single-agent trace it is everything the agent was
        told or shown; with ``stop``, of the messages up to it).

        What a write that went through put in place (a file, the test function in it) is the agent's own doing: no
        claim to back when a later reply names it (``_written``). Those arguments are found only when a search first
        misses the messages (the grounding's ``later``; on tau-bench airline 0 of 116 failed runs need them), then
        held from there on: the answers of holding them from the start."""
        written: dict[int, list[str]] = {}  # _written(view), once a search has needed it
        at = 0  # the reply whose tokens are asked: the writes before it back them

        def writes_before() -> list[str]:
            written.update(_written(view))
            return [a for step, args in written.items() if step < at for a in args]

        ground = GroundTokens([view.traj.task or ""], later=writes_before)
        grounds, unlowered = ground.texts, ground.lowered  # ground.add, inlined (one call per message saved)
        statuses = EntityStatus()
        msgs, roles = view.traj.messages, view.roles
        for i, content in enumerate(view.texts if stop is None else view.texts[:stop + 1]):
            if i in written:  # (after the first miss; before it, ``writes_before`` adds the ones a question needs)
                grounds.extend(written[i])
                unlowered.extend([None] * len(written[i]))
            if not content:
                continue
            role = roles[i]
            if role != "assistant":
                grounds.append(content)
                unlowered.append(None)
                if role == "tool" and '"status"' in content:
                    statuses.read(content)
                continue
            if msgs[i].get("tool_calls") or _looks_like_patch(content):
                continue  # a claim is what a reply tells the user, not a call or a patch
            prose = FENCE_ANY.sub(" ", content) if has_fence(content) else content
            contradiction = statuses.contradicted(prose) if statuses.latest else None
            if contradiction:
                return [Signal(id=self.id, failure_class=F1, step=i,
                               evidence=f"contradicts the latest tool result: {contradiction} — in: "
                                        f"{quote(content, 120)}")], ground
            ids = id_like_runs(prose)  # ids and long numbers holding an ASCII digit
            if not ids:
                continue
            at = i
            missing = _unbacked([t.strip("-_") for t in ids], ground, cfg.unbacked_min_len)
            if len(missing) >= cfg.unbacked_min:
                return [Signal(id=self.id, failure_class=F1, step=i,
                               evidence=f"first claimed here, in no earlier tool result or message: "
                                        f"{', '.join(missing[:5])} — in: {quote(content, 120)}")], ground
        at = len(view.texts)  # the final answer's check: every write backs it
        return [], ground


def _written(view: TraceView) -> dict[int, list[str]]:
    """Per assistant step, the arguments of its write calls that went through (a result that is no friction
    occurrence and no refusal): what the agent itself put in place. Not a call that carries the final answer (a
    ``finish`` / ``submit`` tool's message): that delivers the claims, it backs none."""
    friction = {s for items in friction_occurrences(view).values() for s, _ in items} if view.traj.events else ()
    out: dict[int, list[str]] = {}
    results = view.results
    for c in view.calls:
        res = results.get(c.id)
        if res is None or res[0] in friction or not changes_state(c) or _refused(view, c) or delivers(view, c):
            continue
        out.setdefault(c.step, []).append(c.arguments)
    return out


def delivers(view: TraceView, c: ToolCall) -> bool:
    """A call that carries the run's final answer (OpenHands' ``finish`` message): one of its string arguments is the
    answer, whitespace aside, and it is no value the user or a tool gave that a reply then says -- no user message or
    tool result before the call held the answer while another assistant message says it (the address's state "OK"
    the user wrote, and the answer "OK" said after the write). The delivery, not a write. Not a write whose argument
    merely holds the answer or begins as it does, nor one before the last call holding it (the room booked, then
    ``finish`` naming it). A call answering with what a tool showed and no reply saying it (a ``finish`` copying the
    searched figure) is the delivery."""
    if not isinstance(c.args, dict) or not _may_hold_answer(view, c.args):
        return False
    answer = _answer_text(view)
    if not answer:
        return False
    if not _holds_answer(c, answer) or c.step != _last_holding_answer(view):
        return False  # an earlier call with the answer as an argument wrote it; the last one delivers it
    return _answer_given_at(view) > c.step or not any(s != c.step for s in _answer_said_at(view))


def _may_hold_answer(view: TraceView, args: dict) -> bool:
    """False only where ``_holds_answer`` is: every string argument is shorter than the final answer's characters that
    are no blank (``_answer_floor``), all of which its collapsed form keeps, so none can be it. A domain write's
    arguments are ids and short phrases: the answer need not be collapsed to say so."""
    floor = _answer_floor(view)
    return any(isinstance(v, str) and len(v) >= floor for v in args.values())


# the characters ``str.split()`` and ``str.strip()`` take for blanks among ASCII ones (``str.isspace``)
ASCII_BLANKS = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


FLOOR_CHARS = 4096  # the answer's head whose characters that are no blank are counted: a bound, at a bounded cost


def _answer_floor(view: TraceView) -> int:
    """A lower bound of ``len(_answer_text(view))`` made without collapsing the answer (once per view): the length of
    the answer's first ``FLOOR_CHARS`` characters less their blanks (``ASCII_BLANKS``, counted by C scans) where they
    are ASCII, every one of them kept by the collapsed answer; 0 (no bound) where they are not. A head: a coding
    agent's patch answer runs to tens of KB, and ten scans of it cost more than the bound saves."""
    memo = view.__dict__.get("_answer_floor")
    if memo is None:
        fa = view.traj.final_answer
        head = fa[:FLOOR_CHARS] if fa else ""
        memo = len(head) - sum(map(head.count, ASCII_BLANKS)) if head.isascii() else 0
        view.__dict__["_answer_floor"] = memo
    return memo


def _holds_answer(c: ToolCall, answer: str) -> bool:
    return isinstance(c.args, dict) and any(isinstance(v, str) and _is_answer(v, answer) for v in c.args.values())


def _last_holding_answer(view: TraceView) -> int:
    """The step of the last call with the final answer as an argument (-1: none). Once per view, and only asked of a
    call that holds it."""
    memo = view.__dict__.get("_last_holding_answer")
    if memo is None:
        answer = _answer_text(view)
        memo = view.__dict__["_last_holding_answer"] = next(
            (c.step for c in reversed(view.calls) if answer and _holds_answer(c, answer)), -1)
    return memo


def _is_answer(text: str, answer: str) -> bool:
    """``text`` is ``answer`` (its blanks collapsed, stripped), whitespace aside. A shorter text cannot be it:
    collapsing whitespace only shortens a text."""
    return len(text) >= len(answer) and (text.strip() == answer or " ".join(text.split()) == answer)


def _answer_text(view: TraceView) -> str | None:
    """The final answer with its whitespace runs collapsed to one space and stripped (None for no answer or a blank
    one); once per view: the claim check and the policy rules ask ``delivers`` of every write."""
    memo = view.__dict__.get("_answer_text", _NO_ANSWER)
    if memo is _NO_ANSWER:
        fa = view.traj.final_answer
        memo = view.__dict__["_answer_text"] = (" ".join(fa.split()) or None) if fa else None
    return memo


_NO_ANSWER = object()


def _answer_said_at(view: TraceView) -> list[int]:
    """The assistant messages whose text is the final answer, whitespace aside. Once per view, and only asked where a
    call holds the answer a user or a tool gave before it."""
    memo = view.__dict__.get("_answer_said_at")
    if memo is None:
        answer, texts = _answer_text(view), view.texts
        memo = view.__dict__["_answer_said_at"] = [
            i for i in view.assistant_steps if answer and texts[i] and _is_answer(texts[i], answer)]
    return memo


def _answer_given_at(view: TraceView) -> int:
    """The first step whose user message or tool result holds the final answer (whitespace aside); past the last
    message when none does. Once per view, and only asked of a call with the answer as an argument."""
    memo = view.__dict__.get("_answer_given_at")
    if memo is None:
        answer, msgs = _answer_text(view), view.traj.messages
        memo = len(msgs)
        for i, role in enumerate(view.roles):
            content = msgs[i].get("content") if role in ("user", "tool") else None
            if isinstance(content, str) and answer and answer in " ".join(content.split()):
                memo = i
                break
        view.__dict__["_answer_given_at"] = memo
    return memo


STATUS_FIELD = re.compile(r'"status"\s*:\s*"([A-Za-z][A-Za-z _-]{1,30})"')
ID_FIELD = re.compile(r'"(?:[a-z]+_)?id"\s*:\s*"([^"\\]{3,40})"')
_ID_TAIL = re.compile(r'id"\s*:\s*"([^"\\]{3,40})"')  # ID_FIELD from its "id": a literal the engine skips to
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")


def id_values(text: str) -> list[str]:
    """``ID_FIELD.findall(text)``, found from each ``id"`` (a literal: the regex engine skips to it; ID_FIELD starts
    a match at every quote of a JSON text) and checked back to the key's opening quote: the quote just before
    ``id``, or before the ``[a-z]+_`` just before it (the only ways ID_FIELD's key can start; a key's letters are
    walked back at most once, since a quote ends them)."""
    out = []
    pos = 0  # where ID_FIELD's scan would resume: the last match's end
    scan = 0  # where to look for the next "id"
    search = _ID_TAIL.search
    while (m := search(text, scan)) is not None:
        k = m.start()
        q = k - 1
        if q >= 0 and text[q] == "_":
            q -= 1
            while q >= 0 and text[q] in _LOWER:
                q -= 1
            if q == k - 2:
                q = -1  # no letter before the "_"
        if q >= pos and text[q] == '"':
            out.append(m.group(1))
            pos = scan = m.end()
        else:
            scan = k + 1
    return out


class EntityStatus:
    """The latest status the tools reported per entity: a tool result with one distinct ``"status"`` value
    gives it to every ``*_id`` value in that result. A reply that names such an entity and claims another
    known status (``is`` / ``was`` / ``has been`` / ``status`` shortly before it) without the latest one
    contradicts the tools -- unless the claim is in the past (``was`` / ``were`` / ``has been``) and an earlier
    result gave the entity that status: "your order was delivered" after the agent's own exchange made it "exchange
    requested" (tau-bench retail) is history, not a misread."""

    MAX_VOCAB = 64  # distinct status values tracked (a hostile trace cannot grow the claim regex without bound)
    PAST = frozenset(("was", "were", "has been"))

    def __init__(self) -> None:
        self.latest: dict[str, str] = {}
        self.earlier: dict[str, set[str]] = {}  # entity -> the statuses results gave it before its latest
        self._vocab: set[str] = set()
        # what the vocabulary has still to take, in order: a result's status values (a set), or the text of a result
        # that names no entity, scanned only when the vocabulary is read (``vocab``)
        self._pending: list[set[str] | str] = []

    @property
    def vocab(self) -> set[str]:
        """The distinct status values the results gave, in the order read, up to ``MAX_VOCAB`` (read-only)."""
        if self._pending:
            for found in self._pending:
                if type(found) is str:
                    found = {v.lower() for v in STATUS_FIELD.findall(found[:50_000])}
                if len(self._vocab) < self.MAX_VOCAB:
                    self._vocab |= found
            self._pending = []
        return self._vocab

    def read(self, tool_result: str) -> None:
        if '"status"' not in tool_result:
            return
        head = tool_result[:50_000]
        if 'id"' not in head:
            # no ``id_values`` (each holds an ``id"``): the result names no entity and only adds to the vocabulary,
            # which a reply naming a known entity reads; its scan waits till then (on tau-bench airline, 132 of the
            # 184 status results are flight searches, and 114 of them are never read). The text is the message's
            # own, not a copy
            self._pending.append(tool_result)
            return
        found = {v.lower() for v in STATUS_FIELD.findall(head)}
        if not found:
            return
        self._pending.append(found)
        if len(found) == 1:
            status = next(iter(found))
            for ident in id_values(head):
                key = ident.lower()
                before = self.latest.get(key)
                if before is not None and before != status:
                    self.earlier.setdefault(key, set()).add(before)
                self.latest[key] = status

    def contradicted(self, reply: str) -> str | None:
        if not self.latest:
            return None
        low = reply.lower()
        named = [e for e in self.latest if e in low]
        if not named:
            return None
        if reply.isascii() and not any(map(low.__contains__, self.vocab)):
            # no known status in the reply, so the claim regex cannot match: its IGNORECASE on ASCII text is lower()
            # (the vocabulary is ASCII), and a regex scan tries every character (~170k instructions a reply)
            return None
        head = reply[:20_000]
        low_head = gate_text(head)  # the claim regex case-sensitive on the lower-cased text where that finds the same
        found = _status_claim(frozenset(self.vocab)).finditer(head) if low_head is None else \
            _status_claim(frozenset(self.vocab), 0).finditer(low_head)
        claims = [(m.group(1).lower(), m.group(2).lower()) for m in found]
        for entity in named:
            expected = self.latest[entity]
            history = self.earlier.get(entity, ())
            wrong = sorted({status for verb, status in claims if status != expected
                            and not (verb in self.PAST and status in history)})
            if wrong and expected not in low:
                return f"{entity} is {expected!r} in the tools, the reply says {wrong[0]!r}"
        return None


@lru_cache(maxsize=256)
def _status_claim(vocab: frozenset[str], flags: int = re.IGNORECASE) -> re.Pattern[str]:
    """The claim regex of a status vocabulary: built when a reply names an entity (most replies name none), once
    per distinct vocabulary. Case-blind; with ``flags=0`` its case-sensitive twin, for a reply's ``gate_text``: its
    literals are lower-case ASCII (the verbs; the statuses, ``STATUS_FIELD`` values lower-cased), so it finds the
    same matches at the same places there (``str.lower`` keeps such a text's length and every character's
    \\w-ness; tests/traces/test_traces_patterns_gate.py), about four times faster than the case-blind search."""
    alts = "|".join(sorted((re.escape(v) for v in vocab), key=lambda e: (-len(e), e)))  # longest first
    return re.compile(rf"\b(status|is|was|has been|are|were)\W+(?:\w+\W+){{0,2}}?({alts})\b", flags)


class PoorDeliveryDetector:
    """Delivered but scored below ``poor_delivery_threshold`` (or a failure-only, unscored record)."""

    id = "F4.poor_delivery"
    failure_class = F4

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if not t.delivered:
            return []
        if t.score is not None and t.score < cfg.poor_delivery_threshold:
            why = f"score {t.score:.2f} < {cfg.poor_delivery_threshold:g}"
        elif t.score is None and t.meta.get("failure_only"):
            why = "failure-only record (unscored)"
        else:
            return []
        step = _before_closing(view, answer_step(view))
        declined = first_refusal(view, step)
        if declined is not None:
            return [Signal(id=self.id, failure_class=F4, step=declined,
                           evidence=f"{why}; no write, and the agent first declined here: "
                                    f"{quote(view.texts[declined], 150)}")]
        return [Signal(id=self.id, failure_class=F4, step=step,
                       evidence=f"{why}; final answer: {quote(t.final_answer, 150)}")]


# the agent declining what was asked: "I'm unable to ...", "I cannot ...", "... cannot be modified / cancelled /
# returned / exchanged" (an airline's and a shop's actions) -- not a look-up that found nothing ("I'm unable to find /
# locate / retrieve / look up ...", "I can't find ..."): a report of what the agent looked for, no declining. Unless
# what it cannot find or see is a way to act ("I can't see any way to refund this", "unable to find a way to cancel",
# "can't see how to change", "any option to upgrade", "any means of waiving"): that says it cannot do the task ("how
# many bags", "any means of payment", "the way the fare was calculated" are what it looked for)
_ACTION_OBJECT = (r"\s+(?:(?:any|a|an|another|the|other)\s+)?"
                  r"(?:ways?(?:\s+(?:to|for|around|i|we|of\s+\w+ing)\b|\s*(?:[.!,;]|$))"
                  r"|means\s+(?:to\b|of\s+\w+ing\b)|possibilit(?:y|ies)\b|options?\s+to\b|how\s+(?:to|i|we)\b)")
_LOOKED_UP = (r"(?!\s+(?:to\s+)?(?:find|locate|retrieve|look\s+up|see|spot|track\s+down)\b"
              rf"(?!{_ACTION_OBJECT}))")
REFUSAL = re.compile(rf"\b(?:i|we)(?:['’]m|\s+am|\s+are)?\s+(?:unable|not able)\b{_LOOKED_UP}"
                     rf"|\b(?:i|we)\s+(?:cannot|can['’]t|can not)\b{_LOOKED_UP}"
                     r"|\bcannot be (?:modified|changed|cancell?ed|refunded|upgraded|removed|added|booked|done|returned"
                     r"|exchanged)\b")


def writes_text_edit(text: str) -> bool:
    """An edit the reply writes in its text for a harness to apply (no tool call): Aider's SEARCH/REPLACE block (a
    line ``<<<<<<< SEARCH``), the apply_patch envelope (``*** Begin Patch``), or a unified diff in a ```diff fence (its
    ``+++ `` or ``@@`` lines: Aider's udiff). Substring searches only, each fence read once: linear in the text."""
    if "\n<<<<<<< SEARCH" in text or text.startswith("<<<<<<< SEARCH") or "*** Begin Patch" in text:
        return True
    i = text.find("```diff")
    while i >= 0:
        end = text.find("```", i + 7)
        body = text[i:end] if end >= 0 else text[i:]
        if "\n+++ " in body or "\n@@" in body:
            return True
        if end < 0:
            return False
        i = text.find("```diff", end + 3)
    return False


def text_edit_steps(view: TraceView) -> list[int]:
    """The assistant messages of a single-agent conversation with no tool call at all (a user turn, no named
    speakers) whose text holds an edit for the harness to apply (``writes_text_edit``: Aider writes its edits so): that
    agent's writes. [] elsewhere; once per view."""
    memo = view.__dict__.get("_text_edits")
    if memo is None:
        memo = []
        first = view.assistant_steps[0] if view.assistant_steps else None
        if not view.calls and view.user_steps and first is not None and not view.traj.messages[first].get("name"):
            memo = [i for i in view.assistant_steps if writes_text_edit(view.texts[i])]
        view.__dict__["_text_edits"] = memo
    return memo


def first_refusal(view: TraceView, before: int) -> int | None:
    """A failed conversation that wrote nothing, and in which the agent declined the request: its first refusal
    (an assistant message with text matching ``REFUSAL``) before ``before`` (the delivery) -- what the run then did
    follows from it. None with a write (then the write locates it), with no user turn (nobody to decline), in a
    multi-agent log (named speakers) or when the agent never declined."""
    msgs = view.traj.messages
    if not view.user_steps or not view.assistant_steps or msgs[view.assistant_steps[0]].get("name"):
        return None
    if write_calls(view) or text_edit_steps(view):
        return None
    first = view.__dict__.get("_first_refusal", -1)  # once per view: F4.poor_delivery and F4.stalled both ask
    if first == -1:
        first = view.__dict__["_first_refusal"] = next(
            (i for i in view.assistant_steps if view.texts[i] and _refuses(view.lowered(i))), None)
    return first if first is not None and first < before else None


def _refuses(low: str) -> bool:
    """``REFUSAL.search(low) is not None``, the regex run only where a word every match holds occurs (its alternatives
    end in "unable" / "not able", in "cannot" / "can't" / "can’t" / "can not", or open with "cannot be"): a substring
    search is a C scan, where the regex tries a match at every character (each alternative opens with ``\\b``, no
    literal for the engine to skip to). The four "can" words are looked for only where "can" is."""
    if "unable" not in low and "not able" not in low and ("can" not in low or (
            "cannot" not in low and "can't" not in low and "can\u2019t" not in low and "can not" not in low)):
        return False
    return REFUSAL.search(low) is not None


# a closing pleasantry: short, no figure, opening with thanks or a welcome ("You're welcome! Safe travels!")
CLOSING_OPENINGS = ("you're welcome", "you are welcome", "thank", "no problem", "my pleasure", "glad", "goodbye",
                    "take care")
_DIGITS = frozenset("0123456789")
# ... unless it states an outcome or an action: then it is the delivery, whatever it opens with ("Thanks, your refund
# is done", "Thank you! I have cancelled the reservation", "You're all set", "Thank you. Unfortunately, I cannot
# remove a passenger"): a done state, a first-person completed action, a refusal or a transfer (``_NOT_YET`` clauses
# left out)
_DONE = (r"done|complete|completed|confirmed|finali[sz]ed|processed|cancell?ed|booked|rebooked|reserved|updated|"
         r"changed|modified|upgraded|downgraded|refunded|issued|credited|charged|paid|sent|added|removed|applied|"
         r"approved|declined|denied|transferred|submitted|scheduled|resolved|fixed|located|found|verified|all set")
_OUTCOME = (
    rf"\b(?:is|are|was|were|has been|have been|had been)\s+(?:now\s+|all\s+|already\s+|successfully\s+)*(?:{_DONE})\b"
    rf"|(?:'s|'re)\s+(?:now\s+|all\s+|already\s+)*(?:{_DONE})\b"
    rf"|\b(?:i|we)(?:'ve|\s+have|\s+just|\s+now|\s+also|\s+successfully)*\s+(?:{_DONE}|made|taken|put|got)\b"
    r"|\bunfortunately\b|\b(?:i|we)(?:'m|\s+am|\s+are)?\s+(?:unable|not able)\b"
    r"|\b(?:i|we)\s+(?:cannot|can't|could not|couldn't)\b|\btransferr(?:ed|ing) you\b")


@lru_cache(maxsize=1)
def outcome() -> re.Pattern[str]:
    """``_OUTCOME`` (lower case: it reads lower-cased text, which compiles in half the time of ``re.IGNORECASE``),
    compiled on first use (about 4 ms; only a short reply opening with thanks or a welcome needs it), not at import."""
    return re.compile(_OUTCOME)


# a clause that waits or wishes states nothing done: "Once that's done, ...", "I hope it is resolved soon"
_NOT_YET = re.compile(r"\b(?:once|when|whenever|if|after|until|as soon as|hope|wish)\b[^.!?,;]*", re.IGNORECASE)


def _before_closing(view: TraceView, step: int) -> int:
    """A single-agent run's delivery, past the closing pleasantries that end a conversation: the last assistant
    message at or before ``step`` that is not one (under 300 characters, no digit, opening with thanks or a
    welcome, no tool call, stating no outcome or action: ``_OUTCOME``) -- a run does not fail at "You're welcome!"
    but at the last thing it said or did before it. Multi-agent logs (named speakers) keep their step."""
    msgs, texts = view.traj.messages, view.texts
    if not view.assistant_steps or not _closing(msgs[step], texts[step]) or msgs[view.assistant_steps[0]].get("name"):
        return step
    for i in reversed(view.assistant_steps):
        if i < step and not _closing(msgs[i], texts[i]):
            return i
    return step


# a word every match holds: of ``_NOT_YET`` (its keywords) and of ``outcome()`` (a done word, a first-person verb, a
# refusal, a transfer; "cancel" for cancel(l)ed, "finali" for finali[sz]ed, "transferr" for transferred / transferring)
_NOT_YET_WORDS = ("once", "when", "if", "after", "until", "as soon as", "hope", "wish")
_OUTCOME_WORDS = [w.replace("cancell?ed", "cancel").replace("finali[sz]ed", "finali") for w in _DONE.split("|")] + [
    "made", "taken", "put", "got", "unfortunately", "unable", "not able", "cannot", "can't", "could not", "couldn't",
    "transferr"]
_OUTCOME_WORDS = tuple(w for w in _OUTCOME_WORDS if not any(v != w and v in w for v in _OUTCOME_WORDS))  # "completed"


def _closing(message: dict, text: str) -> bool:
    """A closing pleasantry (``_before_closing``). Its two regexes run only where a word every match of theirs holds
    occurs (each tries a match at every character: ~14 and ~33 microseconds a reply, against ~2 for the word tests;
    on tau-bench 10 of 104 such replies hold an outcome word, 80 a not-yet word, "if" mostly); ``_NOT_YET`` is
    case-blind, so its words are tested on ASCII text only (other text may fold onto them: "ſ" is "s")."""
    if not (len(text) < 300 and not message.get("tool_calls") and
            text.lstrip()[:16].lower().startswith(CLOSING_OPENINGS) and _DIGITS.isdisjoint(text)):
        return False
    low = text.lower()
    if not any(w in low for w in _OUTCOME_WORDS):
        return True  # (a not-yet clause's removal leaves a blank before [.!?,;] or the end: it joins no new word)
    if not text.isascii() or any(w in low for w in _NOT_YET_WORDS):
        low = _NOT_YET.sub(" ", text).lower()
    return not outcome().search(low)


# Signals that say *that* a run failed rather than where: the labeller takes one as the first
# signal only when no located signal fired (the earliest of them then).
FALLBACK_SIGNALS = frozenset({"F4.poor_delivery", "F4.first_commitment", "F4.first_write", "F3.no_delivery"})


def _failed_delivery(view: TraceView, cfg: DiagnosisConfig) -> bool:
    t = view.traj
    return t.delivered and ((t.score is not None and t.score < cfg.poor_delivery_threshold)
                            or (t.score is None and bool(t.meta.get("failure_only"))))


# the policy rules over what a write is done to (invariants.py, policy_limits.py): their violation was decided where
# the agent proposed the write
WRITE_RULES = frozenset(("policy.precondition", "policy.once", "policy.check_first"))


class PolicyViolationDetector:
    """The first domain-policy violation of the violation log (invariants.py): a write action with no
    identity check or no explicit confirmation before it, tried on a thing whose status the policy rules out, made
    again where the policy allows it once, or made on a thing whose status the policy says to check first and no
    result showed (these three located at the proposal the user said yes to, where there is one)."""

    id = "F4.policy_violation"
    failure_class = F4
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        if t.score is not None and t.score >= cfg.healthy_threshold:
            return []  # the violation log is read for failed runs only
        # the violation log's first policy violation: its sort key (step, rule) is distinct among the policy rules'
        # violations (one of each rule at most), so it is theirs alone; the schema rules are not needed for it
        first = min(policy_violations_of(view), key=lambda v: (v.step, v.rule), default=None)
        if first is None:
            return []
        step = first.step
        if first.rule in WRITE_RULES and (decided := confirmed_proposal(view, step)) is not None:
            # a write tried on a thing the policy rules out, made a second time or on a thing whose status the agent
            # never checked was decided where the agent proposed it and the user said yes (the agent had what it
            # knew then), as ``F4.first_write`` places a confirmed write
            step = decided[0]
        return [Signal(id=self.id, failure_class=F4, step=step, evidence=f"{first.rule}: {first.evidence}")]


def after_a_write_went_through(view: TraceView, first: Signal) -> bool:
    """Does ``first``, a failed run's first located signal, yield to ``F4.first_write``: a confirmation the policy
    asks for, missing at a write made after the run's first write went through (its result no refusal:
    ``_refused``)? The run is judged on the state its writes leave, and that state had already changed at the first
    write; a later write done on the user's word without the explicit yes breaks the procedure but is not where the
    outcome first diverged (tau-bench airline dev labels: the later unconfirmed write is a bag or flight change the
    user had asked for). A first write that was refused changed nothing: the violation keeps its place there, as it
    does at the first write itself. The labeller then takes the ``F4.first_write`` signal where it lies before
    ``first``."""
    if first.id != PolicyViolationDetector.id or not first.evidence.startswith("policy.confirmation:"):
        return False
    writes = write_calls(view)
    return bool(writes) and writes[0].step < first.step and not _refused(view, writes[0])


DIFF_PATH = re.compile(r"^diff --git a/(\S{1,300}) b/", re.M)


# a file the diff creates (its header's next lines: ``new file mode``, or ``--- /dev/null`` after an index line)
NEW_FILE = re.compile(r"^diff --git a/(\S{1,300}) b/\S*\n(?:[^\n]*\n){0,2}?(?:new file mode|--- /dev/null)", re.M)


def delivered_paths(answer: str | None) -> list[str]:
    """Files a delivered unified diff changes (``diff --git a/X b/X``), in order; [] for other answers."""
    if not isinstance(answer, str) or "diff --git" not in answer:
        return []
    return list(dict.fromkeys(DIFF_PATH.findall(answer[:500_000])))


class FirstWriteDetector:
    """Where a failed tool-using run's content failure is located when nothing else says: its first write
    action (the outcome is judged on the state the writes leave; the first write is where it can first
    diverge). When the delivered answer is a patch, the first write that touches a file the patch changes
    (a reproduction script is a write, but the failure lives in the patched files); when no patch is delivered but
    the run edits existing files in place (a coding agent that ends with a message), its first such edit. A fallback
    signal: any located signal wins over it."""

    id = "F4.first_write"
    failure_class = F4

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        if not _failed_delivery(view, cfg):
            return []
        writes = write_calls(view)
        if not writes:
            return self._text_edit(view)
        paths = delivered_paths(view.traj.final_answer)
        if not paths:  # no patch names the files that matter (OpenHands' finish message, a Harbor trial's last text)
            edit = next((c for c in writes if _edits_in_place(c)), None)
            if edit is not None and edit is not writes[0]:
                # a coding run: its change to the code starts at its first edit of an existing file, not at the
                # reproduction script it created or the package it installed first
                before = f"{writes[0].name}({quote(writes[0].arguments, 60)})"
                return [Signal(id=self.id, failure_class=F4, step=edit.step,
                               evidence=f"no patch delivered; first in-place edit of an existing file (the writes "
                                        f"before it create or install: {before}): "
                                        f"{edit.name}({quote(edit.arguments, 120)})")]
        # the first write to the first group of patched files written at all: the files that existed before, then
        # the files the patch creates; a write undone later (``_undone_writes``) is none of the change the patch holds
        target = _write_targets(view, writes) if paths else {}
        groups = _path_groups(view.traj.final_answer, paths)
        undone = _undone_writes(view, writes, paths, target) if paths else set()
        w, group = next(((c, g) for g in groups for c in writes if c.id not in undone
                         and any(writes_file(view, c, p, target) for p in g)), None) or next(
            ((c, g) for g in groups for c in writes if any(writes_file(view, c, p, target) for p in g)),
            (writes[0], paths))
        what = "first write to a file the delivered patch changes" if paths and w is not writes[0] else \
            "first write action of a failed run"
        if undone and any(c.id in undone and c.step < w.step for c in writes):
            what += f" and not undone later (the earlier writes of {', '.join(group)} were put back)"
        if paths and w is writes[0] and not any(writes_file(view, w, p, target) for p in paths):
            # no write touches a patched file: the agent's edits did not reach the diff (a sed that matched
            # nothing, a file reverted; the diff holds changes the agent never made). Its change to the code
            # starts at its first in-place edit of an existing file, not at a reproduction file it created
            edit = next((c for c in writes if IN_PLACE_EDIT.search(c.canonical[:20_000])), None)
            early = _rejected_patch_write(view, (), edit.step if edit else len(view.traj.messages), IN_PLACE_EDIT)
            if early is not None or edit is not None:
                step, text = early if early is not None else (edit.step, f"{edit.name}({edit.arguments})")
                return [Signal(id=self.id, failure_class=F4, step=step,
                               evidence=f"no write touches a file the delivered patch changes; first in-place edit"
                                        f"{' (in a reply rejected for its format)' if early else ''}: "
                                        f"{quote(text, 120)}")]
        touches = bool(paths) and any(writes_file(view, w, p, target) for p in group)
        accepted = _accepted_edit(view, writes, w, group, target) if touches else None
        if accepted is not None:
            return [_refused_or_accepted(view, writes, w, accepted, group, target)]
        # no edit of the file went through (or none was refused first): a reply rejected for its format whose block
        # writes it (targets it: a block that only names it is none) before the first write is the first refusal
        rejected = _rejected_blocks(view, group, w.step)[:1] if paths else []
        if rejected:
            step, _, block = rejected[0]
            return [Signal(id=self.id, failure_class=F4, step=step,
                           evidence=f"first write to a file the delivered patch changes, in a reply rejected for its "
                                    f"format (the first that ran: step {w.step}): {quote(block, 120)}")]
        proposed = None if paths else confirmed_proposal(view, w.step)
        if proposed is not None:
            step, yes = proposed
            return [Signal(id=self.id, failure_class=F4, step=step,
                           evidence=f"{what}, proposed here and confirmed by the user at step {yes}: "
                                    f"{w.name}({quote(w.arguments, 120)})")]
        opened = target.get(w.id, "").partition(OPEN_FILE_SEP)[2]
        return [Signal(id=self.id, failure_class=F4, step=w.step,
                       evidence=f"{what}: {w.name}({quote(w.arguments, 120)})"
                                + (f" (the open file: {opened})" if opened else ""))]


    def _text_edit(self, view: TraceView) -> list[Signal]:
        """A conversation whose agent writes its edits in its replies (``text_edit_steps``): the first reply with an
        edit of a file the delivered patch changes, else the first with an edit."""
        steps = text_edit_steps(view)
        if not steps:
            return []
        names = [posixpath.basename(p) for p in delivered_paths(view.traj.final_answer)]
        step = next((i for i in steps if any(n in view.texts[i] for n in names)), steps[0])
        return [Signal(id=self.id, failure_class=F4, step=step,
                       evidence=f"first edit the agent wrote in a reply (no tool call): "
                                f"{quote(view.texts[step], 150)}")]


# a write that did not run: SWE-agent's linter refusing an edit, a command it did not execute (swe_agent.REFUSAL), an
# editor's replacement that found nothing to replace, an error the tool answers (OpenHands: "ERROR:\nNo replacement
# was performed ...", "ERROR:\nInvalid `path` parameter ..."; its linter's "[Your proposed edit has introduced ...";
# tau-bench's "Error: ...") -- not a shell tool's ("said"): that is what the command printed after it ran
REFUSED_EDIT = re.compile(
    r"\s*(?:\[?Your proposed edit has introduced new syntax error|Your bash command contained syntax errors and was "
    r"NOT executed|No replacement was performed|(?P<said>Error:|ERROR:))|[^\n]{0,200}have NOT been applied")


_REFUSAL_OPENS = frozenset("[YNE")  # the first letters of REFUSED_EDIT's openings ("[Your", "No ...", "Error:")


def _edits_in_place(c: ToolCall) -> bool:
    """A write that changes an existing file where it stands (``IN_PLACE_EDIT``: ``sed -i``, ``patch``, an editor's
    ``str_replace``, ...; or any editor tool replacing ``old_str`` / ``old_string``: Claude Code's ``Edit``). Once per
    call (kept on it): the first write rule and the recovery rule (``_may_write_patch``) ask it of the same writes."""
    known = c.in_place
    if known is None:
        known = c.in_place = (not _lacks_in_place_words(c) and IN_PLACE_EDIT.search(c.canonical[:20_000]) is not None) \
            or (c.parsed_ok and isinstance(c.args, dict) and ("old_str" in c.args or "old_string" in c.args))
    return known


def _lacks_in_place_words(c: ToolCall) -> bool:
    """``c.canonical_lacks(IN_PLACE_WORDS)``, its ten words "edit" + a blank found by one search for "edit" and a look
    at the character after each: a text that lacks the other six words (and passes the gate's ASCII tests) lacks them
    all unless an "edit" in it is followed by one of those blanks (a payment id's "credit_" is not)."""
    if not c.canonical_lacks(_IN_PLACE_HEADS):
        return False
    raw = c.arguments  # (the raw text: the gate above holds only for a text)
    pos = raw.find("edit")
    while pos >= 0:
        after = raw[pos + 4:pos + 5]
        if after and after in ASCII_BLANKS:
            return False
        pos = raw.find("edit", pos + 1)
    return True


def _refused(view: TraceView, c: ToolCall) -> bool:
    """A write call that changed nothing: its result is a refusal (``REFUSED_EDIT``; a shell command's non-zero exit
    is none: part of it may have run, and nor is its output starting with ``Error:`` / ``ERROR:``: pytest's "ERROR:
    file or directory not found", pip's "ERROR: ...", a script's "Error: ..." after a ``sed -i ... &&`` that ran)."""
    res = view.results.get(c.id)
    if res is None:
        return False
    head = res[1][:400]
    # the regex only where it can match (~0.1 k instructions, not ~4 k: its "have NOT been applied" alternative tries
    # each of the first 200 characters): it opens, past blanks, with one of its openings' first letters, or holds that
    # phrase. Exact: ``\s`` and ``str.lstrip`` skip the same characters (``test_refused_edit.py`` compares the two)
    if head.lstrip()[:1] not in _REFUSAL_OPENS and "have NOT been applied" not in head:
        return False
    m = REFUSED_EDIT.match(head)
    return m is not None and (m.group("said") is None or not is_shell(c.name))


# a command that puts files back as the repository has them: ``git checkout [--] FILE`` / ``git restore FILE`` (the
# files it writes, ``writes_file``), or every file: ``git checkout .``, ``git restore .``, ``git reset --hard``
RESET_FILES = re.compile(r"\bgit\s+(?:checkout|restore)\s[^;&|\n]*")
RESET_TREE = re.compile(r"\bgit\s+(?:reset\s+--hard\b|(?:checkout|restore)\s+(?:--\s+)?\.(?=$|[\s;&|)]))[^;&|\n]*")


def _undone_writes(view: TraceView, writes: list[ToolCall], paths: list[str], target: dict[str, str]) -> set[str]:
    """Ids of the writes to files of the delivered patch that the patch cannot hold, since the run undid them later:
    an editor replacement put back by a later one (its ``new_str`` replaced by its ``old_str`` again), or the file
    checked out or restored from git (``RESET_FILES``, ``RESET_TREE``) -- and the writes that undo them, which put
    back what was there. A reset before any write of its files undoes nothing (a write as before), nor does a command
    that also writes otherwise (``git checkout f && sed -i ... f``). An undone write whose change a later write that
    stays makes again (the same edit text, or the same words added, ``write_targets.change_words``: the edit
    re-applied after a reset) is kept: the agent committed to that change there, as with a refused edit. (Not
    ``same_change``'s half of the words: a short guard rewritten another way shares most of them.)"""
    undone: set[str] = set()
    live: list[tuple[ToolCall, set[str]]] = []  # the writes not undone yet and the patched files each writes
    for c in writes:
        if _refused(view, c):
            continue
        if is_shell(c.name):
            cmd = _command(c)[:20_000]
            whole = RESET_TREE.search(cmd) is not None
            if (whole or RESET_FILES.search(cmd)) and not MUTATING_COMMAND.search(
                    RESET_FILES.sub(" ", RESET_TREE.sub(" ", cmd))):
                reset = set(paths) if whole else {p for p in paths if writes_file(view, c, p, target)}
                put_back = [e for e, wrote in live if reset and wrote <= reset]
                if put_back:  # a reset of files not written yet undoes nothing: a write as any other
                    undone.update(e.id for e in put_back)
                    undone.add(c.id)
                    live = [(e, wrote) for e, wrote in live if e.id not in undone]
                    continue
        mine = {p for p in paths if writes_file(view, c, p, target)}
        if not mine:
            continue
        args = c.args if isinstance(c.args, dict) else {}
        old, new = args.get("old_str"), args.get("new_str")
        back = next((e for e, wrote in reversed(live) if wrote == mine and isinstance(e.args, dict)
                     and e.args.get("new_str") == old and e.args.get("old_str") == new),
                    None) if isinstance(old, str) and isinstance(new, str) and old != new else None
        if back is not None:
            undone.update((back.id, c.id))
            live = [(e, wrote) for e, wrote in live if e is not back]
            continue
        live.append((c, mine))
    if undone:
        stays = [(e, sorted(wrote), _edit_text(view, e, sorted(wrote), target)) for e, wrote in live]
        stays = [(e, wrote, text, change_words(text)) for e, wrote, text in stays]
        for e in writes:
            if e.id in undone and not (is_shell(e.name) and (RESET_TREE.search(_command(e)[:20_000])
                                                             or RESET_FILES.search(_command(e)[:20_000]))):
                group = [p for p in paths if writes_file(view, e, p, target)]
                text = _edit_text(view, e, group, target)
                words = change_words(text)
                if any(k.step > e.step and set(group) & set(g) and (text == done or (words and words == added))
                       for k, g, done, added in stays):
                    undone.discard(e.id)
    return undone


def _accepted_edit(view: TraceView, writes: list[ToolCall], w: ToolCall, group: list[str],
                   target: dict[str, str]) -> ToolCall | None:
    """The first write of a file of ``group`` from ``w`` on that went through, when an edit of it was refused first
    -- ``w`` itself refused, or a reply rejected for its format before it whose block writes such a file -- else
    None (nothing was refused before the first accepted edit, or no edit went through)."""
    first = next((c for c in writes if c.step >= w.step and not _refused(view, c)
                  and any(writes_file(view, c, p, target) for p in group)), None)
    if first is None or (first is w and _rejected_blocks(view, group, w.step) == []):
        return None
    return first


def _rejected_blocks(view: TraceView, group: list[str], before: int) -> list[tuple[int, str, str]]:
    """``(step, edit text, block)`` of each reply before step ``before`` that the harness rejected for its format (a
    ``format_rejected`` event right after it: nothing in it ran) and whose fenced block writes a file of ``group``.
    A block is parsed only where it holds a file's base name; the list is made once per view and group."""
    events = view.traj.events
    if not events:
        return []
    memo = view.__dict__.setdefault("_rejected_blocks", {})
    out = memo.get(tuple(group))
    if out is None:
        after = {e.step for e in events if e.type == "format_rejected" and e.step is not None}
        msgs, out = view.traj.messages, []
        names = {posixpath.basename(p) for p in group}
        for s in view.assistant_steps:
            if s + 1 in after and not msgs[s].get("tool_calls") and "```" in view.texts[s]:
                for block in reply_blocks(view.texts[s][:100_000]):
                    if not any(n in block for n in names):
                        continue
                    got = shell_writes(block, tuple(names))
                    edits = [e for f, e in zip(got.files, got.edits, strict=True)
                             if any(same_file(f, p) for p in group)]
                    if edits:
                        out.append((s, "\n".join(edits), block))
        memo[tuple(group)] = out
    return [r for r in out if r[0] < before]


def _edit_text(view: TraceView, c: ToolCall, group: list[str], target: dict[str, str]) -> str:
    """What write call ``c`` writes to the files of ``group``: the parts of a shell command that write them, else
    the call's arguments."""
    if is_shell(c.name) and c.id not in target:
        got = shell_writes(_command(c)[:200_000], tuple({posixpath.basename(p) for p in group}))
        edits = [e for f, e in zip(got.files, got.edits, strict=True) if any(same_file(f, p) for p in group)]
        if edits:
            return "\n".join(edits)
    if is_shell(c.name):
        return _command(c)
    args = c.args if isinstance(c.args, dict) else {}
    # SWE-agent's / OpenHands' editor, its edit_replace bundle's edit SEARCH REPLACE, Claude Code's Edit / Write
    old = next((v for k in ("old_str", "search", "old_string") if isinstance(v := args.get(k), str)), None)
    new = next((v for k in ("new_str", "replace", "new_string", "file_text", "content", "text", "insert_text")
                if isinstance(v := args.get(k), str)), None)
    if new is None:
        return c.canonical
    return json.dumps({"old_str": old, "new_str": new}, separators=(",", ":")) if isinstance(old, str) else new


def _refused_or_accepted(view: TraceView, writes: list[ToolCall], w: ToolCall, accepted: ToolCall,
                         group: list[str], target: dict[str, str]) -> Signal:
    """Where a failed run's change to a patched file starts when an edit of it was refused before one went through
    (a reply rejected for its format, a linter refusal, a replacement that found nothing): at the first refused edit
    that makes the same change as the accepted one (``write_targets.same_change``: the agent committed to that
    change there; the harness refused its form), else at the accepted edit -- a refused edit whose change the
    agent then dropped or replaced never reached the state the run is judged on."""
    done = change_words(_edit_text(view, accepted, group, target))
    tries = [(s, text, block, "a reply rejected for its format")
             for s, text, block in _rejected_blocks(view, group, accepted.step)]
    tries += [(c.step, _edit_text(view, c, group, target), f"{c.name}({c.arguments})", "a refused edit")
              for c in writes if w.step <= c.step < accepted.step and _refused(view, c)
              and any(writes_file(view, c, p, target) for p in group)]
    for step, text, shown, how in sorted(tries, key=lambda t: t[0]):
        if same_change(change_words(text), done):
            return Signal(id=FirstWriteDetector.id, failure_class=F4, step=step,
                          evidence=f"first write to a file the delivered patch changes, in {how} (the same change "
                                   f"went through at step {accepted.step}): {quote(shown, 120)}")
    return Signal(id=FirstWriteDetector.id, failure_class=F4, step=accepted.step,
                  evidence=f"first write to a file the delivered patch changes that went through (the "
                           f"{len(tries)} refused before it made another change): "
                           f"{accepted.name}({quote(accepted.arguments, 120)})")


# an edit of a file in place (not a new file, not a redirection): sed / perl -i, patch, git apply, an editor tool.
# ``patch`` only where a command starts (the text's or a JSON string's start, an escaped or real new line, ; & | or
# a parenthesis) and takes an argument: not a script's ``from unittest.mock import patch``, nor ``> fix.patch``. Blanks
# after a line start as in ``SWE_EDITOR`` (``[^\S\n]*``: 20,000 blank lines took 5.8 s a search with ``\s*``)
IN_PLACE_EDIT = re.compile(
    r"(?:\b|(?<=\\n))(?:sed|perl)[^\S\n]+(?:(?:[^\s|;&\\]|\\(?!n))+[^\S\n]+)*?-(?:[a-zA-Z]*i(?![a-zA-Z])|-in-place)|"
    r"(?:^|[\n\"'`;&|(]|\\n)[^\S\n]*(?:sudo\s+)?patch\s+[-<\w./]|git\s+apply|apply_patch|"
    r"\bstr_replace\b|str_replace_editor\s+(?:insert|undo_edit)\b|\"command\":\"(?:insert|undo_edit)\"|"
    r"(?:^|\n|\\n|\"command\":\")[^\S\n]*edit\s+\d+:\d+")


# a word every match of ``IN_PLACE_EDIT`` holds (the regex is case-sensitive; each alternative holds one): a write call
# whose arguments hold none is no in-place edit without the regex (it tries a match at every character) or the
# canonical text: tau-bench's failed runs spent ~60 M instructions per 200 records on their writes' arguments. The
# windowed edit's "edit" is followed by a blank (``edit\s+\d``), so "edit" and each ASCII character ``\s`` takes: a
# bare "edit" let every tau-bench write naming a "credit_card_..." payment through (82 of its 250 writes)
_IN_PLACE_HEADS = ("sed", "perl", "patch", "apply", "str_replace", "command")
IN_PLACE_WORDS = _IN_PLACE_HEADS + tuple("edit" + c for c in ASCII_BLANKS)  # (the ASCII characters \s takes)


# SWE-agent's classic editor: ``open FILE [LINE]`` / ``create FILE`` make FILE the open file; ``edit N:M`` writes it
OPEN_COMMAND = re.compile(r"^\s*(?:open|create)\s+[\"']?([^\s\"']+)")
WINDOWED_EDIT = re.compile(r"^\s*edit\s+\d+:\d+")
OPEN_FILE_SEP = "\x00open file: "


def _write_targets(view: TraceView, writes: list[ToolCall]) -> dict[str, str]:
    """For each write among ``writes`` that names no file but writes the open one -- a windowed ``edit N:M`` shell
    command, or with function calling an ``edit`` / ``insert`` tool call without a path argument (SWE-agent's
    ``edit SEARCH REPLACE``) -- its canonical text with the file open at that point appended (after
    ``OPEN_FILE_SEP``): the file it writes. The open file is the last ``open`` / ``create`` FILE, a shell command
    or a tool call (``path`` / ``filename``). Empty for a run without such edits (the call's canonical text then
    says which file a write touches)."""
    edits = {c.id for c in writes if _writes_open_file(c)}
    if not edits:
        return {}
    out: dict[str, str] = {}
    current = ""
    for c in view.calls:
        opened = _opened_file(c)
        if opened:
            current = opened.removeprefix("/testbed/").removeprefix("./")
        elif c.id in edits and current:
            out[c.id] = c.canonical + OPEN_FILE_SEP + current
    return out


PATH_ARGS = ("path", "file", "filename", "file_path", "target_file")
# a command that may write a file without naming it: a formatter run on a folder, ``find DIR ... -exec`` / ``-delete``
TREE_WRITE = re.compile(r"\b(?:find|black|isort|ruff|autopep8|yapf|autoflake)\b")


def writes_file(view: TraceView, c: ToolCall, path: str, target: dict[str, str]) -> bool:
    """Does write call ``c`` write the repository file ``path`` (write_targets.py): a shell command that targets it
    (naming it is not enough), an editor tool call whose path argument is it, a windowed edit of it as the open file
    (``target``: ``_write_targets``); another write tool, or a command that writes files it does not say, where it
    names it."""
    opened = target.get(c.id)
    if opened is not None:
        return same_file(normal(opened.partition(OPEN_FILE_SEP)[2]), path)
    if is_shell(c.name):
        cmd = _command(c)
        if posixpath.basename(path) not in cmd and not TREE_WRITE.search(cmd[:20_000]):
            return False
        memo = view.__dict__.setdefault("_shell_writes", {})
        name = posixpath.basename(path)
        w = memo.get((c.id, name))
        if w is None:
            w = memo[(c.id, name)] = shell_writes(cmd[:200_000], (name,))
        return w.writes(path, cmd)
    if isinstance(c.args, dict):
        named = [v for k in PATH_ARGS if isinstance(v := c.args.get(k), str)]
        if named:
            return any(same_file(normal(v), path) for v in named)
    return path in c.canonical


def _writes_open_file(c: ToolCall) -> bool:
    if is_shell(c.name):
        return c.canonical_may_hold("edit") and WINDOWED_EDIT.match(_command(c)) is not None
    return c.name in ("edit", "insert") and isinstance(c.args, dict) and not any(
        k in c.args for k in ("path", "file", "filename", "file_path"))


def _opened_file(c: ToolCall) -> str:
    """The file an ``open`` / ``create`` makes the open file ("" for other calls)."""
    if is_shell(c.name):
        m = OPEN_COMMAND.match(_command(c)) if c.canonical_may_hold("open") or c.canonical_may_hold("create") else None
        return m.group(1) if m else ""
    if c.name in ("open", "create") and isinstance(c.args, dict):
        path = c.args.get("path", c.args.get("filename"))
        return path.strip("\"'") if isinstance(path, str) else ""
    return ""


def _command(call: ToolCall) -> str:
    """A shell call's command text (its ``command`` / ``cmd`` argument, else its raw arguments)."""
    args = call.args
    if isinstance(args, dict):
        cmd = args.get("command", args.get("cmd"))
        if isinstance(cmd, str):
            return cmd
    return call.arguments if isinstance(call.arguments, str) else ""


def _path_groups(answer: str | None, paths: list[str]) -> list[list[str]]:
    """``paths`` (``delivered_paths``) as two groups, the files that existed before and the files the diff
    creates; one group where it creates none."""
    if not paths or not isinstance(answer, str) or ("new file mode" not in answer and "/dev/null" not in answer):
        return [paths]
    new = set(NEW_FILE.findall(answer[:500_000]))
    return [[p for p in paths if p not in new], [p for p in paths if p in new]]


def _rejected_patch_write(view: TraceView, paths: list[str] | tuple[()], before: int,
                          edit: re.Pattern[str] = MUTATING_COMMAND) -> tuple[int, str] | None:
    """The first assistant reply before step ``before`` that the harness rejected for its format (a
    ``format_rejected`` event right after it; its actions never ran: mini-swe-agent's "EXACTLY ONE action") and
    one of whose fenced blocks is an ``edit`` of a file the delivered patch changes (of any file where ``paths`` is
    empty). The agent committed to the edit there and re-sent it: the harness refused the reply's form, not its
    content. ``(step, block)``, None when there is none."""
    events = view.traj.events
    if not events:
        return None
    after = {e.step for e in events if e.type == "format_rejected" and e.step is not None}
    msgs = view.traj.messages
    for s in view.assistant_steps:
        if s >= before:
            return None
        if s + 1 in after and not msgs[s].get("tool_calls") and "```" in view.texts[s]:
            for block in reply_blocks(view.texts[s][:100_000]):
                if edit.search(block) and (not paths or any(p in block for p in paths)):
                    return s, block
    return None


def confirmed_proposal(view: TraceView, write: int) -> tuple[int, int] | None:
    """Where a write the user confirmed was decided: ``(proposal, confirmation)`` when the user message before the
    write (past the agent's own read-only calls) is an affirmative ("yes, please proceed") answering an assistant
    message with text -- the proposal it confirms, which carries the action and its details (a policy that asks
    for explicit confirmation makes the agent list them there). ``write`` is a run's first write, so only read-only
    calls lie between the two. None otherwise: no user message, one that is not an affirmative, a proposal with no
    text, or a multi-agent log (named speakers), where user turns are no replies.

    The proposal is the *first* reply that put the plan to the user: while the user message before it is itself an
    affirmative answering an earlier reply with text, and the agent called no tool in between (it restated what the
    user had just accepted -- "I'd like to go with Option 1" / "yes, let's do that": ``accepts`` -- and looked nothing
    up), the earlier reply
    is where the plan was decided -- unless the restatement names a value of the write's arguments (a flight, a
    payment method) that neither the earlier reply nor the user had said: then the restatement is where that detail
    was decided ("I'll move you to the cheapest flight" -- "yes" -- "to confirm: HAT100 for $310?")."""
    msgs, roles = view.traj.messages, view.roles
    if not view.user_steps or not view.assistant_steps or msgs[view.assistant_steps[0]].get("name"):
        return None
    yes = next((i for i in range(write - 1, -1, -1) if roles[i] == "user"), None)
    if yes is None or not affirmed(view, yes):
        return None
    proposal = next((i for i in range(yes - 1, -1, -1) if roles[i] == "assistant"), None)
    if proposal is None or not view.texts[proposal].strip():
        return None
    proposal = _refused_proposal(view, proposal)
    while True:  # back through replies the user accepted before the one it confirmed (see above)
        accepted = next((i for i in range(proposal - 1, -1, -1) if roles[i] == "user"), None)
        if accepted is None or any(msgs[i].get("tool_calls") for i in range(accepted + 1, proposal + 1)) \
                or not accepts(view, accepted):
            return proposal, yes
        earlier = next((i for i in range(accepted - 1, -1, -1) if roles[i] == "assistant"), None)
        if earlier is None or not view.texts[earlier].strip() or msgs[earlier].get("tool_calls"):
            return proposal, yes
        said = [view.texts[i] for i in range(earlier + 1) if roles[i] == "user"]
        if any(v in view.texts[proposal] and v not in view.texts[earlier] and not any(v in u for u in said)
               for v in _argument_values(view, write)):
            return proposal, yes  # the restatement introduced a detail of the write
        proposal = earlier


def _refused_proposal(view: TraceView, reply: int) -> int:
    """The proposal a yes after a refusal accepts: where ``reply`` (the agent's reply before the yes) answers a user
    message that declined (``consent.DECLINE``: "No, don't do that.") and asks no leave itself
    (``consent.leave_asked``: "OK.", "Understood, I won't cancel it. Anything else?"), the user who then says yes
    ("Actually, yes, please cancel it.") takes back the refusal and accepts what it refused: the reply before the
    refusal, where that has text and no call lies between. Else ``reply``: one that asks leave again ("The refund
    is $300. Shall I cancel it now?") is the proposal confirmed. Once per reply of a view: the confirmation rule and
    the first write's proposal ask it of the same replies (tau-bench airline: 200 questions a labelling pass, 99 of
    them distinct)."""
    memo = view.__dict__.get("_refused_proposal")
    if memo is None:
        memo = view.__dict__["_refused_proposal"] = {}
    found = memo.get(reply)
    if found is None:
        found = memo[reply] = _find_refused_proposal(view, reply)
    return found


def _find_refused_proposal(view: TraceView, reply: int) -> int:
    msgs, roles = view.traj.messages, view.roles
    refusal = next((i for i in range(reply - 1, -1, -1) if roles[i] == "user"), None)
    if refusal is None:
        return reply
    # the structural tests first (a reply with text before the refusal, no call since): most yeses stop there,
    # before the two regexes
    refused = next((i for i in range(refusal - 1, -1, -1) if roles[i] == "assistant"), None)
    if refused is None or not view.texts[refused].strip() \
            or any(msgs[i].get("tool_calls") for i in range(refused, reply + 1)):
        return reply
    low = view.lowered(refusal)  # every DECLINE match holds "no" or "pass": the regex runs only where one occurs
    if ("no" not in low and "pass" not in low) or DECLINE.search(low[:2000]) is None \
            or leave_asked(view.texts[reply]) is not None:
        return reply
    return refused


def _argument_values(view: TraceView, step: int) -> set[str]:
    """The scalar values (strings of 3+ characters, numbers) in the arguments of the calls made at ``step``."""
    out: set[str] = set()
    todo = [c.args for c in view.calls if c.step == step]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
        elif isinstance(x, str | int | float) and not isinstance(x, bool) and len(str(x)) >= 3:
            out.add(str(x))
    return out
