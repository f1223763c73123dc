"""BFCL v4 multi-turn (``bfcl-eval``, Berkeley Function Calling Leaderboard) as an environment, offline.

- Spec: ``bfcl:<category>``, category one of ``multi_turn_base``, ``multi_turn_miss_func``,
  ``multi_turn_miss_param``, ``multi_turn_long_context`` (200 tasks each). Only bfcl-eval's data files,
  its API simulators (``func_source_code``) and its checker functions are imported; no model handler,
  nothing downloaded.
- Split: fixed per scenario index (``multi_turn_base_17`` and ``multi_turn_miss_func_17`` are the same
  scenario, so they share a split): ``rank_split("bfcl", indices, 0.3)`` -> 140 dev / 60 held-out per
  category.
- Tools: BFCL's function docs of the task's involved classes (``multi_turn_func_doc``), as OpenAI schemas,
  plus ``ask_user(message)``. A call runs the simulator method on the rollout's own instances (loaded with
  the task's ``initial_config``, ``long_context`` for that category) and returns BFCL's result text
  (a dict as JSON). Unknown name -> ``unknown_tool``; a missing required or an unexpected argument ->
  ``invalid_arguments``; the method raised -> ``tool_error``.
- Turns: the prompt is the first user turn. BFCL's later user turns are pre-scripted: the agent ends a
  turn by calling ``ask_user`` with its reply (a summary, or a question when the request lacks something)
  and gets the next turn's request; after the last turn ``ask_user`` says there are no more requests and
  the agent ends with a plain-text reply. A miss_func turn that adds functions says so with BFCL's own
  words and the new function docs. Deviation: the agent loop takes its tool list once per task, so a
  miss_func task's held-out functions are in the schemas from the start (BFCL shows them only from their
  turn on). As in BFCL's executor, a call runs whenever the function exists: BFCL's own ground truth
  calls a held-out function before its turn once (``multi_turn_miss_func_49``, ``tail``). What a
  miss_func turn still tests: no call in the turn whose ground truth is empty.
- Score (BFCL's ``multi_turn_checker`` logic, its own ``state_checker`` / ``response_checker``): at the end
  of each turn the task's ground-truth calls of that turn run on a second set of instances; the turn
  passes when the agent made a call (if the ground truth has any), every simulator's state equals the
  ground truth's, and the ground truth's results of the turn are among the agent's results so far. A
  turn whose ground truth is empty (miss_func / miss_param) passes only when the agent made no call
  (BFCL's irrelevance check). Score 1.0 when every turn passes and the agent delivered, else 0.0.
- Ground truth: the ground-truth calls, turn by turn, with an ``ask_user`` call between turns.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.metadata
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from evoharness.envs.base import TaskSpec, TaskTable, ToolCallSpec, ToolError, rank_split
from evoharness.errors import InfraError, InputError

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
ASK_USER = "ask_user"
NO_MORE = "(The user has no further requests. Reply with your closing message as plain text.)"

PROMPT = """\
You are an assistant that completes the user's requests by calling the tools below. The user's requests \
arrive one turn at a time. In each turn, make the tool calls the current request needs. When the turn's \
work is done (or cannot be done, or a detail you need is missing), call `ask_user` with your reply for \
this turn -- a short summary, or your question -- to receive the user's next request. When `ask_user` \
says there are no further requests, reply with a plain-text closing message, without a tool call.

The user's first request:
{request}"""

ASK_USER_SCHEMA = {"type": "function", "function": {
    "name": ASK_USER,
    "description": "End the current turn: send your reply (a summary of what you did, or a question) to the "
                   "user and receive the user's next request.",
    "parameters": {"type": "object", "required": ["message"], "additionalProperties": False,
                   "properties": {"message": {"type": "string", "description": "your reply to the user"}}},
}}

TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def openai_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as an OpenAI tool schema (BFCL's ``dict`` / ``float`` / ``tuple`` types mapped)."""
    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: fix(v) for k, v in node.items() if k != "response"}
            t = out.get("type")
            if isinstance(t, str) and t in TYPES:
                if TYPES[t] is None:
                    out.pop("type")
                else:
                    out["type"] = TYPES[t]
            return out
        if isinstance(node, list):
            return [fix(x) for x in node]
        return node
    return {"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                             "parameters": fix(doc.get("parameters") or {"type": "dict"})}}


def parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``"mv(source='a', destination='b')"`` -> (name, positional args, keyword args), literals only."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a function call: {text!r}")
    return (node.func.id, [ast.literal_eval(a) for a in node.args],
            {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})


def result_text(value: Any) -> str:
    """A simulator's return value as BFCL's executor records it."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


@dataclass
class BfclState:
    """One rollout: the agent's simulator instances, the ground truth's, and the turn being played."""

    task_id: str
    instances: dict[str, Any]
    truth: dict[str, Any]
    turn: int = 0
    calls_in_turn: int = 0
    results: list[str] = field(default_factory=list)           # the agent's call results, all turns
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # one per finished turn


@cache
def _load(category: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[list[str]]]]:
    """BFCL's entries (with their function docs, held-out ones moved to ``missed_function`` as BFCL's
    ``populate_test_cases_with_predefined_functions`` does) and ground truth, read without BFCL's file lock
    (it writes a lock file into site-packages, read-only in a sandbox)."""
    from bfcl_eval.constants.category_mapping import VERSION_PREFIX
    from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH, POSSIBLE_ANSWER_PATH, PROMPT_PATH
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    from bfcl_eval.utils import load_file

    entries = {}
    for e in load_file(PROMPT_PATH / f"{VERSION_PREFIX}_{category}.json", use_lock=False):
        e["function"] = [d for cls in e["involved_classes"] for d in load_file(
            MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[cls], use_lock=False)]
        for turn, names in (e.get("missed_function") or {}).items():
            held = [d for d in e["function"] if d["name"] in names]
            e["function"] = [d for d in e["function"] if d["name"] not in names]
            e["missed_function"][turn] = held
        entries[e["id"]] = e
    truth = {g["id"]: g["ground_truth"]
             for g in load_file(POSSIBLE_ANSWER_PATH / f"{VERSION_PREFIX}_{category}.json", use_lock=False)}
    return entries, truth


@cache
def _turn_checks() -> tuple[Callable[..., dict[str, Any]], Callable[..., dict[str, Any]], str]:
    """BFCL's state and response checkers and its prompt for the functions a turn adds: imported once, not at
    every turn."""
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING as added
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

    return state_checker, response_checker, added


class BfclEnv(TaskTable):
    def __init__(self, category: str) -> None:
        if category not in CATEGORIES:
            raise InputError("env", f"unsupported BFCL category {category!r} ({', '.join(CATEGORIES)})")
        self.category = category
        self.name = f"bfcl:{category}"

    @cached_property
    def version(self) -> str:
        try:
            return f"bfcl-eval {importlib.metadata.version('bfcl-eval')}"
        except importlib.metadata.PackageNotFoundError:
            return "bfcl-eval"

    @cached_property
    def _data(self) -> tuple[dict[str, dict[str, Any]], dict[str, list[list[str]]]]:
        try:
            return _load(self.category)
        except ImportError as e:
            raise InfraError(f"bfcl-eval is not installed (pip install 'evoharness[bfcl]'): {e}",
                             retryable=False) from e

    @cached_property
    def _tasks(self) -> dict[str, TaskSpec]:
        entries, _ = self._data
        index = {tid: tid.rsplit("_", 1)[1] for tid in entries}
        split = rank_split("bfcl", sorted(set(index.values()), key=int))
        out = {}
        for tid, e in entries.items():
            first = " ".join(m["content"] for m in e["question"][0] if m.get("role") == "user")
            out[tid] = TaskSpec(id=tid, prompt=PROMPT.format(request=first), split=split[index[tid]],
                                meta={"category": self.category, "turns": len(e["question"]),
                                      "involved_classes": e["involved_classes"]})
        return out

    def _entry(self, task: TaskSpec) -> dict[str, Any]:
        return self._data[0][task.id]

    def _docs(self, task: TaskSpec) -> list[dict[str, Any]]:
        e = self._entry(task)
        held = [d for docs in (e.get("missed_function") or {}).values() for d in docs]
        return list(e["function"]) + held

    # ---- the Environment protocol ---------------------------------------------------------------

    def _instances(self, task: TaskSpec) -> dict[str, Any]:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        e = self._entry(task)
        out = {}
        for cls_name in e["involved_classes"]:
            inst = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[cls_name]), cls_name)()
            if cls_name not in STATELESS_CLASSES:
                inst._load_scenario(copy.deepcopy(e["initial_config"].get(cls_name, {})),
                                    long_context="long_context" in self.category)
            out[cls_name] = inst
        return out

    def reset(self, task: TaskSpec) -> BfclState:
        return BfclState(task_id=task.id, instances=self._instances(task), truth=self._instances(task))

    def tools(self, task: TaskSpec) -> list[dict[str, Any]]:
        return [openai_schema(d) for d in self._docs(task)] + [copy.deepcopy(ASK_USER_SCHEMA)]

    def _method(self, instances: dict[str, Any], name: str) -> Any:
        for inst in reversed(list(instances.values())):  # BFCL: a later class's method wins
            m = getattr(inst, name, None)
            if m is not None and not name.startswith("_") and inspect.ismethod(m):
                return m
        return None

    def call_tool(self, state: BfclState, name: str, args: dict[str, Any]) -> str:
        if name == ASK_USER:
            return self._ask_user(state, args)
        task_entry = self._data[0][state.task_id]
        docs = {d["name"]: d for d in task_entry["function"]}
        doc = docs.get(name) or next((d for ds in (task_entry.get("missed_function") or {}).values()
                                      for d in ds if d["name"] == name), None)
        method = self._method(state.instances, name) if doc is not None else None
        if method is None:
            raise ToolError("unknown_tool", f"Function '{name}' not found.")
        params = (doc.get("parameters") or {}).get("properties") or {}
        required = (doc.get("parameters") or {}).get("required") or []
        extra = sorted(set(args) - set(params))
        missing = sorted(set(required) - set(args))
        if extra or missing:
            raise ToolError("invalid_arguments", f"{name}: " + "; ".join(
                ([f"unexpected argument(s) {extra}"] if extra else [])
                + ([f"missing required argument(s) {missing}"] if missing else []))
                + f"; parameters are {sorted(params)}")
        state.calls_in_turn += 1
        try:
            result = result_text(method(**copy.deepcopy(args)))
        except Exception as e:  # noqa: BLE001 -- BFCL records a raising call as its error text
            state.results.append(f"Error during execution: {e}")
            raise ToolError("tool_error", f"{type(e).__name__}: {e}") from None
        state.results.append(result)
        return result

    def _ask_user(self, state: BfclState, args: dict[str, Any]) -> str:
        if set(args) != {"message"} or not isinstance(args["message"], str):
            raise ToolError("invalid_arguments", f"{ASK_USER} takes one string argument 'message', got {sorted(args)}")
        e = self._data[0][state.task_id]
        turns = e["question"]
        if state.turn >= len(turns):
            return NO_MORE
        self._finish_turn(state, e)
        state.turn += 1
        if state.turn >= len(turns):
            return NO_MORE
        added = (e.get("missed_function") or {}).get(str(state.turn))
        if added:
            return _turn_checks()[2].format(functions=json.dumps(added))
        return " ".join(m["content"] for m in turns[state.turn] if m.get("role") == "user")

    def _finish_turn(self, state: BfclState, e: dict[str, Any]) -> None:
        state_checker, response_checker, _ = _turn_checks()
        truth_calls = self._data[1][e["id"]][state.turn]
        truth_results = [self._run_truth(state, c) for c in truth_calls]
        if not truth_calls:
            ok = state.calls_in_turn == 0
            verdict = {"valid": ok} if ok else {"valid": False, "error_type": "multi_turn:irrelevance_error"}
        elif state.calls_in_turn == 0:
            verdict = {"valid": False, "error_type": "multi_turn:empty_turn_model_response"}
        else:
            verdict = state_checker(state.instances, state.truth)
            if verdict["valid"]:
                verdict = response_checker(list(state.results), truth_results, state.turn)
        state.verdicts.append({"turn": state.turn, "valid": bool(verdict["valid"]),
                               "error_type": verdict.get("error_type")})
        state.calls_in_turn = 0

    def _run_truth(self, state: BfclState, call: str) -> str:
        try:
            name, pos, kw = parse_call(call)
            method = self._method(state.truth, name)
            return result_text(method(*pos, **kw))
        except Exception as e:  # noqa: BLE001 -- as BFCL's executor
            return f"Error during execution: {e}"

    def score(self, task: TaskSpec, state: BfclState, final_answer: str | None,
              messages: list[dict[str, Any]]) -> float:
        return 1.0 if self.turn_verdicts(task, state, final_answer)["passed"] else 0.0

    def turn_verdicts(self, task: TaskSpec, state: BfclState, final_answer: str | None) -> dict[str, Any]:
        """Every turn's verdict (turns the agent never reached fail) and whether the task passed."""
        e = self._entry(task)
        probe = copy.copy(state)
        probe.verdicts = list(state.verdicts)
        probe.truth = copy.deepcopy(state.truth)  # scoring twice must not replay the ground truth twice
        n = len(e["question"])
        if probe.turn < n:  # the turn in progress ends with the rollout
            self._finish_turn(probe, e)
        verdicts = probe.verdicts + [{"turn": t, "valid": False, "error_type": "turn never reached"}
                                     for t in range(len(probe.verdicts), n)]
        passed = final_answer is not None and all(v["valid"] for v in verdicts)
        return {"passed": passed, "turns": verdicts}

    def ground_truth_calls(self, task: TaskSpec) -> list[ToolCallSpec]:
        instances = self._instances(task)
        out: list[ToolCallSpec] = []
        for calls in self._data[1][task.id]:
            for c in calls:
                name, pos, kw = parse_call(c)
                method = self._method(instances, name)
                names = list(inspect.signature(method).parameters)
                out.append(ToolCallSpec(name=name, args={**dict(zip(names, pos, strict=False)), **kw}))
            out.append(ToolCallSpec(name=ASK_USER, args={"message": "Done."}))
        return out


def from_spec(spec: str) -> BfclEnv:
    """``bfcl:<category>`` -> its environment."""
    category = spec.partition(":")[2]
    if not category:
        raise InputError("env", f"{spec!r}: name a category, e.g. bfcl:multi_turn_base")
    return BfclEnv(category)
