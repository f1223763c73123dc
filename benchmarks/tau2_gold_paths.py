"""tau2's gold paths as runs, labelled: a check of issue 13 on tasks, tools and results this project did not write
(tau2, MIT, Sierra: its retail, airline and telecom domains, installed as a dependency); a tuning set since its first
run, not a held-back one (labelling fixes were written after it showed their misses: README, "tau2's gold paths").

For every task of each domain, the task's gold actions (``evaluation_criteria.actions``) are executed on a fresh copy
of the domain's environment (the task's initial state applied; each result is tau2's ``Environment.get_response``,
an error as ``Error: <message>``, as tau-bench writes it) and wrapped in the conversation a policy-following agent
would hold: the domain's policy as the system message, a greeting, the task's user instruction as the user's first
message, the user's identity looked up first (``IDENTITY``), the look-ups that show every id a write names (a read
of the domain whose result holds it, found by trying the reads on the ids shown so far), the read that shows the
status of what a write acts on where the policy says to check it first (``GoldPath._status_checks``), details the user
must give asked for and given, each write's details listed and an explicit "yes" from the user before it, a user-side
action (telecom: the customer's phone) asked of the user and its result told back, and a final answer that restates
the last write's result. Written in tau-bench's record format (kept in ``--out DIR``) with reward 1, then labelled.

**The conversations are scripted here**: the user's and the agent's words are this script's; only the tasks, tools,
tool results and policies are tau2's. Then controlled failures derived from each gold path, each with the message it
is written to fail at (its ``info.label``):

- ``no_confirmation``: the first write sent with no details listed and no yes (fails at the write);
- ``before_identity``: the first write made before any look-up of the user (the identity look-ups moved after it);
  only tasks whose first write names no value the moved look-ups showed (fails at the write);
- ``wrong_argument``: an id of the first write replaced by one the conversation never showed, in the details the
  agent lists and in the call (fails at the details: the first message carrying it);
- ``recovered_error``: the first write sent first with a wrong id (a real ``Error:``), then as the gold path sends it;
  reward 1 (must stay Healthy with no F2 / F3 signal: "located" means that);
- ``misstated_result``: the final answer restates the last write's result with one value changed (fails there).

For each kind: how often the first signal lands on the written step, beside the last-message baseline (the last
assistant message).

    python benchmarks/tau2_gold_paths.py [--domains retail airline telecom] [--limit N] [--out DIR] [--json]
        [--outcome-claims]
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import chain, islice, product
from pathlib import Path
from typing import Any

DOMAINS = ("retail", "airline", "telecom")
KINDS = ("no_confirmation", "before_identity", "wrong_argument", "recovered_error", "misstated_status",
         "misstated_amount", "misstated_message")
GREETING = "Hi! How can I help you today?"
# the look-up each domain's policy asks for first (who the user is): the tool, and how its arguments are read from
# the task's user instruction (the user says them in its first message)
PHONE = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")
ZIP = re.compile(r"\b\d{5}\b")
NAME = re.compile(r"\b(?:You are|Your? name is) ([A-Z][a-z]+) ([A-Z][a-z]+)")


def _quiet_tau2() -> None:
    os.environ.setdefault("PYTHON_DOTENV_DISABLED", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loguru import logger

    logger.disable("tau2")


def domain_module(domain: str):
    _quiet_tau2()
    return importlib.import_module(f"tau2.domains.{domain}.environment")


def identity_call(domain: str, instruction: str) -> tuple[str, dict] | None:
    """The user look-up a policy-following agent makes first, from what the user says (None: nothing to look up by)."""
    if domain == "retail":
        if (m := EMAIL.search(instruction)):
            return "find_user_id_by_email", {"email": m.group(0).rstrip(".")}
        name, zipcode = NAME.search(instruction), ZIP.search(instruction)
        if name and zipcode:
            return "find_user_id_by_name_zip", {"first_name": name.group(1), "last_name": name.group(2),
                                                "zip": zipcode.group(0)}
        return None
    if domain == "airline":
        m = USER_ID.search(instruction)
        return ("get_user_details", {"user_id": m.group(0)}) if m else None
    m = PHONE.search(instruction)
    return ("get_customer_by_phone", {"phone_number": m.group(0)}) if m else None


def user_instruction(task) -> str:
    i = task.user_scenario.instructions
    if isinstance(i, str):
        return i
    parts = [i.known_info, i.reason_for_call, i.unknown_info, i.task_instructions]
    return "\n".join(p.strip() for p in parts if p and p.strip())


def user_opening(task) -> str:
    """What the user says first: who they are and why they call (the instruction's known info and reason)."""
    i = task.user_scenario.instructions
    if isinstance(i, str):
        return i
    return " ".join(p.strip() for p in (i.known_info, i.reason_for_call) if p and p.strip())


def _leaves(value: Any, key: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _leaves(v, k)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v, key)]
    return [(key, value)]


def _spaced(name: str) -> str:
    return name.replace("_", " ")


def _details(args: dict) -> str:
    """Arguments as a reply lists them ("address 1: 12 Oak Street": a key's digits are no id)."""
    return "; ".join(f"{re.sub(r'(?<=[a-z])(?=[0-9])', ' ', _spaced(k))}: "
                     f"{json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items())


@dataclass
class Step:
    """One element of a run's plan: ``read`` / ``write`` (an agent call), ``user_act`` (the user's device), ``ask``
    (the agent asks for details, the user gives them), ``confirm`` (details listed, the user says yes), ``final``."""
    kind: str
    name: str = ""
    args: dict = field(default_factory=dict)
    text: str = ""
    identity: bool = False


class Conversation:
    """A run's messages in tau-bench's layout (``traj``) and in tau2's (``tau2``: its message models, the customer's
    own tool calls as tau2 records them), every call run on the domain's environment as it goes. ``step_of`` maps
    a ``traj`` index to the step the tau2 importer gives the same message (the policy is its message 0 too).

    A call's result is the task's (``GoldPath.results``) where the same call was made after the same state-changing
    calls (``done``: the writes and the customer's own calls so far) in an earlier run of the task: the runs of a
    task share most of their calls, and a fresh environment (tau2 loads and validates the domain's database: ~0.1 s
    of CPU for retail) is made only at a call no earlier run made, brought to the run's state by replaying ``done``
    on it."""

    def __init__(self, gold: GoldPath, env=None) -> None:
        from tau2.data_model import message as m

        self._m = m
        self.gold = gold
        self.done: tuple = ()  # the state-changing calls made so far: (requestor, name, arguments as JSON)
        self._env = env  # a live environment (a fresh one given, or made at the first miss), at the state after
        # ``_env_done``
        self._env_done: tuple = ()
        self.traj: list[dict] = [{"role": "system", "content": gold.policy}]
        self.tau2: list = []
        self.step_of: dict[int, int] = {0: 0}
        self.shown = ""  # every message's text so far: what the conversation has shown

    def _add(self, msg: dict, *tau2_msgs) -> int:
        self.traj.append(msg)
        self.shown += "\n" + (msg.get("content") or "") + "".join(
            c["function"]["arguments"] for c in msg.get("tool_calls") or [])
        self.tau2.extend(tau2_msgs)
        self.step_of[len(self.traj) - 1] = len(self.tau2)  # the last tau2 message added for it
        return len(self.traj) - 1

    def say(self, text: str) -> int:
        return self._add({"role": "assistant", "content": text},
                         self._m.AssistantMessage(role="assistant", content=text))

    def user(self, text: str, *device_call) -> int:
        """The user's message; ``device_call``: the tool call and result the user made on its own side (tau2
        records them before the words; tau-bench's layout has no place for them)."""
        said = self._m.UserMessage(role="user", content=text)
        return self._add({"role": "user", "content": text}, *device_call, said)

    def run_tool(self, name: str, args: dict, requestor: str = "assistant", cid: str = "c"):
        call = (requestor, name, json.dumps(args, sort_keys=True))
        key = (self.done, call)
        found = self.gold.results.get(key)
        ran = found is None
        if ran:
            result = self._live().get_response(self._m.ToolCall(id=cid, name=name, arguments=args,
                                                                requestor=requestor))
            found = self.gold.results[key] = (result.content, result.error)
        if requestor == "user" or name in self.gold.writes:
            self.done += (call,)
            if ran:
                self._env_done = self.done  # (the live environment made it)
        return self._m.ToolMessage(id=cid, content=found[0], requestor=requestor, role="tool", error=found[1])

    def _live(self):
        """The environment at the state after ``done``: the live one, with the calls it has not made replayed, or a
        fresh one with them all."""
        if self._env is None or self._env_done != self.done[:len(self._env_done)]:
            self._env, self._env_done = self.gold.fresh_env(), ()
        for requestor, name, args in self.done[len(self._env_done):]:
            self._env.get_response(self._m.ToolCall(id="replay", name=name, arguments=json.loads(args),
                                                    requestor=requestor))
        self._env_done = self.done
        return self._env

    def user_act(self, name: str, args: dict) -> int:
        cid = f"user_call_{len(self.tau2)}"
        call = self._m.ToolCall(id=cid, name=name, arguments=args, requestor="user")
        result = self.run_tool(name, args, "user", cid)
        return self.user(f"Done. My phone says: {result.content}",
                         self._m.UserMessage(role="user", tool_calls=[call]), result)

    def call(self, name: str, args: dict) -> tuple[int, str]:
        cid = f"call_{len(self.traj)}"
        tc = self._m.ToolCall(id=cid, name=name, arguments=args, requestor="assistant")
        at = self._add({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            self._m.AssistantMessage(role="assistant", tool_calls=[tc]))
        result = self.run_tool(name, args, cid=cid)
        self._add({"role": "tool", "tool_call_id": cid, "name": name, "content": result.content}, result)
        return at, result.content


class GoldPath:
    """One task's gold path as a plan (``steps``), rendered into a run by ``render`` (a controlled failure is the plan
    changed, or a hook at render time)."""

    def __init__(self, domain: str, task, module) -> None:
        self.domain, self.task, self.module = domain, task, module
        self.instruction = user_instruction(task)
        env = self.fresh_env()
        self.policy = env.policy
        self.tools = env.tools.get_tools()
        self.writes = {n for n in self.tools if env.tools.tool_type(n).value == "write"}
        self.reads = sorted(n for n in self.tools if env.tools.tool_type(n).value == "read")
        self.unshown: list[str] = []  # ids a write needs that no look-up showed and the user's instruction lacks
        # each call's result, (content, error), by the state-changing calls before it and the call (``Conversation``)
        self.results: dict[tuple, tuple[str, bool]] = {}
        self.steps = self._plan(env)

    def fresh_env(self):
        env = self.module.get_environment()
        state = self.task.initial_state
        if state is not None:
            env.set_state(initialization_data=state.initialization_data,
                          initialization_actions=state.initialization_actions, message_history=[])
        return env

    def _plan(self, env) -> list[Step]:
        """The gold actions with what a policy-following agent adds: the identity look-up first, the look-ups and
        questions that show each write's values, the details and the user's yes before each write."""
        conv = Conversation(self, env)
        conv.say(GREETING)
        conv.user(user_opening(self.task))
        steps: list[Step] = []
        actions = (self.task.evaluation_criteria.actions or []) if self.task.evaluation_criteria else []
        ident = identity_call(self.domain, self.instruction)
        first_write = next((n for n, a in enumerate(actions) if a.requestor == "assistant" and a.name in self.writes),
                           len(actions))
        if ident is not None and not any(_is_user_read(a.name) for a in actions[:first_write]):
            steps.append(Step("read", *ident, identity=True))
            conv.call(*ident)
        for a in actions:
            if a.requestor == "user":
                steps.append(Step("user_act", a.name, dict(a.arguments)))
                conv.run_tool(a.name, a.arguments, "user")
                continue
            if a.name in self.writes:
                # (the look-ups first, as before: a status read by the thing's id first would show what they show
                # and leave the reads that show the rest -- the user's other orders -- unmade)
                steps += self._look_ups(conv, a.arguments)
                steps += self._status_checks(conv, a.name, a.arguments)
                missing: dict[str, list] = {}  # only the values not shown: the user says what it knows
                for k, x in _leaves(a.arguments):
                    if x not in (None, "") and str(x) not in conv.shown:
                        missing.setdefault(k, []).append(x)
                missing = {k: v[0] if len(v) == 1 else v for k, v in missing.items()}
                self.unshown += [str(x) for _, x in _leaves(missing) if isinstance(x, str) and ID_LIKE.match(x)
                                 and len(x) >= 5 and x.lower() not in self.instruction.lower()]
                if missing:
                    steps.append(Step("ask", a.name, missing))
                    conv.user(_details(missing))
                steps.append(Step("confirm", a.name, dict(a.arguments)))
                steps.append(Step("write", a.name, dict(a.arguments)))
            else:
                steps.append(Step("read", a.name, dict(a.arguments),
                                  identity=ident is not None and (a.name, a.arguments) == ident))
            conv.call(a.name, a.arguments)
        steps.append(Step("final"))
        return steps

    def _status_checks(self, conv: Conversation, name: str, args: dict) -> list[Step]:
        """Reads that show the status of what the write acts on, where the policy says to check it first (the
        diagnosis's reading of the policy: ``policy.check_first``, "you should check its status before taking the
        action", "check that the bill is overdue before sending a payment request"): each read of one parameter tried
        on the thing's id, then each read on the values shown so far, until one's result holds an object with the
        write's ``<thing>_id`` and a ``status``."""
        from evoharness.diagnosis.invariants import write_limits

        found: list[Step] = []
        for lim in write_limits(self.policy):
            value = args.get(lim.checked + "_id")
            if lim.rule != "policy.check_first" or not lim.covers(name) or not isinstance(value, str) \
                    or _shows_status(conv, lim.checked + "_id", value):
                continue
            by_id = ((n, {p[0]: value}) for n in self.reads if len(p := list(self.tools[n].params.model_fields)) == 1)
            for read, params in chain(by_id, self._candidates(conv, args)):
                result = conv.run_tool(read, params)
                if not result.error and value in result.content and _has_status(result.content, lim.checked + "_id",
                                                                                  value):
                    conv.call(read, params)
                    found.append(Step("read", read, params))
                    break
        return found

    def _look_ups(self, conv: Conversation, args: dict) -> list[Step]:
        """Reads that show the write's values the conversation has not shown: each read of the domain tried on each
        value shown so far under the read's parameter names, or in the write's own arguments (a search by the
        route and date), or a bare id a look-up returned (a user id): a read's result holds the ids it names."""
        found: list[Step] = []
        for _, value in _leaves(args):
            if not isinstance(value, str) or not value or value in conv.shown:
                continue
            for name, params in self._candidates(conv, args):
                result = conv.run_tool(name, params)
                if not result.error and value in result.content:
                    conv.call(name, params)
                    found.append(Step("read", name, params))
                    break
        return found

    def _candidates(self, conv: Conversation, args: dict):
        shown: dict[str, set] = defaultdict(set)
        own: dict[str, set] = defaultdict(set)  # the write's own values: a search by its route and date
        bare: set[str] = set()  # a look-up that returned an id alone ("mei_kovacs_8020")
        for k, v in _leaves(args):
            if isinstance(v, str):
                own[k].add(v)
        for m in conv.traj:
            if m["role"] != "tool":
                continue
            try:
                data = json.loads(m["content"])
            except ValueError:
                if re.fullmatch(r"[\w#-]{3,60}", m["content"].strip()):
                    bare.add(m["content"].strip())
                continue
            for k, v in _leaves(data):
                if isinstance(v, str):
                    shown[k].add(v)
            if isinstance(data, dict):  # a dict keyed by ids (payment methods, variants): the keys are ids too
                for k, v in data.items():
                    if isinstance(v, dict):
                        shown[k.rstrip("s") + "_id"].update(v)
                    if isinstance(v, list):
                        shown[k.rstrip("s") + "_id"].update(x for x in v if isinstance(x, str))
        for name in self.reads:
            params = list(self.tools[name].params.model_fields)
            if len(params) == 1:
                for value in sorted(shown.get(params[0], set()) | bare):
                    yield name, {params[0]: value}
            elif 1 < len(params) <= 3 and all(shown.get(p) or own.get(p) for p in params):
                for values in islice(product(*(sorted(shown[p] | own[p]) for p in params)), 300):
                    yield name, dict(zip(params, values, strict=True))

    # -- rendering -------------------------------------------------------------------------------------------------

    def render(self, steps: list[Step] | None = None, bad_first_write: dict | None = None,
               misstate: bool = False) -> tuple[Conversation, dict]:
        """The run's messages and what was marked: ``first_write`` (the call's index), ``confirm`` (the details'
        index), ``final`` (the final answer's index). ``bad_first_write``: arguments sent once before the first
        write's own (a recovered error); ``misstate``: the final answer changes the value it restates."""
        conv = Conversation(self)
        conv.say(GREETING)
        conv.user(user_opening(self.task))
        marks: dict[str, int] = {}
        last_write: str | None = None
        transferred = False
        for s in steps if steps is not None else self.steps:
            if s.kind == "read":
                conv.call(s.name, s.args)
            elif s.kind == "user_act":
                conv.say(f"Please do this on your phone: {_spaced(s.name)}"
                         + (f" ({_details(s.args)})" if s.args else "") + ", and tell me what it shows.")
                conv.user_act(s.name, s.args)
            elif s.kind == "ask":
                conv.say(f"To do this I need a few details from you: {', '.join(_spaced(k) for k in s.args)}.")
                conv.user(_details(s.args))
            elif s.kind == "confirm":
                at = conv.say(f"Here are the details of the action: {_spaced(s.name)} -- {_details(s.args)}. "
                              "Do you confirm (yes) that I should proceed?")
                marks.setdefault("confirm", at)
                conv.user("Yes, please proceed.")
            elif s.kind == "write":
                if bad_first_write is not None and "first_write" not in marks:
                    marks["bad_call"] = conv.call(s.name, bad_first_write)[0]
                at, content = conv.call(s.name, s.args)
                marks.setdefault("first_write", at)
                marks["last_write"] = at
                last_write = content
            if s.name == "transfer_to_human_agents":
                transferred = True
        if transferred:
            marks["final"] = conv.say("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.")
        else:
            marks["final"] = conv.say(final_answer(last_write, earlier_status(conv, last_write), misstate))
            conv.user("Thank you, that's all. ###STOP###")
        return conv, marks


def _has_status(content: str, key: str, value: str) -> bool:
    """A tool result holds an object whose ``key`` is ``value`` and that has a ``status``."""
    try:
        todo = [json.loads(content)]
    except ValueError:
        return False
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            if x.get(key) == value and "status" in x:
                return True
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return False


def _shows_status(conv: Conversation, key: str, value: str) -> bool:
    return any(m["role"] == "tool" and value in (m.get("content") or "") and _has_status(m["content"], key, value)
               for m in conv.traj)


AMOUNT_KEYS = ("amount", "charge", "price", "balance", "total", "refund")  # a key ending in one: money
STATUS = re.compile(r'"status"\s*:\s*"([^"]{1,40})"')


def stated_value(result: str | None) -> tuple[str, str, str] | None:
    """What the final answer restates of the last write's result: (entity, key, value) -- the entity the result is
    about (its first ``*_id`` value, "" if none), and its status, else its last amount, else its message or text
    (a plain message: "Roaming enabled successfully")."""
    if result is None:
        return None
    try:
        data = json.loads(result)
    except ValueError:
        return ("", "result", result.strip())
    if not isinstance(data, dict):
        return ("", "result", str(data))
    entity = next((v for k, v in data.items() if k.endswith("_id") and isinstance(v, str)), "")
    if isinstance(data.get("status"), str):
        return (entity, "status", data["status"])
    amounts = [(k, v) for k, v in _leaves(data) if k.rsplit("_", 1)[-1] in AMOUNT_KEYS
               and isinstance(v, int | float | str) and re.fullmatch(r"-?\d+(\.\d+)?", str(v))]
    if amounts:
        return (entity, amounts[-1][0], str(amounts[-1][1]))
    if isinstance(data.get("message"), str):
        return (entity, "message", data["message"])
    return None


def final_answer(result: str | None, earlier: str = "", misstate: bool = False) -> str:
    """The final answer: it names the entity the last write changed and restates its result (``misstate``: with the
    value changed as a misreading changes it -- a status told as the entity's earlier one (``earlier``: the
    conversation's last other status of it), an amount off by a tenth, a message negated)."""
    stated = stated_value(result)
    if stated is None:
        return "I have looked into your request; there is nothing more I can do for it under our policy."
    entity, key, value = stated
    about = f" for {entity}" if entity else ""
    if key == "status":
        value = (earlier or ("pending" if value != "pending" else "cancelled")) if misstate else value
        return f"All done: {entity or 'your request'} is now {value}. Is there anything else I can help with?"
    if key in ("result", "message"):
        value = "The request could not be completed." if misstate else value
        return f"All done{about}. The system says: {value} Is there anything else I can help with?"
    if misstate:
        value = f"{float(value) * 1.1 + 1:.2f}"
    return f"All done{about}: the {_spaced(key)} is ${value}. Is there anything else I can help with?"


def earlier_status(conv: Conversation, result: str | None) -> str:
    """The entity's last status before the last write's result, as an earlier tool result gave it."""
    stated = stated_value(result)
    if not stated or stated[1] != "status" or not stated[0]:
        return ""
    entity, _, now = stated
    for m in reversed(conv.traj[:-1]):
        if m["role"] == "tool" and f'"{entity}"' in m["content"] and m["content"] != result:
            found = STATUS.findall(m["content"])
            if found and found[0] not in now:  # not "pending" for "pending (item modified)": a refinement
                return found[0]
    return ""


# -- controlled failures ------------------------------------------------------------------------------------------


def _first(steps: list[Step], kind: str) -> int | None:
    return next((i for i, s in enumerate(steps) if s.kind == kind), None)


def no_confirmation(gp: GoldPath):
    steps = copy.deepcopy(gp.steps)
    i = _first(steps, "confirm")
    if i is None:
        return None
    del steps[i]
    conv, marks = gp.render(steps)
    return conv, marks["first_write"], "the first write with no details listed and no yes"


IDENTITY_LOOKUP_DOMAINS = ("retail", "telecom")  # airline: the policy asks the user for its id, no look-up


def before_identity(gp: GoldPath):
    """The identity look-ups (user / customer reads) moved after the first write; only where the first write's
    values are all shown without them (else the run would fail earlier, at a value never shown)."""
    if gp.domain not in IDENTITY_LOOKUP_DOMAINS:
        return None
    steps = copy.deepcopy(gp.steps)
    w = _first(steps, "write")
    if w is None:
        return None
    ident = [s for s in steps[:w] if s.kind == "read" and (s.identity or _is_user_read(s.name))]
    if not ident:
        return None
    rest = [s for s in steps if s not in ident]
    w2 = _first(rest, "write")
    probe = rest[:w2 + 1]
    conv, marks = gp.render(probe)
    shown = "\n".join(str(m.get("content") or "") for m in conv.traj[:marks["confirm"]])
    write = rest[w2]
    if any(str(v) not in shown for _, v in _leaves(write.args) if v not in (None, "")):
        return None
    conv, marks = gp.render(rest[:w2 + 1] + ident + rest[w2 + 1:])
    return conv, marks["first_write"], "the first write before any look-up of the user"


def _is_user_read(name: str) -> bool:
    return bool(re.search(r"user|customer|account", name))


ID_LIKE = re.compile(r"^[#A-Za-z_]*\d[\w#-]*$")


def _wrong_id(value: str, shown: str) -> str | None:
    """The id with its last digit changed until the conversation has not shown it."""
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    if not digits:
        return None
    i = digits[-1]
    for d in "1234567890":
        cand = value[:i] + d + value[i + 1:]
        if cand != value and cand not in shown:
            return cand
    return None


def _with_wrong_id(gp: GoldPath, args: dict, shown: str) -> dict | None:
    out = copy.deepcopy(args)

    def swap(v):
        if isinstance(v, dict):
            for k, x in v.items():
                r = swap(x)
                if r is not None:
                    v[k] = r
                    return v
        elif isinstance(v, list):
            for n, x in enumerate(v):
                r = swap(x)
                if r is not None:
                    v[n] = r
                    return v
        elif isinstance(v, str) and ID_LIKE.match(v) and len(v) >= 5:
            return _wrong_id(v, shown)
        return None

    for k, v in out.items():
        r = swap(v)
        if r is not None:
            out[k] = r
            return out
    return None


def wrong_argument(gp: GoldPath):
    steps = copy.deepcopy(gp.steps)
    c, w = _first(steps, "confirm"), _first(steps, "write")
    if c is None or w is None:
        return None
    bad = _with_wrong_id(gp, steps[w].args, gp.render()[0].shown)
    if bad is None:
        return None
    steps[c].args = bad
    steps[w].args = bad
    conv, marks = gp.render(steps)
    return conv, marks["confirm"], "an id of the first write the conversation never showed, from the details on"


def recovered_error(gp: GoldPath):
    w = _first(gp.steps, "write")
    if w is None:
        return None
    bad = _with_wrong_id(gp, gp.steps[w].args, gp.render()[0].shown)
    if bad is None:
        return None
    conv, marks = gp.render(bad_first_write=bad)
    if not conv.traj[marks["bad_call"] + 1]["content"].startswith("Error"):
        return None
    return conv, marks["bad_call"], "a wrong id sent once, refused, then the right call"


def misstated_result(gp: GoldPath):
    """The final answer with the value it restates changed; the kind says which value (``stated_value``)."""
    conv, marks = gp.render()
    if "first_write" not in marks or conv.traj[marks["final"]]["content"].startswith("YOU ARE BEING TRANSFERRED"):
        return None
    bad, bad_marks = gp.render(misstate=True)
    if bad.traj[bad_marks["final"]]["content"] == conv.traj[marks["final"]]["content"]:
        return None
    _, key, _ = stated_value(conv.traj[marks["last_write"] + 1]["content"])
    what = key if key in ("status", "message") else "message" if key == "result" else "amount"
    return bad, bad_marks["final"], f"the final answer misstates the last write's result ({what})", \
        f"misstated_{what}"


FAILURES = {"no_confirmation": no_confirmation, "before_identity": before_identity, "wrong_argument": wrong_argument,
            "recovered_error": recovered_error, "misstated_result": misstated_result}


# -- labelling ----------------------------------------------------------------------------------------------------




@dataclass
class Run:
    """One written run: a gold path (``kind`` "gold", reward 1) or a controlled failure with the ``traj`` index it
    is written to fail at (``step``; for ``recovered_error``, the refused call)."""
    gold: GoldPath
    kind: str
    reward: float
    conv: Conversation
    step: int | None = None
    why: str = ""

    @property
    def domain(self) -> str:
        return self.gold.domain


SKIPPED: list[tuple[str, list[str]]] = []  # tasks left out by ``build`` and why (the ids no look-up showed)


def build(domains=DOMAINS, limit: int | None = None, task_ids: dict[str, list[str]] | None = None) -> list[Run]:
    """Every gold run and controlled failure of the domains' tasks (``limit``: the first N tasks of each;
    ``task_ids``: only those tasks of a domain named there)."""
    runs: list[Run] = []
    for domain in domains:
        module = domain_module(domain)
        tasks = module.get_tasks()
        if task_ids and domain in task_ids:
            tasks = [t for t in tasks if t.id in task_ids[domain]]
        for task in tasks[:limit]:
            gp = GoldPath(domain, task, module)
            if gp.unshown:  # the user would have to state an id it was never given: the script's gap, left out
                SKIPPED.append((f"{domain}_{task.id}", gp.unshown[:3]))
                continue
            runs.append(Run(gp, "gold", 1.0, gp.render()[0]))
            for kind, make in FAILURES.items():
                made = make(gp)
                if made is not None:
                    conv, step, why, *named = made
                    runs.append(Run(gp, named[0] if named else kind, 1.0 if kind == "recovered_error" else 0.0,
                                    conv, step, why))
    return runs


def tau_bench_records(runs: list[Run]) -> list[dict]:
    """tau-bench's ``historical_trajectories`` records (``task_id``, ``trial``, ``reward``, ``info.task``, ``traj``);
    ``info.label``: the written failing step and why."""
    out = []
    for n, r in enumerate(runs):
        info: dict[str, Any] = {"task": {"instruction": r.gold.instruction, "actions": [
            {"name": s.name, "kwargs": s.args} for s in r.gold.steps if s.kind in ("read", "write")]},
            "domain": r.domain, "kind": r.kind}
        if r.step is not None:
            info["label"] = {"step": r.step, "why": r.why}
        out.append({"task_id": f"{r.domain}_{r.gold.task.id}", "trial": n, "reward": r.reward, "info": info,
                    "traj": r.conv.traj})
    return out


def tau2_results(runs: list[Run], domain: str) -> str:
    """tau2's ``results.json`` for one domain's runs (its policy in ``info``), as ``tau2 run`` saves it."""
    from tau2.data_model.simulation import (
        AgentInfo,
        Info,
        Results,
        RewardInfo,
        SimulationRun,
        TerminationReason,
        UserInfo,
    )

    ts = "2026-01-01T00:00:00"
    mine = [(n, r) for n, r in enumerate(runs) if r.domain == domain]
    env = mine[0][1].gold.fresh_env()
    sims = [SimulationRun(id=f"{r.kind}-{n}" + (f"-step{r.conv.step_of[r.step]}" if r.step is not None else ""),
                          task_id=r.gold.task.id, timestamp=ts, start_time=ts, end_time=ts,
                          duration=1.0, termination_reason=TerminationReason.AGENT_STOP, messages=r.conv.tau2,
                          trial=n, seed=n, reward_info=RewardInfo(reward=r.reward)) for n, r in mine]
    info = Info(git_commit="tau2_gold_paths", num_trials=1, max_steps=100, max_errors=10,
                user_info=UserInfo(implementation="scripted", llm="none"),
                agent_info=AgentInfo(implementation="scripted", llm="none"),
                environment_info=env.get_info(), seed=0)
    tasks = {r.gold.task.id: r.gold.task for _, r in mine}
    return Results(timestamp=ts, info=info, tasks=list(tasks.values()), simulations=sims).model_dump_json()


def _last_assistant(traj) -> int:
    return max(i for i, m in enumerate(traj.messages) if m["role"] == "assistant")


def write(runs: list[Run], folder: Path, fmt: str) -> list[Path]:
    if fmt == "tau-bench":
        path = folder / "tau2_gold_paths.json"
        path.write_text(json.dumps(tau_bench_records(runs)))
        return [path]
    paths = []
    for domain in dict.fromkeys(r.domain for r in runs):
        path = folder / f"{domain}_results.json"
        path.write_text(tau2_results(runs, domain))
        paths.append(path)
    return paths


def evaluate(runs: list[Run], folder: Path, fmt: str = "tau-bench", outcome_claims: bool = False) -> dict:
    """Label every run, read back through the importer (the path a user's files take), and count
    (``outcome_claims``: with ``diagnosis.outcome_claims = true``, the final answer read against the last write)."""
    from evoharness.diagnosis.config import DiagnosisConfig
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.traces.importers import load_paths

    trajs = list(load_paths(write(runs, folder, fmt)))
    if fmt == "tau2":  # one file per domain, in the order written
        order = [r for d in dict.fromkeys(r.domain for r in runs) for r in runs if r.domain == d]
    else:
        order = runs
    labeller = Labeller(DiagnosisConfig(outcome_claims=outcome_claims))
    gold: dict[str, Counter] = defaultdict(Counter)
    unclean: list[dict] = []
    located: dict[str, Counter] = defaultdict(Counter)
    misses: list[dict] = []
    for r, t in zip(order, trajs, strict=True):
        lab = labeller.label(t)
        task = f"{r.domain}_{r.gold.task.id}"
        if r.kind == "gold":
            gold[r.domain]["n"] += 1
            gold[r.domain]["violations"] += 0  # (a key of every domain's count)
            gold[r.domain]["healthy"] += lab.failure_class == "healthy"
            # the same run scored 0: what would be located on a path with nothing wrong (placement aside)
            zero = labeller.label(t.model_copy(update={"score": 0.0}))
            first = zero.first_signal
            process = [s.id for s in lab.signals if s.id.startswith(("F2.", "F3."))]
            clean = first is not None and first.id in ("F4.first_write", "F4.poor_delivery") and not process
            gold[r.domain]["clean"] += clean
            # the violation log (schemas, identity, confirmation, preconditions) of the run scored 0 (a Healthy run's
            # label keeps none): a gold path breaks no rule
            violations = [f"{v.rule}@{v.step}: {v.evidence[:100]}" for v in zero.violations]
            gold[r.domain]["violations"] += bool(violations)
            if lab.failure_class != "healthy" or not clean or violations:
                unclean.append({"task": task, "class": str(lab.failure_class), "process": process,
                                "scored_0": f"{first.id}@{first.step}" if first else None,
                                "evidence": first.evidence[:100] if first else "", "violations": violations})
            continue
        step = r.step if fmt == "tau-bench" else r.conv.step_of[r.step]
        c = located[f"{r.domain}/{r.kind}"]
        c["n"] += 1
        c["last"] += _last_assistant(t) == step
        if r.kind == "recovered_error":
            ok = lab.failure_class == "healthy" and not any(s.id.startswith(("F2.", "F3.")) for s in lab.signals)
        else:
            ok = lab.first_signal is not None and lab.first_signal.step == step
        c["located"] += ok
        if not ok:
            misses.append({"kind": r.kind, "task": task, "step": step, "class": str(lab.failure_class),
                           "first": f"{lab.first_signal.id}@{lab.first_signal.step}" if lab.first_signal else None})
    return {"format": fmt, "gold": {d: dict(c) for d, c in gold.items()}, "gold_unclean": unclean,
            "failures": {k: dict(c) for k, c in sorted(located.items())}, "misses": misses}


def print_report(res: dict, show: int = 40) -> None:
    print(f"[{res['format']}] gold runs (reward 1): Healthy; clean = scored 0 nothing is located but the placement "
          "fallbacks (F4.first_write / F4.poor_delivery), and no F2 / F3 signal")
    for d, c in res["gold"].items():
        print(f"  {d:8s} Healthy {c['healthy']}/{c['n']}   clean {c['clean']}/{c['n']}   "
              f"violations on gold paths {c['violations']}/{c['n']}")
    for u in res["gold_unclean"][:show]:
        print(f"    {u['task']}: {u['class']} process={u['process']} scored 0 -> {u['scored_0']} {u['evidence']!r}"
              + "".join(f"\n      violation {v}" for v in u["violations"]))
    print(f"[{res['format']}] controlled failures: first signal on the written step; the last assistant message there")
    for k, c in res["failures"].items():
        print(f"  {k:28s} located {c['located']:3d}/{c['n']:<3d}  last message {c['last']}/{c['n']}")
    by = Counter((m["kind"], m["first"].split("@")[0] if m["first"] else None) for m in res["misses"])
    for (k, f), n in by.most_common(show):
        print(f"    miss {k}: first signal {f} x{n}")


def main(argv: list[str] | None = None) -> int:
    from evoharness.script_help import DefaultsHelp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelp)
    ap.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=DOMAINS)
    ap.add_argument("--limit", type=int, default=None, help="the first N tasks of each domain")
    ap.add_argument("--formats", nargs="+", default=["tau-bench", "tau2"], choices=["tau-bench", "tau2"])
    ap.add_argument("--out", type=Path, help="keep the written files in this folder (made if missing)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--outcome-claims", action="store_true",
                    help="label with diagnosis.outcome_claims = true (F1.misstated_outcome: the final answer read "
                         "against the last write's result; off by default)")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    if args.out is not None:  # made if missing, as dataset export's and demo's --out DIR are
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file there or above it, no permission
            why = "a file, not a directory" if args.out.exists() else (e.strerror or str(e)).lower()
            print(f"error: --out {args.out}: cannot make the folder: {why}", file=sys.stderr)
            return 2
    import tempfile

    runs = build(args.domains, args.limit)
    results: list = [{"skipped": SKIPPED}] if args.json else []
    if not args.json:
        print(f"left out: {len(SKIPPED)} tasks whose write needs an id no look-up of the script showed "
              f"(the user would have to state it): {', '.join(t for t, _ in SKIPPED)}")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats:
            folder = args.out or Path(tmp)
            results.append(evaluate(runs, folder, fmt, args.outcome_claims))
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for res in results:
            print_report(res)
    return 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main())
