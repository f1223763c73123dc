"""Two rules over a domain's writes read from its policy's sentences (issue 13), beside the status preconditions
(``invariants.PRECONDITION``), read once per prompt with them (``invariants._read_rule_lines``):

- ``policy.once``: the policy says a tool, or an action on a thing, can only be done once (``ONCE``: "Exchange or
  modify order tools can only be called once per order", tau2 retail; "An order can only be modified or exchanged
  once"), and a write of a tool it covers (``Limit``: a word of the tool's name opens with the action's stem, and one
  is the thing's word) is made on the thing its ``<thing>_id`` argument names after a call of the same tool on it
  that succeeded. Per tool: tau2's own gold actions change an order's address and then its items (14 of its 114 retail
  tasks), which its tools allow, so "modify order tools ... once" is read as each such tool once per order;
- ``policy.check_first``: the policy says to check a thing's status before an action (``CHECK_FIRST``: "An order can
  only be cancelled if its status is 'pending', and you should check its status before taking the action"; "You
  should always check that the bill is overdue before sending a payment request", tau2 telecom), and a write of a tool
  it covers is made on a thing whose status no tool result before it showed (a JSON object with the write's
  ``<thing>_id`` and a ``status``).

Each violation has the write's step and quotes the policy's sentence.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from evoharness.diagnosis.context import ToolCall, TraceView

_B = r"[^\S\n]+"  # blanks within a line: no rule crosses one
_JOINED = rf"(?:[^\S\n]*,[^\S\n]*(?:(?:or|and){_B})?|{_B}(?:or|and){_B}|[^\S\n]*/[^\S\n]*)"
# "once" said as "once only", not as a conjunction ("can only be issued once the item is returned", "once a day"): a
# stop, or a word that goes on to the limit ("per order", "by the agent", "and will change ...")
_ONCE_ONLY = (r"once\b(?![^\S\n]+(?!(?:per|for|on|by|in|within|during|and|or|but|so|after|if|unless)\b)[a-z])")
# "Exchange or modify order tools can only be called once per order": verbs, the thing, a tool word, "once", and the
# thing each call is counted on; "An order can only be modified or exchanged once": the thing, then its participles
ONCE = re.compile(
    rf"\b(?P<verbs>[a-z]+(?:{_JOINED}[a-z]+)*){_B}(?P<thing>[a-z]+){_B}(?:tools?|actions?|functions?|calls?|"
    rf"operations?){_B}(?:can|may|should|must){_B}only{_B}be{_B}(?:called|used|invoked|made|run|performed|done|"
    rf"taken){_B}{_ONCE_ONLY}(?:{_B}(?:per|for|on){_B}(?:(?:an?|each|every|the|any){_B})?(?P<per>[a-z]+))?"
    rf"|\b(?:an?|the|each|every|any){_B}(?P<thing2>[a-z]+){_B}(?:can|may|should|must){_B}only{_B}be{_B}"
    rf"(?P<done>[a-z]+ed(?:{_JOINED}[a-z]+ed)*){_B}{_ONCE_ONLY}", re.I)
# "This action can only be called once" (tau2 retail, under the heading "### Modify items"): the action is the
# heading's, its first word the verb and its last the thing ("Modify items": modify_pending_order_items)
THIS_ONCE = re.compile(
    rf"\b(?:this|the|that){_B}(?:action|tool|function|operation){_B}(?:can|may|should|must){_B}only{_B}be{_B}"
    rf"(?:called|used|invoked|made|run|performed|done|taken){_B}{_ONCE_ONLY}(?:{_B}(?:per|for|on){_B}"
    rf"(?:(?:an?|each|every|the|any){_B})?(?P<per>[a-z]+))?", re.I)
_HEADING_WORDS = re.compile(r"[a-z]+", re.I)
_SENTENCE_END = re.compile(r"[.!?\n]")
# participles that name no action of their own ("return or exchange can be only done once": the action is the verbs')
_DOING_IN_GENERAL = frozenset(("called", "used", "invoked", "made", "run", "performed", "done", "taken", "executed",
                               "applied"))
# A tool's own description on the tool itself: "For a pending order, this function can only be called once" (tau2's
# modify_pending_order_items), "For a delivered order, return or exchange can be only done once by the agent" (its
# exchange_delivered_order_items: the action by its verbs, one of them a word of the tool's name), "Tickets can only
# be reopened once" (reopen_ticket: the participle's); "once" said as "once only" (``_ONCE_ONLY``)
DESCRIBED_ONCE = re.compile(
    rf"\b(?:(?:this|the|that){_B}(?:action|tool|function|operation|method|call|endpoint)"
    rf"|(?P<verbs>[a-z]+(?:{_JOINED}[a-z]+)*)){_B}(?:can|may|should|must){_B}(?:only{_B}be|be{_B}only){_B}"
    rf"(?P<done>[a-z]+ed|done|made|run|taken){_B}{_ONCE_ONLY}"
    rf"(?:{_B}(?:per|for|on){_B}(?:(?:an?|each|every|the|any){_B})?(?P<per>[a-z]+))?", re.I)
# the verbs of checking a status: "check", "verify", "look up", "double-check", "confirm" (the user's yes as often: read
# only with a thing's status or state after it, and no person in the sentence -- "confirm the details with the user
# before booking" asks the user's yes, the confirmation rule's)
_CHECK = rf"(?:double[^\S\n]*-?[^\S\n]*)?(?:check|verify|look{_B}up|confirm)"
# "..., and you should check its status before taking the action" after a status precondition (the action and the
# thing are the precondition's); "check that the bill is overdue before sending a payment request": the thing, the
# gerund's stem and the word after it (a tool's words: send_payment_request); "look up the order's status before
# cancelling it", "verify the status of the order before ...": the thing named by its status ("it": the thing)
CHECK_ACTION = re.compile(rf"\b{_CHECK}{_B}(?:its|the{_B}[a-z]+(?:['’]s)?){_B}status{_B}before{_B}"
                          rf"(?:taking|doing|performing|making|carrying{_B}out){_B}(?:the|this|that|any|such){_B}"
                          r"action\b", re.I)
_BEFORE_DOING = rf"\bbefore{_B}(?P<doing>[a-z]+ing){_B}(?:(?:a|an|the|any|their|its){_B})?(?P<object>[a-z]+)"
CHECK_FIRST = re.compile(
    rf"\b{_CHECK}{_B}(?:(?:(?:that|if|whether){_B})?(?:the|its|their|a|an){_B}(?P<thing>[a-z]+){_B}(?:is|has|was)\b"
    rf"[^.;\n]{{0,60}}?|(?:the{_B}(?P<owner>[a-z]+)['’]s{_B}status|the{_B}(?P<named>[a-z]+){_B}status"
    rf"|the{_B}status{_B}of{_B}(?:the|an?|their|its){_B}(?P<of>[a-z]+)){_B}){_BEFORE_DOING}", re.I)
# a person's status is no thing's: "verify that the user is the account holder before changing the order" is the
# identity rule's
_PERSONS = frozenset(("user", "customer", "caller", "client", "passenger", "member", "person", "guest", "patient",
                      "subscriber", "traveler", "traveller", "holder", "owner"))
_PRONOUNS = frozenset(("it", "them", "this", "that"))
_WORDS = re.compile(r"[a-z]+")


def stem(word: str) -> str:
    """A verb's stem, the same for its forms a tool name uses: "modified", "modify" -> "modif"; "cancelled",
    "cancel" -> "cancel"; "exchanged", "exchange" -> "exchang"; "sending" -> "send"."""
    w = word.lower()
    for end in ("ed", "ing"):
        if w.endswith(end) and len(w) - len(end) >= 3:
            w = w[:-len(end)]
            if w.endswith("i"):
                w = w[:-1]  # modifi(ed)
            elif len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiou":
                w = w[:-1]  # cancell(ed)
            return w
    return w[:-1] if w.endswith(("y", "e")) and len(w) > 3 else w


class Limit(NamedTuple):
    """A rule over the writes of a tool whose name holds a word opening with one of ``stems`` and the ``thing``
    (or its plural), on the thing its ``<key>_id`` argument names: ``rule`` "policy.once" or "policy.check_first"
    (``checked``: the thing whose status must be shown, by its ``<checked>_id``); ``sentence``: the policy's words."""

    rule: str
    stems: frozenset[str]
    thing: str
    key: str
    checked: str
    sentence: str
    tool: str = ""  # a limit a tool's own description sets: that tool alone (``described_limits``)

    def covers(self, name: str) -> bool:
        if self.tool:
            return name == self.tool
        tokens = name.lower().split("_")
        return (self.thing in tokens or self.thing + "s" in tokens) \
            and any(t.startswith(s) for t in tokens for s in self.stems)


def _stems(words: str) -> frozenset[str]:
    return frozenset(s for w in re.split(r"\W+|\b(?:or|and)\b", words.lower()) if w.strip()
                     and len(s := stem(w.strip())) >= 3)


def limits_of(line: str, preconditions: tuple, heading: str = "") -> list[Limit]:
    """The ``policy.once`` and ``policy.check_first`` rules of a policy line (``preconditions``: the line's status
    preconditions, ``invariants.Precondition``, whose action a "check its status before taking the action" names;
    ``heading``: the markdown heading the line is under, whose action "This action can only be called once" limits)."""
    out = []
    low = line.lower()
    if "once" in low and heading:
        words = _HEADING_WORDS.findall(heading)
        for m in THIS_ONCE.finditer(line) if len(words) >= 2 else ():
            # per the thing the write names by a word of its own name (modify_pending_order_items: its order_id)
            out.append(Limit("policy.once", _stems(words[0]), words[-1].lower(), (m.group("per") or "").lower(), "",
                             f"{heading.strip()}: {m.group(0)}"))
    if "once" in low:
        for m in ONCE.finditer(line):
            if m.group("verbs") is not None:
                thing = m.group("thing").lower()
                out.append(Limit("policy.once", _stems(m.group("verbs")), thing, (m.group("per") or thing).lower(),
                                 "", m.group(0)))
            else:
                thing = m.group("thing2").lower()
                out.append(Limit("policy.once", _stems(m.group("done")), thing, thing, "", m.group(0)))
    if "before" in low and ("check" in low or "verify" in low or "look" in low or "confirm" in low):
        if preconditions and CHECK_ACTION.search(line) is not None:
            out += (Limit("policy.check_first", frozenset((p.stem,)), p.thing, p.thing, p.thing, line.strip())
                    for p in preconditions)
        for m in CHECK_FIRST.finditer(line):
            thing = (m.group("thing") or m.group("owner") or m.group("named") or m.group("of")).lower()
            obj = m.group("object").lower()
            if thing not in _PERSONS and _PERSONS.isdisjoint(_WORDS.findall(m.group(0).lower())):
                out.append(Limit("policy.check_first", frozenset((stem(m.group("doing")),)),
                                 thing if obj in _PRONOUNS else obj, thing, thing, m.group(0)))
    return out


def described_limits(tool: str, description: str) -> tuple[Limit, ...]:
    """The ``policy.once`` limits a tool's own description sets on it (``DESCRIBED_ONCE``: "this function can only be
    called once", or its action put by a verb that opens or ends the tool's name, the participle's or, where that is a
    verb of doing in general, the subject's: "Tickets can only be reopened once", "return or exchange can be only done
    once"): on that tool alone, once per the thing its "per" names, else per the thing the tool's own ``<word>_id``
    argument names (``_thing_id``)."""
    if "once" not in description.lower():  # (DESCRIBED_ONCE is case-blind: "can only be called ONCE")
        return ()
    # a tool's name puts its action first (exchange_delivered_order_items) or last (order_items_modify, flight_cancel)
    words = _WORDS.findall(tool.lower())
    ends = (words[0], words[-1]) if words else ()
    out = []
    for m in DESCRIBED_ONCE.finditer(description):
        if m.group("verbs") is not None:
            done = m.group("done").lower()
            stems = _stems(m.group("verbs")) if done in _DOING_IN_GENERAL else _stems(done)
            if not any(w.startswith(s) for w in ends for s in stems):
                continue  # another action's limit
        start = max(description.rfind(c, 0, m.start()) for c in ".!?\n") + 1
        end = _SENTENCE_END.search(description, m.end())
        sentence = description[start:end.start() if end is not None else len(description)]
        out.append(Limit("policy.once", frozenset(), "", (m.group("per") or "").lower(), "",
                         f"{tool}'s description: {' '.join(sentence.split())}", tool))
    return tuple(out)


def _thing_id(w: ToolCall, key: str) -> str | None:
    """The id the write's ``<key>_id`` argument names; for no ``key``, its ``<word>_id`` argument whose word is one of
    the tool name's (``modify_pending_order_items``: ``order_id``, not ``payment_method_id``)."""
    if not isinstance(w.args, dict):
        return None
    if not key:
        tokens = w.name.lower().split("_")
        key = next((k[:-3] for k in w.args if k.endswith("_id") and k[:-3] in tokens), "")
        if not key:
            return None
    value = w.args.get(key + "_id")
    return value if isinstance(value, str) and value else None


def limit_violations(view: TraceView, writes: list[ToolCall], limits: tuple[Limit, ...], failed: set[str],
                     latest_status) -> list[tuple[str, int, str]]:
    """(rule, step, evidence) of the first write that breaks each kind of limit (``Limit``), in step order.
    ``failed``: the ids of the calls whose result says they failed; ``latest_status(before, key, value)``: the status
    a tool result before step ``before`` showed of the object whose ``key`` is ``value``, and its step, or None."""
    out: dict[str, tuple[str, int, str]] = {}
    done: dict[tuple[str, str], int] = {}  # (tool, thing id) -> the step of its call that succeeded
    for w in writes:
        for lim in limits:
            if lim.rule in out or not lim.covers(w.name) or (thing_id := _thing_id(w, lim.key)) is None:
                continue
            if lim.rule == "policy.once":
                if (w.name, thing_id) in done:
                    out[lim.rule] = (lim.rule, w.step, f"{w.name} on {thing_id} again after its call at step "
                                                       f"{done[w.name, thing_id]}; the policy: {_quote(lim.sentence)}")
            else:
                checked = _thing_id(w, lim.checked)
                if checked is not None and latest_status(w.step, lim.checked + "_id", checked) is None:
                    out[lim.rule] = (lim.rule, w.step, f"{w.name} on {checked}, whose status no tool result before "
                                                       f"it showed; the policy: {_quote(lim.sentence)}")
        if w.id not in failed:
            for lim in limits:
                if lim.rule == "policy.once" and lim.covers(w.name) and (thing_id := _thing_id(w, lim.key)):
                    done.setdefault((w.name, thing_id), w.step)
    return sorted(out.values(), key=lambda v: v[1])


def _quote(text: str, limit: int = 160) -> str:
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
