"""Invariants read from the trace itself (the approach AgentRx published), and the violation log.

Tool schemas: declared ones (``meta["tools"]``, OpenAI ``tools`` format) or, where none is given,
inferred from the trace -- an argument present in every successful call of a tool is required, and
its JSON type is the type those calls used. A call that lacks a required argument, passes a value
outside a declared enum, or a value of another type is a violation.

Domain policy (only where the system prompt carries one): rule templates, read from the policy text
alone -- the system prompt less its tool documentation (tool listing lines such as "- `name`: ...",
every line that names a tool the trace declares or calls, and the declared tools' descriptions), so
a tool described as "Authenticate the user with the travel API" is not mistaken for a policy that
asks for an identity check --
- ``policy.identity_check``: the prompt asks to authenticate / verify / identify the user or who they are, or to
  obtain the user id (``IDENTITY_POLICY``), and a write action comes before any lookup of the user (a read tool whose
  name mentions user, customer or account) -- where the prompt asks only to obtain the user id, also before the user
  gave it (a ``user_id`` value of a tool result or call, said by the user): the user's own word is the id asked for,
  but it authenticates no one; where the prompt says the check holds even when the user gives the id
  (``EVEN_GIVEN``), a look-up keyed only by ids the user said is none (``_reads_said_id``);
- ``policy.confirmation``: the prompt asks for explicit confirmation (``CONFIRM_POLICY``: or the user's approval,
  consent, agreement in other words), and the user message just before a write action says no yes
  (``consent.affirmed``: "yes", "confirm", "go ahead", ...), or is one that answers no listing of the action: since
  the user's first message no reply of the agent named one of the write's argument values, nor does the yes
  (``_yes_to_the_action``: a request holding "okay" is no yes to a write never listed); a value is named in any case,
  a number however written ("$1,234.00" for 1234) and an ISO date as words ("May 20" for 2024-05-20), and the reply
  the yes answers lists the action where it names what the record the write acts on holds (``_record_listed``: the
  flight numbers of the reservation a ``cancel_reservation`` names by its id alone); nor is a yes
  that refuses the kind of action the write's tool names, or opens by asking only for other kinds ("Don't cancel it.
  Yes, change it." before ``cancel_pending_order``: ``consent.refuses``);
- ``policy.precondition``: the prompt says a thing can only be done to if its status is one of some
  (``PRECONDITION``: "An order can only be cancelled if its status is 'pending'"), and a write whose tool name holds
  the action's word and the thing's ("cancel_pending_order") is tried on a thing whose latest status a tool result
  showed is another ("delivered"), whether or not the tool refused it.

A write action is a call that may change state (``is_state_changing``), handing over to a human (``transfer_*``,
``escalate_*``, ...: ``is_handoff``) excepted. Every violation has a step and quoted evidence; the first policy
violation of a failed run is the located signal ``F4.policy_violation``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

from evoharness.diagnosis.claims import MONTHS
from evoharness.diagnosis.consent import affirmed, kinds_named, leave_asked, no_action_offered, refuses, tool_kinds
from evoharness.diagnosis.context import ToolCall, TraceView, failed_result
from evoharness.diagnosis.models import Violation
from evoharness.diagnosis.permissions import refused_permitted
from evoharness.diagnosis.policy_limits import Limit, described_limits, limit_violations, limits_of
from evoharness.traces.models import Termination

# A policy that asks who the person is: to authenticate a person ("authenticate the user identity", tau-bench retail),
# to authenticate, verify, confirm, check, establish or validate a person's identity (the user's, the caller's, their,
# his or her identity, the identity of a customer or a person, or the identity itself: "verify identity before any
# change" -- not any noun "identity": "check that identity columns are not updated", an identity provider, an
# identity map or token), to know, verify or confirm who the person is (or who
# "you are talking to"), or to obtain the user id -- not to authenticate with a service (a coding
# agent's prompt: "use the GITHUB_TOKEN ... to authenticate with the GitHub API"), nor who the person is doing
# something with ("let the customer know who they are talking to", "check who they are assigned to": a participle
# after "is / are"), nor who "you" -- the agent -- are ("make sure users know who you are"). Blanks within a line only:
# no rule crosses one.
_PERSON = r"(?:user|customer|caller|client|member|guest|passenger|patient|account[^\S\n]+holder|traveler|traveller)s?"
_WHOSE = r"(?:(?:the|their|a|an|each|every|your|this)[^\S\n]+)?"
_WHO_IS = (rf"(?:(?:{_WHOSE}{_PERSON}|they)[^\S\n]+(?:is|are)\b(?![^\S\n]+\w+(?:ing|ed)\b)"
           r"|you[^\S\n]+are[^\S\n]+(?:talking|speaking|chatting|dealing|interacting)[^\S\n]+(?:to|with)\b)")
_HOLDER = rf"(?:{_PERSON}|persons?|people|individuals?|requesters?|someone|anyone|whoever)"
_PERSONS_IDENTITY = (rf"(?:\b{_HOLDER}(?:['’]s?)?|\b(?:their|his|her))[^\S\n]+identit"
                     rf"|\bidentit(?:y|ies)[^\S\n]+of[^\S\n]+{_WHOSE}{_HOLDER}\b")
# "verify identity before ...", "confirm the identity first": the identity itself the object, no noun after it (an
# identity column, provider, map or token is a thing of its own): a line's end, a stop, or a word that opens no noun
_BARE_IDENTITY = (r"(?:the[^\S\n]+)?identit(?:y|ies)(?=[^\S\n]*(?:[.,;:!?)]|$)|[^\S\n]+(?:before|first|using|with|by|"
                  r"via|through|prior|when|whenever|if|unless|against|again|then|at|on|upon)\b"
                  r"|[^\S\n]+(?:and|or)\b(?![^\S\n]+access\b))")  # "identity and access management" is IAM
# to obtain the person's id, in other words ("obtain the user id", "ask for the user ID", "collect the customer's
# customer id", "get their member id", "request the user_id")
_OBTAIN_ID = (rf"\b(?:obtain|get|collect|request|gather|ask[^\S\n]+(?:\w+[^\S\n]+){{0,2}}?for)[^\S\n]+"
              rf"(?:(?:the|their|your|a)[^\S\n]+)?(?:{_PERSON}['’]s?[^\S\n]+)?{_PERSON}[^\S\n]*[_-]?id\b")
IDENTITY_POLICY = re.compile(
    rf"authenticat\w*[^\S\n]+(?:{_WHOSE}{_PERSON}|{_WHOSE}(?:{_PERSONS_IDENTITY})|{_BARE_IDENTITY})"
    rf"|\b(?:verif|confirm|check|establish|validat)\w*\b[^\n]{{0,30}}?(?:{_PERSONS_IDENTITY})"
    rf"|\b(?:verif|confirm|check|establish|validat)\w*[^\S\n]+{_BARE_IDENTITY}"
    rf"|\b(?:verif\w*|confirm\w*|check|establish\w*|know)[^\S\n]+who[^\S\n]+{_WHO_IS}"
    rf"|\bidentify[^\S\n]+{_WHOSE}{_PERSON}\b(?!['’])"
    rf"|{_OBTAIN_ID}", re.I)
# the one identity rule a user's own word meets: asking for the user id itself (not who the user is)
OBTAIN_ID_ONLY = re.compile(_OBTAIN_ID, re.I)
# a check of who the person is that holds even when they give their id ("This has to be done even when the user already
# provides the user id", tau2 retail's policy): a look-up keyed by the id they said reads the account they claim, and
# checks no one (``_reads_said_id``)
EVEN_GIVEN = re.compile(
    rf"\beven[^\S\n]+(?:when|if|though)[^\S\n]+(?:{_WHOSE}{_PERSON}|they|he|she)[^\S\n]+(?:already[^\S\n]+)?"
    r"(?:provides?|provided|gives?|gave|says?|said|states?|stated|knows?|has|have|shares?|shared|supplies|supplied)"
    rf"[^\S\n]+(?:(?:their|the|his|her|its|a|an)[^\S\n]+)?(?:own[^\S\n]+)?(?:{_PERSON}[^\S\n]*[_-]?)?ids?\b", re.I)
USER_ID_VALUE = re.compile(r'"user_id"\s*:\s*"([^"]{1,80})"')
# A policy that asks the person's yes before acting, in any of the words policies use for it (a general vocabulary of
# consent, not one benchmark's sentence): an explicit / express confirmation, approval, consent, agreement,
# permission or go-ahead ("obtain explicit user confirmation (yes)", "get the user's explicit approval", "wait until
# the user explicitly consents", "express permission"); the person's own ("the customer's approval", "user consent");
# the person to confirm, approve, consent, agree or say yes ("ask the user to confirm", "the user must agree", "once
# the customer approves", "until the user has agreed") -- not the agent confirming facts ("after confirming the
# facts"), nor who the person is ("the user confirms their identity": the identity rule's), nor a thing named for the
# person ("the user agreement", "the guest's confirmation number", "the user authorization token", "customers agree
# to the terms when they sign up": a noun or a plain statement of fact, no yes asked). Blanks within a line only, as
# IDENTITY_POLICY.
_CONSENT = r"(?:confirm\w*|approv\w*|consent\w*|agree\w*|permission|authori[sz]\w*|go[- ]ahead|yes)\b"
_HOW = r"(?:(?:first|explicitly|expressly|clearly)[^\S\n]+)?"
# the word after a consent noun that makes it a thing's name: a confirmation number, an approval status; or the one
# who gives it, when that is not the person: an approval from a supervisor, authorized by a manager
_NOT_THE_YES = (r"(?![^\S\n]+(?:numbers?|codes?|ids?|e-?mails?|status|tokens?|keys?|pages?|links?|forms?|letters?|"
                r"messages?|headers?|levels?|dates?|records?|lists?|queues?|flows?|process|screens?|details|terms|"
                r"(?:from|by)[^\S\n]+(?:(?:a|an|the|your|our|their|its)[^\S\n]+)?(?:supervisor|manager|admin|"
                r"administrator|lead|staff|compliance|legal|security|reviewer|maintainer|moderator|operator|"
                r"department|team)s?)\b)")
# a consent participle that qualifies a noun after "only", a determiner or a sentence's start says who or what holds
# an approval ("Only explicitly authorized agents may issue refunds", "Explicitly approved vendors are listed"): it
# asks no yes of the person (CONFIRM_POLICY's first alternative, which ``asks_confirmation`` sets aside). Not a
# change or an action so qualified: "make only explicitly confirmed changes" asks the person's yes for each
_HELD = (r"(?P<held>(?:^|(?<=\n)|(?<=[.!?;:*\-][^\S\n])|\b(?:only|any|all|the|a|an|each|every|no|those|these|some|"
         r"other)[^\S\n]+)(?:explicit|express)ly[^\S\n]+(?:confirm|approv|authori[sz]|permitt|agre)ed[^\S\n]+"
         r"(?!(?:by|before|to|from|with|via|in|on|upon|through|and|or|first|prior|beforehand|yet|unless|until|"
         r"when|once|if|changes?|actions?|updates?|edits?|modifications?|operations?|writes?)\b)[a-z]\w*)|")
CONFIRM_POLICY = re.compile(
    _HELD + r"explicit (user )?confirmation" + _NOT_THE_YES + r"|confirm(ation)? \(yes\)|obtain .{0,40}confirm"
    rf"|\b(?:(?:explicit|express|affirmative)(?:ly)?|clearly)[^\S\n]+(?:\w+[^\S\n]+)?{_CONSENT}{_NOT_THE_YES}"
    rf"|\b{_PERSON}(?:['’]s?)?[^\S\n]+(?:"
    rf"(?:must|has[^\S\n]+to|have[^\S\n]+to|needs?[^\S\n]+to|should|shall|to)[^\S\n]+{_HOW}"
    r"(?:confirm|approve|consent|agree|authori[sz]e|say[^\S\n]+yes)"  # the person to do it
    rf"|(?:has|have)[^\S\n]+{_HOW}(?:confirmed|approved|consented|agreed|authori[sz]ed|said[^\S\n]+yes)"
    rf"|{_HOW}(?:confirms|confirmed|approves|approved|consents|consented|agrees|agreed|authori[sz]es|"
    r"authori[sz]ed|says[^\S\n]+yes|said[^\S\n]+yes)"  # the person doing it: once the user agrees
    r"|(?:(?:explicit|express)[^\S\n]+)?(?:consent|confirmation|approval|permission|authori[sz]ation|go[- ]ahead)"
    rf")\b{_NOT_THE_YES}"
    r"(?![^\S\n]+(?:(?:their|his|her|the|its)[^\S\n]+)?(?:identit|who\b))", re.I)
# a tool listing line: "- `name`: ..." or "- some_tool: ..." (an identifier in backticks, or one with "_")
TOOL_LINE = re.compile(r"^\s*(?:[-*]\s+|\d+[.)]\s+)?"
                       r"(?:`(?P<quoted>[A-Za-z_][\w.-]*)`|(?P<name>[A-Za-z][\w.-]*_[\w.-]*))"
                       r"\s*(?:\([^)\n]{0,200}\))?\s*:")
# a look-up of the person: a tool named for them (a general vocabulary of who a service serves, as ``_PERSON``), their
# account, profile or identity
USER_LOOKUP = re.compile(r"user|customer|account|member|auth|client|profile|passenger|guest|patient|caller|subscriber"
                         r"|traveler|traveller|person|people|login|identit", re.I)


@lru_cache(maxsize=1024)
def _names_person(name: str) -> bool:
    """``USER_LOOKUP`` in a tool's name, once per name (a run calls a few tools many times)."""
    return USER_LOOKUP.search(name) is not None


JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def _quote(text: object, limit: int = 160) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    return JSON_TYPES.get(type(v), "string")


def _args(call: ToolCall) -> dict[str, Any] | None:
    return call.args if call.parsed_ok and isinstance(call.args, dict) else None


def _failed(view: TraceView, call: ToolCall) -> bool:
    return call.id in failed_call_ids(view)


def failed_call_ids(view: TraceView) -> set[str]:
    """Ids of the calls whose result says they failed (``context.failed_result``); once per view."""
    memo = view.__dict__.get("_failed_ids")
    if memo is None:
        memo = view.__dict__["_failed_ids"] = {
            cid for cid, (_, result) in view.results.items() if failed_result(result)}
    return memo


def declared_schemas(view: TraceView) -> dict[str, dict[str, Any]]:
    out = {}
    for tool in view.traj.meta.get("tools") or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("parameters"), dict):
            out[fn["name"]] = fn["parameters"]
    return out


def inferred_schemas(view: TraceView, names: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per tool (of ``names`` if given): required = keys in every successful call; types = the one JSON type each
    key had (if one)."""
    seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
    failed = failed_call_ids(view)
    for c in view.calls:
        if names is not None and c.name not in names:
            continue
        a = _args(c)
        if a is not None and c.id not in failed:
            seen[c.name].append(a)
    out = {}
    for name, calls in seen.items():
        if len(calls) < 2:
            continue
        required = set.intersection(*(set(a) for a in calls))
        props = {}
        for key in required:
            types = {_json_type(a[key]) for a in calls}
            if len(types) == 1:
                props[key] = {"type": types.pop()}
        out[name] = {"required": sorted(required), "properties": props}
    return out


def schema_violations(view: TraceView) -> list[Violation]:
    declared = declared_schemas(view)
    if declared:
        schemas, kind, calls = declared, "schema", view.calls
    else:
        # a schema inferred from the successful calls holds for each of them (its required keys are in all of them,
        # its types are theirs): only a failed call can break one, so only their tools' schemas are inferred
        failed = failed_call_ids(view)
        calls = [c for c in view.calls if c.id in failed] if failed else []
        if not calls:
            return []
        schemas, kind = inferred_schemas(view, {c.name for c in calls}), "schema(inferred)"
    out = []
    for c in calls:
        schema = schemas.get(c.name)
        if schema is None:
            continue
        a = _args(c)
        if a is None:
            continue
        missing = [k for k in schema.get("required", ()) if k not in a]
        if missing:
            out.append(Violation(rule=f"{kind}.required", step=c.step,
                                 evidence=f"{c.name} without {', '.join(missing)}: {_quote(c.arguments)}"))
        for key, prop in (schema.get("properties") or {}).items():
            if key not in a or not isinstance(prop, dict):
                continue
            if "enum" in prop and a[key] not in prop["enum"]:
                out.append(Violation(rule=f"{kind}.enum", step=c.step,
                                     evidence=f"{c.name}.{key}={a[key]!r} not in {prop['enum']}"))
            want = prop.get("type")
            got = _json_type(a[key])
            if isinstance(want, str) and got != want and not (want == "number" and got == "integer"):
                out.append(Violation(rule=f"{kind}.type", step=c.step,
                                     evidence=f"{c.name}.{key} is {got}, expected {want}: {_quote(a[key], 80)}"))
    return out


def write_calls(view: TraceView) -> list[ToolCall]:
    """The write actions, in order; computed once per view (treat the list as read-only)."""
    memo = view.__dict__.get("_writes")
    if memo is None:
        changes_state, is_handoff = _detectors.changes_state, _detectors.is_handoff
        commands: dict[str, bool] = {}  # a shell command's answer per text (changes_state): a run repeats commands
        memo = view.__dict__["_writes"] = [c for c in view.calls if changes_state(c, commands)
                                           and not is_handoff(c.name)]
    return memo


def _user_gave_their_id(view: TraceView, before: int) -> bool:
    """Did a user message before step ``before`` hold a ``user_id`` value of a tool result or call?

    The user's messages are read first (none: no value is looked for), and the values are tried as they are found
    (the first one said ends the search). Every tool message is read, not ``view.results`` (one result per call id):
    a run whose model reused a call id (51 of the 407 tuning runs, tau-bench airline's) kept only the later result
    there, and the look-up that showed the id the user gave was lost. A call's canonical text is made only where it
    may hold the key (``ToolCall.canonical_may_hold``): most calls never need it."""
    msgs = view.traj.messages
    said = [t for i in view.user_steps if i < before and isinstance(t := msgs[i].get("content"), str)]
    if not said:
        return False
    for i in view.tool_steps:
        content = view.texts[i] or str(msgs[i].get("content"))
        if '"user_id"' in content:
            for i in USER_ID_VALUE.findall(content[:50_000]):
                if any(i in t for t in said):
                    return True
    for c in view.calls:
        if c.canonical_may_hold("user_id"):
            for i in USER_ID_VALUE.findall(c.canonical[:5_000]):
                if any(i in t for t in said):
                    return True
    return False


def asks_confirmation(text: str) -> bool:
    """The text asks the person's yes before acting: a ``CONFIRM_POLICY`` match other than an approval some actor or
    thing holds (its ``held`` group: "Only explicitly authorized agents may ...")."""
    return any(m.group("held") is None for m in CONFIRM_POLICY.finditer(text))


@lru_cache(maxsize=64)
def policy_rules(policy: str) -> tuple[bool, bool]:
    """(asks for an identity check, asks for explicit confirmation): once per distinct system prompt."""
    return bool(IDENTITY_POLICY.search(policy)), asks_confirmation(policy)


def system_text(view: TraceView) -> str:
    """The texts of the system messages joined by newlines (where the domain policy is), once per view: the identity,
    confirmation, precondition and permission rules each read it."""
    memo = view.__dict__.get("_system_text")
    if memo is None:
        msgs = view.traj.messages
        memo = view.__dict__["_system_text"] = "\n".join([
            msgs[i]["content"] for i, role in enumerate(view.roles)
            if role == "system" and isinstance(msgs[i].get("content"), str)])
    return memo


def _tool_docs(view: TraceView) -> tuple[set[str], list[str]]:
    """Names of the tools the trace declares or calls, and the declared tools' descriptions; once per view (the
    policy rules each read them: treat both as read-only)."""
    memo = view.__dict__.get("_tool_docs")
    if memo is None:
        memo = view.__dict__["_tool_docs"] = _read_tool_docs(view)
    return memo


def _read_tool_docs(view: TraceView) -> tuple[set[str], list[str]]:
    names, descriptions = {c.name for c in view.calls if c.name}, []
    for tool in view.traj.meta.get("tools") or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict):
            continue
        if isinstance(fn.get("name"), str) and fn["name"]:
            names.add(fn["name"])
        if isinstance(fn.get("description"), str) and len(fn["description"].strip()) >= 8:
            descriptions.append(fn["description"].strip())
    return names, descriptions


def policy_text(view: TraceView) -> str:
    """The system prompt's policy: its text less the lines that document tools (see the module doc)."""
    msgs = view.traj.messages
    text = "\n".join(m["content"] for m in msgs if m.get("role") == "system" and isinstance(m.get("content"), str))
    if not text:
        return ""
    names, descriptions = _tool_docs(view)
    for d in descriptions:
        text = text.replace(d, " ")
    lines = [ln for ln in text.splitlines() if not TOOL_LINE.match(ln[:300])]
    return "\n".join(ln for ln in lines if not any(n in ln for n in names))


# (system prompt, tool descriptions, rule lines, flags by tool names, status preconditions and limits): latest first
_RECENT_RULES: list[tuple[str, tuple[str, ...], tuple[tuple[str, str, bool], ...], dict,
                          tuple[Precondition | Limit, ...]]] = []
RECENT_PROMPTS = 8
NAME_SETS = 64  # per prompt, the flags of this many distinct sets of tool names are kept (``_policy_flags``)


IDENTITY_KINDS = ("", "obtain", "verify", "locate")  # (each asks more than the one before it)


def _identity_kind(line: str) -> str:
    """What a policy line asks of the user's identity: "" (nothing), "obtain" (only the user id: the user saying it
    meets the rule), "verify" (who the user is: authenticate, verify, identify -- met only by a look-up), "locate"
    (verify, even when the user gives the id: ``EVEN_GIVEN``; met only by a look-up that is not keyed by the id the
    user said)."""
    if not IDENTITY_POLICY.search(line):
        return ""
    if not IDENTITY_POLICY.search(OBTAIN_ID_ONLY.sub(" ", line)):
        return "obtain"
    return "locate" if EVEN_GIVEN.search(line) else "verify"


def _rule_entry(system: str, descriptions: tuple[str, ...]) -> tuple[tuple[tuple[str, str, bool], ...], dict,
                                                                     tuple[Precondition | Limit, ...]]:
    """The lines of ``policy_text`` before the tool-name filter that carry a rule: (line, identity kind
    (``_identity_kind``), confirmation); and the prompt's memo of ``_policy_flags``' answers by set of tool names.
    Once per distinct system prompt (and declared tool descriptions) among the last ``RECENT_PROMPTS``: a run's
    prompt is compared with theirs (a length check, then a memory compare) rather than hashed, which would read
    every character of a prompt of several KB for every run. Third: the prompt's status preconditions
    (``Precondition``) and limits (``policy_limits.Limit``: once per thing, a status checked first)."""
    for seen, descs, lines, flags, preconditions in _RECENT_RULES:
        if seen == system and descs == descriptions:
            return lines, flags, preconditions
    lines, preconditions = _read_rule_lines(system, descriptions)
    _RECENT_RULES.insert(0, (system, descriptions, lines, {}, preconditions))
    del _RECENT_RULES[RECENT_PROMPTS:]
    return lines, _RECENT_RULES[0][3], preconditions


def _read_rule_lines(system: str, descriptions: tuple[str, ...]) -> tuple[tuple[tuple[str, str, bool], ...],
                                                                          tuple[Precondition | Limit, ...]]:
    text = system
    for d in descriptions:
        text = text.replace(d, " ")
    out, preconditions, heading = [], [], ""
    for ln in text.splitlines():
        if ln.startswith("#"):
            heading = ln.lstrip("#")  # (the section a "This action can only be called once" is under)
        low = ln.lower()  # (the rules read case-blind: "can only be called ONCE")
        if (listed := TOOL_LINE.match(ln[:300])) is not None:
            if "once" in low:  # the tool's own description: a limit on that tool (``described_limits``)
                preconditions += described_limits(listed.group("quoted") or listed.group("name"), ln[listed.end():])
            continue
        identity, confirm = _identity_kind(ln), asks_confirmation(ln)
        if identity or confirm:
            out.append((ln, identity, confirm))
        status = [_precondition(m) for m in PRECONDITION.finditer(ln)] if "status" in ln else []
        preconditions += status
        if "once" in low or "before" in low:
            preconditions += limits_of(ln, tuple(status), heading)
    return tuple(out), tuple(preconditions)


# A status precondition of a write, as a policy sentence puts it: "An order can only be cancelled if its status is
# 'pending'", "A reservation may only be modified when the reservation's status is 'confirmed' or 'held'" -- the
# thing (group ``thing``), the action done to it (``done``, a participle) and the statuses it must have (``statuses``:
# quoted, or single words joined by "or")
_STATUS_WORD = r"(?:['\"‘“`][^'\"’”`\n]{1,40}['\"’”`]|[a-z]+)"
PRECONDITION = re.compile(
    r"\b(?:an?|the|each|every|any)[^\S\n]+(?P<thing>[a-z]+)[^\S\n]+(?:can|may|must|should|is[^\S\n]+to)[^\S\n]+"
    r"only[^\S\n]+be[^\S\n]+(?P<done>[a-z]+ed)[^\S\n]+(?:if|when|while)[^\S\n]+"
    r"(?:its|the[^\S\n]+(?P=thing)(?:['’]s)?)[^\S\n]+status[^\S\n]+is[^\S\n]+"
    rf"(?P<statuses>{_STATUS_WORD}(?:[^\S\n]*(?:,|or|,[^\S\n]*or)[^\S\n]*(?!and\b){_STATUS_WORD})*)", re.I)
_QUOTED = re.compile(r"['\"‘“`]([^'\"’”`\n]{1,40})['\"’”`]")


class Precondition(NamedTuple):
    """A write's status precondition read from the policy (``PRECONDITION``): a tool whose name holds a word opening
    with ``stem`` (the participle's: "cancel" of "cancelled", "modif" of "modified") and the ``thing`` ("order") acts
    on the thing its ``<thing>_id`` argument names, which must have one of ``statuses``; ``sentence``: the policy's
    words, quoted in the violation."""

    stem: str
    thing: str
    statuses: frozenset[str]
    sentence: str


def _precondition(m: re.Match) -> Precondition:
    done = m.group("done").lower()[:-2]
    stem = done[:-1] if done.endswith("i") else done  # modifi(ed)
    if len(stem) > 3 and stem[-1] == stem[-2]:
        stem = stem[:-1]  # cancell(ed)
    words = m.group("statuses")
    statuses = _QUOTED.findall(words) or re.split(r"\W+", words)
    return Precondition(stem, m.group("thing").lower(), frozenset(w.strip().lower() for w in statuses
                                                                   if w.strip() and w.strip().lower() != "or"),
                        m.group(0))


def precondition_violations(view: TraceView, writes: list[ToolCall],
                            preconditions: tuple[Precondition, ...]) -> list[Violation]:
    """``policy.precondition``: the first write whose tool a status precondition covers (``Precondition``) made on a
    thing whose latest status a tool result before it showed (a JSON object whose ``<thing>_id`` is the write's and
    that has a ``status``) is not one the policy allows -- tried, whether or not the tool refused it: "cancel order
    #W1, status 'delivered'". A thing whose status no result showed breaks no rule here."""
    for w in writes:
        tokens = w.name.lower().split("_")
        for rule in preconditions:
            if not any(t.startswith(rule.stem) for t in tokens) or not (rule.thing in tokens
                                                                        or rule.thing + "s" in tokens):
                continue
            thing_id = (w.args or {}).get(rule.thing + "_id") if isinstance(w.args, dict) else None
            if not isinstance(thing_id, str) or not thing_id:
                continue
            seen = _latest_status(view, w.step, rule.thing + "_id", thing_id)
            if seen is not None and seen[0].strip().lower() not in rule.statuses:
                return [Violation(rule="policy.precondition", step=w.step,
                                  evidence=f"{w.name} on {thing_id}, whose status is '{seen[0]}' (step {seen[1]}); "
                                           f"the policy: {_quote(rule.sentence)}")]
    return []


def _latest_status(view: TraceView, before: int, key: str, value: str) -> tuple[str, int] | None:
    """The ``status`` of the object whose ``key`` is ``value`` in the latest tool result before step ``before`` that
    holds one, and that result's step."""
    msgs, texts = view.traj.messages, view.texts
    for i in range(before - 1, -1, -1):
        text = texts[i]
        if msgs[i].get("role") != "tool" or value not in text or "status" not in text:
            continue
        try:
            found = _status_of(json.loads(text), key, value)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth, no status read
            continue
        if found is not None:
            return found, i
    return None


def _status_of(obj: object, key: str, value: str, depth: int = 0) -> str | None:
    if depth > 8:
        return None
    if isinstance(obj, dict):
        if obj.get(key) == value and isinstance(obj.get("status"), str):
            return obj["status"]
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    for child in children:
        if (found := _status_of(child, key, value, depth + 1)) is not None:
            return found
    return None


def _policy_flags(view: TraceView) -> tuple[str, bool]:
    """(identity kind, confirmation): ``policy_rules(policy_text(view))`` without rebuilding the policy text per
    trajectory: neither rule's pattern crosses a line, so a rule holds when a line of the policy text matches it; only
    the few lines that match are checked against the trace's tool names. A "verify" line outweighs an "obtain" one."""
    system = system_text(view)
    if not system:
        return "", False
    names, descriptions = _tool_docs(view)
    lines, by_names, _ = _rule_entry(system, tuple(descriptions))
    key = frozenset(names)  # the answer depends on the prompt's rule lines and the names alone: kept per prompt, as
    found = by_names.get(key)  # they are (each rule line searched for every name: ~70 searches a tau-bench run)
    if found is None:
        identity, confirm = "", False
        for ln, ident, conf in lines:
            if not any(map(ln.__contains__, names)):
                identity, confirm = max(identity, ident, key=IDENTITY_KINDS.index), confirm or conf
        found = (identity, confirm)
        if len(by_names) < NAME_SETS:
            by_names[key] = found
    return found


def policy_violations(view: TraceView) -> list[Violation]:
    """The domain policy's violations (``policy.identity_check``, ``policy.confirmation``, ``policy.precondition``) by
    the run's domain writes:
    not a coding agent's edits of its workspace by a shell or editor tool, nor its delivery (``_workspace_edit``):
    the task itself -- a coding prompt's "without explicit user confirmation" is about pushing or deleting, not every
    edit."""
    msgs = view.traj.messages
    writes = [c for c in write_calls(view) if not _workspace_edit(view, c)]
    if not writes:
        return []
    identity, confirm = _policy_flags(view)
    out = []
    if identity:
        first = writes[0]
        looked_up = False
        for c in view.calls:  # in step order: the calls before the first write
            if c.step >= first.step:
                break
            if _names_person(c.name) and c not in writes and not _failed(view, c) \
                    and not (identity == "locate" and _reads_said_id(view, c)):
                looked_up = True
                break
        if not looked_up and not (identity == "obtain" and _user_gave_their_id(view, first.step)):
            out.append(Violation(rule="policy.identity_check", step=first.step,
                                 evidence=f"{first.name} before any user lookup: {_quote(first.arguments)}"))
    if confirm:
        roles = view.roles
        for w in writes:
            last_user = next((i for i in range(w.step - 1, -1, -1) if roles[i] == "user"), None)
            said = msgs[last_user].get("content") if last_user is not None else None
            if not isinstance(said, str) or not affirmed(view, last_user) \
                    or not (_yes_to_the_action(view, w) or _record_listed(view, w, last_user)):
                out.append(Violation(rule="policy.confirmation", step=w.step,
                                     evidence=f"{w.name} without an explicit yes; the user last said: "
                                              f"{_quote(said or '(nothing)', 120)}"))
                break
            if (offered := _offered_instead(view, last_user, w)) is not None:
                out.append(Violation(rule="policy.confirmation", step=w.step,
                                     evidence=f"{w.name} after a yes to {offered[0]}; the agent had asked: "
                                              f"{_quote(offered[1], 120)}; the user said: {_quote(said, 80)}"))
                break
            if refuses(view, last_user, tool_kinds(w.name)):
                out.append(Violation(rule="policy.confirmation", step=w.step,
                                     evidence=f"{w.name} after a yes to another action, or a refusal of this one; "
                                              f"the user last said: {_quote(said, 120)}"))
                break
    if (refused := refused_permitted(view, writes)) is not None:
        out.append(Violation(rule="policy.refused_permitted", step=refused[0], evidence=refused[1]))
    rules = _preconditions(view) + _described_limits(view)
    if rules:
        if preconditions := tuple(r for r in rules if isinstance(r, Precondition)):
            out += precondition_violations(view, writes, preconditions)
        if limits := tuple(r for r in rules if isinstance(r, Limit)):
            out += (Violation(rule=rule, step=step, evidence=evidence) for rule, step, evidence in limit_violations(
                view, writes, limits, failed_call_ids(view), lambda before, key, value: _latest_status(
                    view, before, key, value)))
    return out


def write_limits(system: str) -> tuple[Limit, ...]:
    """The limits (``policy_limits.Limit``) a system prompt's policy sets on writes, tool documentation aside as
    ``policy_text`` sets it aside (``benchmarks/tau2_gold_paths.py`` reads which statuses a policy-following agent
    checks first)."""
    return tuple(r for r in _rule_entry(system, ())[2] if isinstance(r, Limit))


def _preconditions(view: TraceView) -> tuple[Precondition | Limit, ...]:
    """The status preconditions and limits of the run's system prompt (``_rule_entry``: read once per prompt)."""
    system = system_text(view)
    if not system:
        return ()
    return _rule_entry(system, tuple(_tool_docs(view)[1]))[2]


_limits_described = lru_cache(maxsize=256)(described_limits)


def _described_limits(view: TraceView) -> tuple[Limit, ...]:
    """The limits the declared tools' own descriptions set on them (``policy_limits.described_limits``: "For a pending
    order, this function can only be called once"), read once per tool and description: ``policy_text`` sets the
    descriptions aside, so no policy line reads them."""
    out: tuple[Limit, ...] = ()
    for tool in view.traj.meta.get("tools") or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(name := fn.get("name"), str) and name \
                and isinstance(description := fn.get("description"), str) and "once" in description.lower():
            out += _limits_described(name, description)
    return out


def _reads_said_id(view: TraceView, c: ToolCall) -> bool:
    """The look-up ``c`` is keyed by ids the user said before it and nothing else: each argument an id (a key ``id``
    or ending in it: ``user_id``, ``customerId``) whose value a user message before the call holds --
    ``get_user_details(user_id=...)`` with the id the user typed, not ``find_user_id_by_email`` nor a look-up of an id
    a tool result showed. (Only under a policy whose check holds even when the user gives the id: ``EVEN_GIVEN``.)"""
    args = _args(c)
    if not args:
        return False
    msgs = view.traj.messages
    said = [t for i in view.user_steps if i < c.step and isinstance(t := msgs[i].get("content"), str)]
    return all(k.lower().endswith("id") and isinstance(v, str) and len(v) >= 3 and any(v in t for t in said)
               for k, v in args.items())


def _offered_instead(view: TraceView, i: int, w: ToolCall) -> tuple[str, str] | None:
    """What the yes at ``i`` consents to, where the agent's reply before it put something else than the write ``w``
    to the user: (what, the reply's end). A look-up offered or another matter asked about (``no_action_offered``:
    "Would you like me to check your other orders?" -- "Yes, send it back."), or leave asked for actions none of
    whose kinds is the write's (``leave_asked``, ``tool_kinds``: "Shall I cancel order #W9?" before a return; a
    change is bought as often as made) in a reply that names none of the write's argument values. None where the
    reply asked leave for the write, or nothing the rule reads (a reply that acknowledged a refusal is read as the
    proposal refused), and for a retry: a write whose tool refused an earlier
    call (the yes the first try had stands for the action the user asked and never got; tau-bench airline 13:3, whose
    user, offered a search after the refusal, asks again for the change it had said yes to)."""
    msgs = view.traj.messages
    j = next((j for j in range(i - 1, -1, -1) if view.roles[j] == "assistant" and view.texts[j].strip()), None)
    if j is None:
        return None
    # a reply that acknowledged a refusal ("Understood, I won't cancel it. Anything else?") proposes nothing: a yes
    # after it takes the refusal back and answers the proposal refused (``detectors._refused_proposal``)
    j = _detectors._refused_proposal(view, j)
    reply = view.texts[j]
    offered = no_action_offered(reply)
    if offered is None:
        # the cheap tests first: the write's values named as written, a kind of action the reply's end names (the
        # asking sentence's are among them), before the asking regex (``leave_asked``, ~130 k instructions)
        kinds = tool_kinds(w.name)
        values = _arg_values(w.args) if kinds else None
        if not kinds or values and _named(msgs, j - 1, j + 1, values) or not kinds_named(reply[-400:]):
            return None
        asked = leave_asked(reply)
        if not asked or not asked.isdisjoint(kinds) or "book" in asked and "change" in kinds \
                or values and _named_loosely(msgs, j - 1, j + 1, values):
            return None
        offered = f"another action ({', '.join(sorted(asked))})"
    if any(c.name == w.name and c.step < w.step and _failed(view, c) for c in view.calls):
        return None  # a retry
    return offered, reply[-120:]


def _yes_to_the_action(view: TraceView, w: ToolCall) -> bool:
    """Is the user's yes before write ``w`` a yes to it: after the user's first message (its request), did the agent
    name something the write does -- one of its argument values -- or does the yes name one itself? A request
    that happens to hold "okay" or "sure" ("... and okay with any color") confirms no listing; a write with no
    argument value has nothing to list."""
    first = next(iter(view.user_steps), None)
    if first is None or first >= w.step:
        return True
    args, msgs = w.args, view.traj.messages
    # the top level's values first (an id, mostly, named in the listing just before the yes); the nested ones are
    # gathered only when none of those was named: the answer is the same, at a fraction of the cost
    if isinstance(args, dict):
        top = [t for v in args.values() if v is not None and not isinstance(v, bool | dict | list)
               and len(t := str(v)) >= 3]
        if top and _named(msgs, first, w.step, top):
            return True
    values = _arg_values(args)
    return not values or _named(msgs, first, w.step, values) or _named_loosely(msgs, first, w.step, values)


def _record_listed(view: TraceView, w: ToolCall, yes: int) -> bool:
    """Did the reply the yes at ``yes`` answers list the record the write ``w`` acts on by what the record holds, not
    by its id (tau-bench airline 31:0: "DEN to MIA (Flight Number: HAT130) ... Please confirm if you would like to
    proceed with the cancellation." -- "Yes, please proceed", then ``cancel_reservation(reservation_id=9HBUV8)``, an id
    no message named)? The policy asks the agent to list the action's details: the record's own contents are those
    details. The record is the result of the latest read call before that reply keyed by the write's id arguments
    alone (``get_reservation_details(reservation_id=9HBUV8)``: each of its arguments one of the write's ``*id``
    arguments, with its value); what it holds is its string values with a letter and a digit (a flight number, an item
    option), 4 characters or more, other than ids (a value under a key ending in "id": the user's, a payment's, which
    other records share). Asked only where ``_yes_to_the_action`` found no value named: it costs nothing elsewhere."""
    args = _args(w)
    if not args:
        return False
    keyed = {k: v for k, v in args.items() if isinstance(v, str) and len(v) >= 3 and k.lower().endswith("id")}
    if not keyed:
        return False
    roles = view.roles
    reply = next((i for i in range(yes - 1, -1, -1) if roles[i] == "assistant" and view.texts[i].strip()), None)
    if reply is None:
        return False
    read = next((c for c in reversed(view.calls) if c.step < reply and (a := _args(c))
                 and all(keyed.get(k) == v for k, v in a.items()) and not _detectors.changes_state(c)), None)
    result = view.results.get(read.id) if read is not None else None
    if result is None or not result[1].lstrip().startswith("{"):
        return False
    try:
        record = json.loads(result[1])
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth, no record read
        return False
    shown = _record_values(record)
    msgs = view.traj.messages
    return bool(shown) and (_named(msgs, reply - 1, reply + 1, shown)
                            or _named_loosely(msgs, reply - 1, reply + 1, shown))


def _record_values(record: object) -> list[str]:
    """A tool result's string values that name a thing of that record (``_record_listed``): 4 characters or more, a
    letter and a digit among them, under a key not ending in "id"; nested dicts and lists read to a depth of 6."""
    out: list[str] = []
    stack: list[tuple[object, int, str]] = [(record, 0, "")]
    while stack:
        x, depth, key = stack.pop()
        if isinstance(x, dict):
            if depth < 6:
                stack.extend((v, depth + 1, str(k)) for k, v in x.items())
        elif isinstance(x, list):
            if depth < 6:
                stack.extend((v, depth + 1, key) for v in x)
        elif isinstance(x, str) and len(x) >= 4 and not key.lower().endswith("id") \
                and any(ch.isdigit() for ch in x) and any(ch.isalpha() for ch in x):
            out.append(x)
    return out


def _named(msgs: list[dict], first: int, step: int, values: list[str]) -> bool:
    """Does a message of the agent or the user (no tool call) after ``first`` and before ``step`` hold one of
    ``values``? Read back from ``step``: the listing is most often just before the yes."""
    for i in range(step - 1, first, -1):
        m = msgs[i]
        content = m.get("content")
        if isinstance(content, str) and not m.get("tool_calls") and m.get("role") in ("assistant", "user"):
            for v in values:
                if v in content:
                    return True
    return False


_MONTH_NUMBER = {**{m[:3]: n for n, m in enumerate(MONTHS, 1)}, **{m: n for n, m in enumerate(MONTHS, 1)}, "sept": 9}
_MONTH_WORD = "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True))
# a date written in words, lower-cased: "may 20", "may 20th, 2024", "sept. 3", "20 may 2024", "the 20th of may"
WORD_DATE = re.compile(rf"\b({_MONTH_WORD})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?"
                       rf"|\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_WORD})\b\.?(?:,?\s+(\d{{4}})\b)?")
ISO_DATE = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:$|[T ])")
NUMBER = re.compile(r"(?<![\w.,])\d[\d,]{0,20}(?:\.\d{1,12})?(?![\w,])")  # "$1,234.00", "1234": not "HAT069"
PLAIN_NUMBER = re.compile(r"-?\d{1,21}(?:\.\d{1,12})?")


def _named_loosely(msgs: list[dict], first: int, step: int, values: list[str]) -> bool:
    """`_named` in any case, a number however written ("$1,234.00" for 1234, "1234.0") and an ISO date as words
    ("May 20", "20th of May, 2024" for 2024-05-20; a year said must be the value's): asked only when no value was
    named as written, so it costs nothing where one was. A number must have 3 digits or more (2.0 is not one)."""
    lowered = [v.lower() for v in values]
    numbers, dates = set(), set()
    for v in values:
        if (d := ISO_DATE.match(v)) is not None:
            dates.add((int(d[2]), int(d[3]), int(d[1])))
        elif PLAIN_NUMBER.fullmatch(v) and len(v.rstrip("0").rstrip(".") if "." in v else v) >= 3:
            numbers.add(Decimal(v))  # exact: two long ids a digit apart are one float
    for i in range(step - 1, first, -1):
        m = msgs[i]
        content = m.get("content")
        if not isinstance(content, str) or m.get("tool_calls") or m.get("role") not in ("assistant", "user"):
            continue
        text = content.lower()
        if any(v in text for v in lowered):
            return True
        if numbers and any(Decimal(n.replace(",", "")) in numbers for n in NUMBER.findall(text)):
            return True
        if dates:
            for d in WORD_DATE.finditer(text):
                month, day, year = (d[1], d[2], d[3]) if d[1] else (d[5], d[4], d[6])
                said = (_MONTH_NUMBER[month], int(day))
                if any(said == (mo, dd) and (year is None or int(year) == yy) for mo, dd, yy in dates):
                    return True
    return False


def _arg_values(args: object) -> list[str]:
    """The scalar values (as text, 3 characters or more) in a call's arguments, nested dicts and lists read to a
    depth of 6; None and booleans are no value."""
    out: list[str] = []
    stack = [(args, 0)]
    while stack:
        x, depth = stack.pop()
        if isinstance(x, dict):
            if depth < 6:
                stack.extend((v, depth + 1) for v in x.values())
        elif isinstance(x, list):
            if depth < 6:
                stack.extend((v, depth + 1) for v in x)
        elif x is not None and not isinstance(x, bool):
            text = str(x)
            if len(text) >= 3:
                out.append(text)
    return out


def _workspace_edit(view: TraceView, c: ToolCall) -> bool:
    """A coding agent's own work, no domain action: a call of a shell tool or of a file editor (an editor's name,
    ``str_replace_editor`` or Claude Code's ``Edit``, with a file path argument: not an ``edit_reservation``), or the
    call that delivers its answer (``finish``): one holding the final answer, or the call the delivered run ended on
    (OpenHands' ``finish``, whose message is a summary: the delivered answer is the patch)."""
    if _detectors.is_shell(c.name):
        return True
    args = c.args if isinstance(c.args, dict) else {}
    # the path test first: a domain write (tau-bench's) names no file, so the name's regex is seldom run
    return (("path" in args or "file_path" in args or "filename" in args)
            and _detectors.EDITOR_TOOL.search(c.name) is not None) or _detectors.delivers(view, c) or _ends_run(view, c)


def _ends_run(view: TraceView, c: ToolCall) -> bool:
    """A coding agent's delivered run ended on the call: no message but its results came after it (OpenHands'
    classic ``finish`` has none, the V1 SDK's a ``FinishObservation`` echoing its message), and the run worked in a
    workspace (a shell or file editor call before it). A domain agent's write the run happened to end on is still
    a write."""
    if view.traj.termination != Termination.delivered:
        return False
    roles = view.roles
    if not all(roles[i] == "tool" for i in range(c.step + 1, len(roles))):
        return False
    is_shell, editor = _detectors.is_shell, _detectors.EDITOR_TOOL.search
    return any(is_shell(x.name) or editor(x.name) is not None for x in view.calls if x.step < c.step)


def policy_violations_of(view: TraceView) -> list[Violation]:
    """``policy_violations(view)``, once per view (the policy detector and the violation log both read it)."""
    memo = view.__dict__.get("_policy_violations")
    if memo is None:
        memo = view.__dict__["_policy_violations"] = policy_violations(view)
    return memo


def violation_log(view: TraceView) -> list[Violation]:
    return sorted(schema_violations(view) + policy_violations_of(view), key=lambda v: (v.step, v.rule))


# detectors imports this module's names at its top, so this one reads detectors' (``changes_state``, ``delivers``, ...)
# through the module, bound here once both are loaded (either may be imported first), not by an ``import`` statement
# inside each function: one costs ~1 microsecond at every call (``_workspace_edit`` runs for each write of a failed run)
from evoharness.diagnosis import detectors as _detectors  # noqa: E402
