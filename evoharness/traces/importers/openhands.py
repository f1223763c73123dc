"""OpenHands' evaluation output: ``output.jsonl`` of ``evaluation/benchmarks/swe_bench/run_infer.py``.

One JSON object a line (``evaluation/utils/shared.py`` ``EvalOutput``): ``instance_id``, ``instruction``,
``history`` (the agent's events as ``openhands/events/serialization/event.py`` ``event_to_dict`` writes them: ``id``,
``timestamp``, ``source`` agent / user / environment, ``message``, ``cause``, ``tool_call_metadata``; an action has
``action`` and ``args``, an observation ``observation``, ``content`` and ``extras``; before 2025 a list of
``[action, observation]`` pairs), ``test_result.git_patch`` (the diff the harness took from the workspace: what
SWE-bench grades), ``metadata`` (``llm_config.model``, ``max_iterations``), ``metrics`` and ``error``
(``state.last_error``). A ``history`` of OpenHands' V1 agent SDK events (``kind: ActionEvent``, ...; what
OpenHands/benchmarks writes) is read by :mod:`openhands_v1` into the same conversation; the rest of the record as here.

Conversation, as OpenHands' CodeActAgent saw it: a ``system`` action is the system message, a ``message`` action the
user's or the assistant's turn; each other agent action (``run``, ``run_ipython``, ``edit``, ``read``, ``write``,
``think``, ``finish``, ``browse``, ...) is an assistant tool call named by ``tool_call_metadata.function_name``
(``execute_bash``, ``str_replace_editor``, ...; else after its kind) with the arguments the model wrote (from
``tool_call_metadata.model_response``) or rebuilt from ``args``; calls of one model response share one assistant
message, its ``thought`` the text (a string, or OpenHands' ``Thought`` serialised as ``{text, reasoning_content}``).
The model's ``reasoning_content`` (``args.reasoning_content``, the ``Thought``'s, else the one of
``tool_call_metadata.model_response``'s message, as LiteLLM passes it on) is kept in ``meta.reasoning`` (``{step,
text}`` per assistant turn), never in the turn's text.
An observation answering a call (``tool_call_metadata.tool_call_id``, else its ``cause``) is that call's ``tool``
result, a command's with the exit-code line the agent read (``[Command finished with exit code N]``); an ``error``
observation (``classify_tool_error``), or an editor's ``ERROR:`` answer (``No
replacement was performed``: a ``tool_error`` whatever the quoted text says), is also an event there. Bookkeeping
events (``recall``, ``agent_state_changed``, ``null``, ``condensation``, ``change_agent_state``) are left out
(``meta.skipped_events``); step i is ``history[meta.source_index[i]]``.

Delivery: a ``finish`` action (or a run that ended without an error and left a non-empty patch) delivers
``test_result.git_patch`` as the final answer, so the coding rules read the diff SWE-bench graded. ``error``: the
iteration or budget limit is ``step_budget`` (a ``budget_exhausted`` event), ``Timeout after`` a timeout, a context
window error ``context_overflow``, a loop OpenHands stopped ``aborted``, a provider or sandbox-runtime fault
(``infra_fault``) ``error`` with an ``infra_error`` event (class E), another error ``error`` (the table in
docs/traces.md).

Outcome (``Verdicts``): the record's own ``report.resolved`` (``update_output_with_eval.py`` adds it),
``test_result.report.resolved`` or ``resolved`` (true / false, 1 / 0); else, beside the file, SWE-bench's
``report.json`` (``resolved_ids`` / ``unresolved_ids``, as ``eval_infer.sh`` moves it there; OpenHands/benchmarks'
``eval_infer.py`` moves it to ``<stem>.report.json``), ``eval_outputs/<id>/report.json`` and
``<stem>.swebench_eval.jsonl`` (``eval_infer.py``). Sources that disagree are
an error; without any the run is unscored (never called healthy). An iterative evaluation's attempt file,
``<stem>.critic_attempt_<n>.jsonl``, takes only its records' own verdicts (the results beside it graded the attempt
``<stem>.jsonl`` chose) and ids ``openhands:<instance_id>:critic_attempt_<n>``.
A failed-attempts file, ``<stem>_errors.jsonl``: a record of an instance with another attempt (in ``<stem>.jsonl``
or later in the file) has id ``openhands:<instance_id>:errored_attempt_<n>`` and only its own verdict; an
instance's only attempt is the run.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evoharness.errors import InputError
from evoharness.traces import jsontext
from evoharness.traces.endings import infra_event, provider_exception
from evoharness.traces.importers import mini_swe, neighbours, openhands_v1
from evoharness.traces.importers._shape import arguments, arr, count, obj
from evoharness.traces.models import Event, Termination, Trajectory, Usage
from evoharness.traces.patterns import classify_tool_error
from evoharness.traces.store import jsonl_lines

# each action kind's tool when the event names none (no ``tool_call_metadata``: agents before function calling)
TOOL_OF = {"run": "execute_bash", "run_ipython": "execute_ipython_cell", "edit": "str_replace_editor",
           "read": "str_replace_editor", "write": "str_replace_editor", "think": "think", "finish": "finish",
           "reject": "finish", "browse": "browser", "browse_interactive": "browser", "delegate": "delegate",
           "call_tool_mcp": "mcp"}
SKIPPED = frozenset({"recall", "agent_state_changed", "null", "condensation", "condensation_request",
                     "change_agent_state", "condense", "user_rejected"})
_BUDGET = re.compile(r"maximum (?:iteration|budget)|max(?:imum)?_iterations|budget", re.IGNORECASE)
_CONTEXT = re.compile(r"ContextWindowExceeded|context (?:window|length)", re.IGNORECASE)
_LOOP = re.compile(r"stuck in a loop", re.IGNORECASE)
# ``state.last_error`` as ``AgentController._react_to_exception`` writes it: "<ExceptionName>: <message>", or a status
# id in its place; ``STATUS_FAULTS`` are those that name the model provider's failure (an authentication error; a
# ServiceUnavailable / APIConnection / API error; a 5xx; a ``BadRequestError`` saying ``ExceededBudget``: no credits)
_EXCEPTION_NAME = re.compile(r"\s*([A-Za-z_][\w.]*)\s*:")
STATUS_FAULTS = ("STATUS$ERROR_LLM_AUTHENTICATION", "STATUS$ERROR_LLM_SERVICE_UNAVAILABLE",
                 "STATUS$ERROR_LLM_INTERNAL_SERVER_ERROR", "STATUS$ERROR_LLM_OUT_OF_CREDITS")
# openhands/core/exceptions.py: the sandbox runtime failed to build, start, answer or stay connected
RUNTIME_FAULTS = frozenset(n.lower() for n in (
    "AgentRuntimeError", "AgentRuntimeBuildError", "AgentRuntimeTimeoutError", "AgentRuntimeUnavailableError",
    "AgentRuntimeNotReadyError", "AgentRuntimeDisconnectedError", "AgentRuntimeNotFoundError"))


def infra_fault(error: str) -> bool:
    """Whether a record's ``error`` names a provider or sandbox-runtime fault: one of ``STATUS_FAULTS``, or an exception
    name before the first colon that is a provider's (``endings.PROVIDER_EXCEPTIONS``: ``RateLimitError``,
    ``litellm.APIConnectionError``, ...) or the runtime's (``RUNTIME_FAULTS``)."""
    head = error.lstrip()
    if head.startswith(STATUS_FAULTS):
        return True
    m = _EXCEPTION_NAME.match(head)
    return m is not None and (provider_exception(m.group(1))
                              or m.group(1).rsplit(".", 1)[-1].lower() in RUNTIME_FAULTS)
# one attempt's runs of an iterative evaluation (run_infer.py's ITERATIVE_EVAL_MODE, OpenHands/benchmarks' critic):
# <stem>.critic_attempt_<n>.jsonl; <stem>.jsonl holds the attempt chosen for each instance, the one SWE-bench graded
CRITIC_ATTEMPT = re.compile(r".+\.critic_attempt_(\d+)\.jsonl")
# OpenHands/benchmarks' failed attempts: <stem>_errors.jsonl (output_errors.jsonl) beside <stem>.jsonl, one line per
# failed attempt; a run the iteration cap ended is only there, an instance retried and finished is in both
ERRORS_FILE = re.compile(r"(.+)_errors\.jsonl")


def matches(rec: dict) -> bool:
    """An ``EvalOutput``: ``instance_id``, a ``test_result`` object and a ``history`` list -- or no history and an
    ``error`` (the run that failed before its events were kept: ``Timeout after 7200 seconds``, ``Maximum retries
    (5) reached: ...``; an evaluation's own ``*.swebench_eval.jsonl`` line has neither)."""
    history = rec.get("history")
    return "instance_id" in rec and isinstance(rec.get("test_result"), dict) and (
        isinstance(history, list) or (history is None and isinstance(rec.get("error"), str) and bool(rec["error"])))


def load(path: Path, data: Any, *, skip_invalid: bool = False, on_invalid=None) -> Iterator[Trajectory]:
    from evoharness.traces.importers import convert_records

    verdicts = Verdicts(path)
    yield from convert_records(path, _records(path, data), lambda _, rec: convert(rec, path, verdicts),
                               "OpenHands record", skip_invalid=skip_invalid, on_invalid=on_invalid)


def _records(path: Path, data: Any) -> Iterator[tuple[str, Any]]:
    """(where, record) of each record: a JSON line (None where it does not parse), or a JSON list's elements."""
    if data is not None:
        for i, rec in enumerate(data if not isinstance(data, dict) else [data]):
            yield f"record {i}", rec
        return
    for lineno, raw in jsonl_lines(path):
        try:
            yield f"line {lineno}", jsontext.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            yield f"line {lineno}", None


def convert(rec: Any, path: Path, verdicts: Verdicts) -> Trajectory:
    if not isinstance(rec, dict) or not matches(rec):
        raise ValueError("an OpenHands record needs 'instance_id', a 'test_result' object and a 'history' list "
                         "(or an 'error')")
    instance_id = rec["instance_id"]
    if not isinstance(instance_id, str | int) or isinstance(instance_id, bool) or not str(instance_id).strip():
        raise ValueError(f"instance_id must be a non-empty string, got {instance_id!r}"[:200])
    instance_id = str(instance_id)
    instruction = rec.get("instruction") if isinstance(rec.get("instruction"), str) else None
    history = rec.get("history")  # None: absent, the run that failed before its events were kept (an error)
    v1 = openhands_v1.is_v1(history)
    conv: _Conversation | openhands_v1.Conversation = openhands_v1.Conversation() if v1 else _Conversation()
    error = rec.get("error") if isinstance(rec.get("error"), str) and rec["error"].strip() else None
    # the run failed before its events were kept (the classic output: no history; OpenHands/benchmarks: an empty one,
    # e.g. "MaxIterationsReached: Agent reached maximum iterations limit (500)"): the task it was given, its error
    missing = history is None or (not history and error is not None)
    if missing and instruction:
        conv.task = instruction
        conv.messages.append({"role": "user", "content": instruction})
    for i, e in openhands_v1.events(history) if v1 else _events(history or ()):
        conv.add(i, e)
    limit = conv.iteration_limit
    patch = graded(obj(rec["test_result"]).get("git_patch"))
    last = max(len(conv.messages) - 1, 0)
    events = conv.events
    if error and infra_fault(error):
        termination = Termination.error
        events.append(infra_event(last, error))
    elif (error and _BUDGET.search(error)) or (not error and limit):
        termination = Termination.step_budget
        events.append(Event(type="budget_exhausted", step=last, detail=(error or limit or "")[:500]))
    elif error and error.startswith("Timeout after"):
        termination = Termination.timeout
        events.append(Event(type="timeout", step=last, detail=error[:500]))
    elif error and _CONTEXT.search(error):
        termination = Termination.context_overflow
    elif error:
        termination = Termination.aborted if _LOOP.search(error) else Termination.error
    elif conv.finished or patch.strip():
        termination = Termination.delivered
    else:
        termination = Termination.aborted
    errored = verdicts.errored_attempt(instance_id)  # once per record, in the file's order
    score, report, broken = verdicts.score(rec, instance_id, beside=errored is None)
    metadata = obj(rec.get("metadata"))
    # the classic EvalMetadata's llm_config; the V1 benchmarks' EvalMetadata.llm (the SDK's LLM)
    model = obj(metadata.get("llm_config")).get("model") or obj(metadata.get("llm")).get("model")
    tokens = obj(obj(rec.get("metrics")).get("accumulated_token_usage"))
    meta: dict[str, Any] = {"source_format": "openhands", "agent_class": metadata.get("agent_class"),
                            **({"events": "v1-sdk"} if v1 else {}),
                            "error": error, "cost": obj(rec.get("metrics")).get("accumulated_cost"),
                            **mini_swe.result_meta(report, None, broken)}
    if verdicts.attempt:
        meta["critic_attempt"] = verdicts.attempt
    if errored:
        meta["errored_attempt"] = errored
    if missing:
        meta["history_missing"] = True
    elif conv.source_index != list(range(len(conv.messages))):
        meta["source_index"] = conv.source_index
    if conv.skipped:
        meta["skipped_events"] = conv.skipped
    if conv.reasoning:
        meta["reasoning"] = conv.reasoning
    return Trajectory.with_messages(
        conv.messages, checked=True,
        id=f"openhands:{instance_id}" + (f":critic_attempt_{verdicts.attempt}" if verdicts.attempt else "")
        + (f":errored_attempt_{errored}" if errored else ""),
        task_id=instance_id,
        model=model if isinstance(model, str) and model else None,
        task=conv.task or instruction,
        events=events,
        final_answer=patch if termination == Termination.delivered else None,
        score=score,
        termination=termination,
        usage=Usage(steps=conv.steps, prompt_tokens=count(tokens.get("prompt_tokens")),
                    completion_tokens=count(tokens.get("completion_tokens"))),
        meta=meta,
    )


def graded(patch: Any) -> str:
    """The patch as SWE-bench graded it (``eval_infer.py`` ``process_git_patch``): CRLF line ends made LF, anything
    before the first ``diff --git`` line dropped (the inference's command output can lead it: ``git diff ...``,
    ``0``), one newline at the end; a patch of blanks is empty."""
    if not isinstance(patch, str) or not patch.strip():
        return ""
    patch = patch.replace("\r\n", "\n")
    start = 0 if patch.startswith("diff --git") else patch.find("\ndiff --git") + 1
    return patch[start:].rstrip() + "\n"


def _events(history: list | tuple) -> Iterator[tuple[int, dict]]:
    """(history index, event) of each event; a pair (the format before 2025) gives its action, then its observation."""
    for i, e in enumerate(history):
        if isinstance(e, list) and len(e) == 2 and all(isinstance(x, dict) for x in e):
            yield i, e[0]
            yield i, e[1]
        elif isinstance(e, dict) and isinstance(e.get("kind"), str) and not isinstance(
                e.get("action", e.get("observation")), str):
            raise ValueError(f"history[{i}] is an OpenHands V1 SDK event (kind {e['kind'][:60]!r}), though "
                             "history[0] is none: a history mixes the classic events and the V1 SDK's")
        elif isinstance(e, dict) and ("action" in e or "observation" in e):
            yield i, e
        else:
            raise ValueError(f"history[{i}] is neither an event (an object with 'action' or 'observation') "
                             f"nor an [action, observation] pair")


class _Conversation(openhands_v1.ConversationState):
    """The chat messages the classic events make, built one event at a time."""

    def __init__(self) -> None:
        super().__init__()
        self.by_event: dict[Any, str] = {}  # action event id -> its call id (an observation's ``cause``)

    def add(self, i: int, e: dict) -> None:
        kind = e.get("action", e.get("observation"))
        if not isinstance(kind, str):
            raise ValueError(f"history[{i}]: 'action' / 'observation' must be a string")
        if kind in SKIPPED:
            self.skipped += 1
        elif "action" in e:
            self._action(i, e, kind)
        else:
            self._observation(i, e, kind)

    def _action(self, i: int, e: dict, kind: str) -> None:
        args = obj(e.get("args"))
        source = e.get("source")
        if kind == "system":
            self._append(i, {"role": "system", "content": _text(args.get("content"))})
            return
        if kind == "message":
            content = _text(args.get("content"))
            if source == "agent":
                self.steps += 1
                self._append(i, {"role": "assistant", "content": content})
                self._reason(len(self.messages) - 1, _reasoning(args, obj(e.get("tool_call_metadata"))))
            else:
                if source == "user" and self.task is None:
                    self.task = content
                self._append(i, {"role": "user", "content": content})
            return
        meta = obj(e.get("tool_call_metadata"))
        call_id = meta.get("tool_call_id") if isinstance(meta.get("tool_call_id"), str) else f"call_{i}"
        name = meta.get("function_name") if isinstance(meta.get("function_name"), str) else TOOL_OF.get(kind, kind)
        response = obj(meta.get("model_response")).get("id")
        call = {"id": call_id, "type": "function",
                "function": {"name": name, "arguments": _model_arguments(meta, call_id) or _arguments(kind, args)}}
        self.finished = self.finished or kind == "finish"
        if _hashable(e.get("id")):
            self.by_event[e["id"]] = call_id
        self._call(i, call, response, _thought(args), _reasoning(args, meta))

    def _observation(self, i: int, e: dict, kind: str) -> None:
        content = _observation_text(e, kind)
        meta = obj(e.get("tool_call_metadata"))
        call_id = meta.get("tool_call_id") if isinstance(meta.get("tool_call_id"), str) else None
        if call_id not in self.pending:
            call_id = self.by_event.get(e.get("cause")) if _hashable(e.get("cause")) else None
        if call_id not in self.pending:
            call_id = next(iter(self.pending)) if len(self.pending) == 1 else None
        step = len(self.messages)
        if call_id is None:  # no call to answer: the environment tells the agent (an error, a stuck-loop notice)
            if kind == "error":
                self.events.append(Event(type=classify_tool_error(content), step=step, detail=content[:500]))
            self._append(i, {"role": "user", "content": content})
            return
        name = self.pending.pop(call_id)
        if kind in ("edit", "read", "write") and content.lstrip().startswith("ERROR:"):
            # the editor refused what the agent sent (its text quoted back: an old_str naming a timeout is no fault
            # of the infrastructure)
            self.events.append(Event(type="tool_error", step=step, detail=content[:500]))
        elif kind == "error":
            self.events.append(Event(type=classify_tool_error(content), step=step, detail=content[:500]))
        response = self.response
        self._append(i, {"role": "tool", "tool_call_id": call_id, "name": name, "content": content})
        self.response = response  # a result between two calls of one response keeps them one turn


def _hashable(value: Any) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _thought(args: dict) -> str:
    """An action's ``thought``: a string, or OpenHands' ``Thought`` serialised as ``{text, reasoning_content}`` (the
    web client's ``{default, reasoning_content}``)."""
    thought = args.get("thought")
    if isinstance(thought, dict):
        thought = thought.get("text", thought.get("default"))
    return _text(thought)


def _reasoning(args: dict, meta: dict) -> Any:
    """The model's ``reasoning_content`` of an action: ``args.reasoning_content``, its ``Thought``'s, else the one of
    the model response its metadata keeps (LiteLLM's message)."""
    thought = obj(args.get("thought"))
    for value in (args.get("reasoning_content"), thought.get("reasoning_content")):
        if isinstance(value, str) and value.strip():
            return value
    for choice in arr(obj(meta.get("model_response")).get("choices"))[:1]:
        return obj(obj(choice).get("message")).get("reasoning_content")
    return None


def _model_arguments(meta: dict, call_id: str) -> str | None:
    """The arguments of call ``call_id`` as the model wrote them, from the model response its metadata keeps."""
    for choice in arr(obj(meta.get("model_response")).get("choices")):
        for tc in arr(obj(obj(choice).get("message")).get("tool_calls")):
            fn = obj(obj(tc).get("function"))
            if obj(tc).get("id") == call_id and isinstance(fn.get("arguments"), str):
                return fn["arguments"]
    return None


def _arguments(kind: str, args: dict) -> str:
    """A call's arguments rebuilt from the action's ``args`` (the tool's own parameter names)."""
    keep: dict[str, Any]
    if kind == "run":
        keep = {"command": args.get("command"), **({"is_input": "true"} if args.get("is_input") is True else {})}
    elif kind == "run_ipython":
        keep = {"code": args.get("code")}
    elif kind == "edit" and args.get("impl_source", "oh_aci") == "oh_aci" and args.get("command"):
        keep = {k: args[k] for k in ("command", "path", "file_text", "old_str", "new_str", "insert_line")
                if args.get(k) is not None}
    elif kind == "read" and args.get("impl_source") == "oh_aci":
        keep = {"command": "view", "path": args.get("path"),
                **({"view_range": args["view_range"]} if args.get("view_range") else {})}
    elif kind == "write":
        keep = {"command": "create", "path": args.get("path"), "file_text": args.get("content")}
    elif kind in ("finish", "reject"):
        said = args.get("final_thought") or obj(args.get("outputs")).get("content") or _thought(args)
        keep = {"message": said if isinstance(said, str) else "",
                **({"task_completed": args["task_completed"]} if args.get("task_completed") is not None else {})}
    elif kind == "think":
        keep = {"thought": _thought(args) if isinstance(args.get("thought"), dict) else args.get("thought")}
    else:
        keep = {k: v for k, v in args.items() if k not in ("thought", "reasoning_content", "security_risk",
                                                          "confirmation_state", "impl_source",
                                                          "translated_ipython_code")}
    return arguments(keep)


def _observation_text(e: dict, kind: str) -> str:
    """What the agent read: a command's output with its prefix, suffix and exit-code line (``to_agent_observation``);
    another observation's ``content``."""
    content = _text(e.get("content"))
    if kind != "run":
        return content
    extras = obj(e.get("extras"))
    md = obj(extras.get("metadata"))
    text = f"{_text(md.get('prefix'))}{content}{_text(md.get('suffix'))}"
    code = md.get("exit_code", extras.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and code != -1 and "exit code" not in text[-80:]:
        text += f"\n[Command finished with exit code {code}]"
    return text


_UNREAD = object()


class Verdicts:
    """SWE-bench verdicts of the runs in one ``output.jsonl``: the record's own, else the results beside the file
    (module docstring). Each results file is read once per import of the file."""

    def __init__(self, path: Path) -> None:
        self.dir = path.parent
        attempt = CRITIC_ATTEMPT.fullmatch(path.name)
        # an attempt's runs are not the ones the results beside them graded: only a record's own verdict scores them
        self.attempt = int(attempt.group(1)) if attempt else None
        self.looked_up = neighbours.looked_up() and attempt is None
        self.eval_file = self.dir / f"{path.stem}.swebench_eval.jsonl"
        # SWE-bench's final report: eval_infer.sh moves it to report.json, OpenHands/benchmarks' eval_infer.py to
        # <stem>.report.json (output.report.json)
        self._aggregates: dict[Path, Any] = {self.dir / "report.json": _UNREAD,
                                             self.dir / f"{path.stem}.report.json": _UNREAD}
        self._eval: dict[str, bool] | mini_swe._Broken | None = None
        # an errors file's instances: how many attempts of each it holds, and which the output file beside it has too
        errors = ERRORS_FILE.fullmatch(path.name)
        self._errors_of = self.dir / f"{errors.group(1)}.jsonl" if errors else None
        if errors:  # the evaluation of <stem>.jsonl and its errors: its report grades both files' patches
            self._aggregates[self.dir / f"{errors.group(1)}.report.json"] = _UNREAD
        self._retried: tuple[Counter, set[str]] | None = None
        self._path, self._seen = path, Counter()

    def errored_attempt(self, instance_id: str) -> int | None:
        """In an errors file, the record's attempt number (1, 2, ... in the file's order) when the instance has
        another attempt after it: a later line here, or a run in the output file beside it. Such a record is one
        failed attempt, not the run SWE-bench graded. None otherwise (the instance's last attempt, only here: the
        run). Called once per record, in the file's order."""
        if self._errors_of is None:
            return None
        if self._retried is None:
            self._retried = (_instance_ids(self._path),
                             set(_instance_ids(self._errors_of)) if self._errors_of.is_file() else set())
        counts, finished = self._retried
        self._seen[instance_id] += 1
        n = self._seen[instance_id]
        return n if instance_id in finished or n < counts[instance_id] else None

    def score(self, rec: dict, instance_id: str,
              beside: bool = True) -> tuple[float | None, Path | None, list[dict[str, str]]]:
        """(1.0 / 0.0 / None, the first results file that gave it, results files that could not be read); only the
        record's own verdict with ``beside`` false (the results beside the file graded another attempt)."""
        found: list[tuple[str, bool]] = []
        own = _own_verdict(rec)
        if own is not None:
            found.append(("the record", own))
        broken: list[dict[str, str]] = []
        if self.looked_up and beside:
            for where, v in self._beside(instance_id):
                if isinstance(v, mini_swe._Broken):
                    broken.append({"kind": "results", "file": where, "reason": f"SWE-bench results {v}: no verdict "
                                                                               f"from it"})
                elif v is not None:
                    found.append((where, v))
        if not found:
            return None, None, broken
        (first, verdict), *rest = found
        for other, v in rest:
            if v != verdict:
                raise ValueError(f"SWE-bench results disagree on {instance_id}: {first} says "
                                 f"{'resolved' if verdict else 'unresolved'}, {other} says "
                                 f"{'resolved' if v else 'unresolved'}")
        report = next((Path(w) for w, _ in found if w != "the record"), None)
        return (1.0 if verdict else 0.0), report, broken

    def _beside(self, instance_id: str) -> Iterator[tuple[str, bool | mini_swe._Broken | None]]:
        if mini_swe.path_safe(instance_id):  # an id is no path: "../x" or "/etc" would read outside the folder
            per_instance = self.dir / "eval_outputs" / instance_id / "report.json"
            yield str(per_instance), mini_swe._instance_report(per_instance, instance_id)
        for report, agg in self._aggregates.items():
            if agg is _UNREAD:
                agg = self._aggregates[report] = mini_swe._read_aggregate(report, False) if report.is_file() else None
            if isinstance(agg, mini_swe._Broken):
                yield str(report), agg
            elif agg:
                yield str(report), (True if instance_id in agg[0] else False if instance_id in agg[1] else None)
        if self._eval is None:
            self._eval = _eval_verdicts(self.eval_file) if self.eval_file.is_file() else {}
        ev = self._eval
        yield str(self.eval_file), ev if isinstance(ev, mini_swe._Broken) else ev.get(instance_id)


def _instance_ids(f: Path) -> Counter:
    """How many records of each ``instance_id`` a JSONL file holds (lines that do not parse are left out)."""
    ids: Counter = Counter()
    try:
        for _, raw in jsonl_lines(f):
            try:
                rec = jsontext.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                continue
            if isinstance(rec, dict) and isinstance(rec.get("instance_id"), str | int):
                ids[str(rec["instance_id"])] += 1
    except (InputError, OSError):
        pass  # the file itself reports it when read as a run file
    return ids


def _own_verdict(rec: dict) -> bool | None:
    """The record's own verdict: ``report.resolved``, ``test_result.report.resolved``, ``resolved``."""
    for value in (obj(rec.get("report")).get("resolved"), obj(obj(rec["test_result"]).get("report")).get("resolved"),
                  rec.get("resolved")):
        if value is None:
            continue
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        raise ValueError(f"resolved must be true or false (or 1 / 0), got {value!r}"[:200])
    return None


def _eval_verdicts(f: Path) -> dict[str, bool] | mini_swe._Broken:
    """``instance_id`` -> ``test_result.report.resolved`` of an ``eval_infer.py`` output (one record a line)."""
    out: dict[str, bool] = {}
    try:
        for lineno, raw in jsonl_lines(f):
            try:
                rec = jsontext.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                return mini_swe._Broken(f"not valid JSON at line {lineno} (cut short?)")
            resolved = obj(obj(obj(rec).get("test_result")).get("report")).get("resolved")
            if isinstance(obj(rec).get("instance_id"), str) and isinstance(resolved, bool):
                out[rec["instance_id"]] = resolved
    except (InputError, OSError) as e:
        return mini_swe._Broken(f"unreadable ({getattr(e, 'reason', e)})")
    return out


def is_sidecar(f: Path) -> bool:
    """Whether ``f`` belongs to an OpenHands evaluation folder but is no run: SWE-bench's per-instance
    ``eval_outputs/<id>/report.json`` and final ``report.json`` beside ``output.jsonl``, the predictions
    ``*.swebench.jsonl``, evaluation ``*.swebench_eval.jsonl`` and final report ``*.report.json`` written from an
    output file beside it, OpenHands/benchmarks' ``cost_report.jsonl`` (one indented JSON object, costs and
    durations: ``report_costs.py``), its
    ``metadata.json``, and the model calls logged under ``llm_completions/`` (each a chat of one call, not a run)."""
    d = f.parent
    if f.name == "report.json" and d.parent.name == "eval_outputs":
        return True
    for suffix in (".swebench.jsonl", ".swebench_eval.jsonl", ".report.json"):
        if f.name.endswith(suffix) and (d / (f.name.removesuffix(suffix) + ".jsonl")).is_file():
            return True
    if f.name in ("metadata.json", "report.json", "cost_report.jsonl") and (d / "output.jsonl").is_file():
        return True  # SWE-bench's report there even when empty or cut short (not an aggregate by its first bytes)
    logs = next((p for p in f.parents[:3] if p.name == "llm_completions"), None)
    return logs is not None and (logs.parent / "output.jsonl").is_file()
