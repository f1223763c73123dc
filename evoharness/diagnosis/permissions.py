"""``policy.refused_permitted``: the agent turns down a change that its own domain policy says in so many words the user
may make (issue 13, invariants from the trace itself).

A policy states some changes as plain permissions -- "The user can modify passengers but cannot modify the number of
passengers", "all reservations, including basic economy, can change cabin without changing the flights", "The user
can add but not remove checked bags" (tau-bench airline). ``permissions`` reads them: a sentence that opens (after a
"Label:" at most) with an unqualified subject -- the user, users, customers, you, all / any / every <things> (with an
", including ...," aside) -- then "can", a verb of change (``consent._word_kinds``: change, modify, add, upgrade,
cancel, ...) and its object, the thing (past a determiner and one participle: "checked bags" -> "bag"). Not a qualified
subject ("business flights can always be cancelled", "Other reservations can be modified": a condition on which
things), not a sentence that opens on a condition ("For a pending order, you can ..."), not one holding a condition
word (if, only, unless, when, while, provided, as long as), and not "can only". The same sentences' and the policy's
other prohibitions (``prohibitions``: "cannot modify the number of passengers", "not remove", "Basic economy flights
cannot be modified") say what a refusal may rightly name.

The violation: in a failed run, the first assistant reply before the run's first write that refuses (``_refuses``:
"I'm unable to", "which cannot be modified") and names a thing the policy permits changing, where

- the refusal's own sentence names that thing, or is a blanket one -- the whole thing "cannot be modified" (changed,
  altered, updated), every change at once;
- the refusal's sentence names no action but of the kinds the permission's verb names (``consent.kinds_named``: "I'm
  unable to remove a passenger" refuses a removal, which "can modify passengers" does not permit -- the policy counts
  it a change of the number of passengers);
- the refusal's sentence names nothing a prohibition covers (its object, "number", "flights", or its verb, "remove":
  the agent applied a rule that exists);
- a user turn before it named the thing (the user asked about it); and
- no later write acts on the thing of something that already existed (an argument named for the thing, beside a
  ``*_id`` argument that is not a person's whose value the run had shown before the refusal): the request was not
  served after all (booking a new reservation in its place is not changing the passenger of the old one).

Located at the refusal, with the policy's sentence and the refusal quoted. Read from the policy and the trace alone
(no expected actions, no task ids); a domain whose policy states no such permission (tau retail: "you can take actions
to modify its shipping address" opens on a condition) gets none.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from evoharness.diagnosis.consent import _word_kinds, kinds_named
from evoharness.diagnosis.context import ToolCall, TraceView
from evoharness.diagnosis.policy_limits import stem

_B = r"[^\S\n]+"
_THING_WORD = r"[a-z]+"
_DETERMINER = rf"(?:(?:the|their|a|an|any|its|his|her|your){_B})?"
# an unqualified subject: the user(s), customer(s), you; all / any / every <things>, with an ", including ...," aside
_SUBJECT = (rf"(?:(?:the{_B})?(?:users?|customers?|passengers?|members?|travell?ers?|clients?|callers?)|you"
            rf"|(?:all|any|every){_B}{_THING_WORD}(?:[^\S\n]*,[^\S\n]*including{_B}[^,.;\n]{{1,60}},)?)")
PERMISSION = re.compile(
    rf"^(?:[^.:;\n]{{1,40}}:)?[^\S\n]*(?P<subject>{_SUBJECT}){_B}can{_B}(?:also{_B}|always{_B})?(?P<verb>[a-z]+)"
    rf"(?:{_B}but{_B}not{_B}(?P<negverb>[a-z]+))?{_B}{_DETERMINER}(?:(?P<participle>[a-z]+ed){_B})?"
    rf"(?P<thing>{_THING_WORD})\b", re.I)
# a condition in the sentence: the permission holds only sometimes
_CONDITION = re.compile(r"\b(?:if|only|unless|when|whenever|while|provided|as long as|once)\b", re.I)
# "cannot modify the number of passengers", "not remove checked bags", "cannot add insurance": a verb and its object
PROHIBITED = re.compile(
    rf"\b(?:cannot|can['’]t|can{_B}not|not|never){_B}(?P<verb>[a-z]+){_B}{_DETERMINER}"
    rf"(?:[a-z]+ed{_B})?(?P<thing>{_THING_WORD})\b", re.I)
# "Basic economy flights cannot be modified": the thing, then its participle
PROHIBITED_PASSIVE = re.compile(
    rf"\b(?P<thing>{_THING_WORD}){_B}(?:cannot|can['’]t|can{_B}not|may{_B}not|must{_B}not){_B}be{_B}(?P<verb>[a-z]+)",
    re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")  # (the policy's sentences: read once per prompt)
# a refusal of every change at once: the thing "cannot be modified"
_BLANKET = re.compile(r"\b(?:cannot|can['’]t|can not)\s+be\s+(?:modified|changed|altered|updated)\b(?!\s+to\b)")


def _stem(word: str) -> str:
    """A noun's singular as its stem ("passengers" -> "passenger", "addresses" -> "address", "bags" -> "bag")."""
    w = word.lower()
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


class Permission(NamedTuple):
    """The policy lets its subject ``verb`` the ``thing`` (a stem); ``sentence``: the policy's words."""

    verb: str
    thing: str
    sentence: str
    kinds: frozenset[str] = frozenset()  # the kinds of action the verb names (``consent._word_kinds``)


def read_policy(policy: str) -> tuple[tuple[Permission, ...], tuple[tuple[str, str], ...]]:
    """(permissions, prohibitions) stated in ``policy`` (see the module doc); a prohibition is (the stem of its verb of
    change, the stem of its thing)."""
    permits: list[Permission] = []
    banned: list[tuple[str, str]] = []
    for sentence in _SENTENCE.split(policy):
        s = sentence.strip().lstrip("-*\u2022 ").strip()
        if not s:
            continue
        for m in PROHIBITED.finditer(s):
            if _word_kinds(m.group("verb").lower()) and len(m.group("thing")) >= 3:
                banned.append((stem(m.group("verb")), _stem(m.group("thing"))))
        for m in PROHIBITED_PASSIVE.finditer(s):
            if _word_kinds(stem(m.group("verb"))) or _word_kinds(m.group("verb").lower()):
                banned.append((stem(m.group("verb")), _stem(m.group("thing"))))
        m = PERMISSION.match(s)
        if m is None or _CONDITION.search(s):
            continue
        verb = m.group("verb").lower()
        thing = m.group("thing").lower()
        if not _word_kinds(verb) or _word_kinds(thing) or len(thing) < 3:
            continue
        if m.group("negverb"):
            banned.append((stem(m.group("negverb")), _stem(thing)))
        permits.append(Permission(verb=verb, thing=_stem(thing), sentence=s, kinds=_word_kinds(verb)))
    return tuple(permits), tuple(dict.fromkeys(banned))


def _applies_a_prohibition(sentence: str, permits: tuple[Permission, ...],
                           banned: tuple[tuple[str, str], ...]) -> bool:
    """Does a refusal's ``sentence`` name what a prohibition covers: its thing, where no permission is about that thing
    ("the number of passengers", "basic economy flights"), or its verb and its thing ("remove checked bags")?"""
    permitted = {p.thing for p in permits}
    return any(_names(sentence, thing) and (thing not in permitted or _names(sentence, verb))
               for verb, thing in banned)


def _names(text: str, stem: str) -> bool:
    """Does a word of ``text`` (lower case) open with ``stem``?"""
    i = text.find(stem)
    while i >= 0:
        if i == 0 or not text[i - 1].isalnum():
            return True
        i = text.find(stem, i + 1)
    return False


def _sentence_at(low: str, at: int) -> str:
    """The sentence of ``low`` around position ``at`` (a sentence ends at a newline or at ". " / "! " / "? ")."""
    start = max(low.rfind("\n", 0, at), *(low.rfind(stop, 0, at) + 1 for stop in _STOPS)) + 1
    ends = [e for e in (low.find("\n", at), *(low.find(stop, at) for stop in _STOPS)) if e >= 0]
    return low[start:min(ends) + 1 if ends else len(low)]


def _refusal_sentence(low: str) -> str | None:
    """The first sentence of ``low`` (a reply, lower case) that refuses (``_refuses``), if one does: the sentences
    around each refusal word (substring searches), not a split of the whole reply -- a regex walks every position of
    a reply listing flights, ~100k instructions, where this reads a few sentences."""
    refuses = _invariants._detectors._refuses
    found: list[tuple[int, str]] = []
    for word in _REFUSAL_WORDS_LOW:
        at = low.find(word)
        while at >= 0:
            sentence = _sentence_at(low, at)
            if refuses(sentence):
                found.append((at, sentence))
                break
            at = low.find(word, at + len(word))
    return min(found)[1] if found else None


def _serves(view: TraceView, w: ToolCall, thing: str, before: int) -> bool:
    """Does write ``w`` act on ``thing`` of something the run had shown before step ``before``: an argument named for
    the thing beside a ``*_id`` argument (not a person's) whose value a message before ``before`` holds?"""
    args = w.args if isinstance(w.args, dict) else {}
    if not any(str(k).lower().startswith(thing) for k in args):
        return False
    seen = "\n".join(t for t in view.texts[:before] if isinstance(t, str))
    person = _invariants._names_person
    return any(str(k).endswith("_id") and not person(str(k)[:-3]) and isinstance(v, str) and v and v in seen
               for k, v in args.items())


# the words every refusal ``_refuses`` reads holds, as written in any case but all capitals
_REFUSAL_WORDS = ("nable", "ot able", "annot", "an't", "an\u2019t", "an not")
_REFUSAL_WORDS_LOW = ("unable", "not able", "cannot", "can't", "can\u2019t", "can not")
_STOPS = (". ", "! ", "? ")
# (system prompt, tool descriptions, its permissions and prohibitions): the latest few prompts read
_RECENT: list[tuple[str, tuple[str, ...], tuple[tuple[Permission, ...], tuple[tuple[str, str], ...]]]] = []
_RECENT_PROMPTS = 8


def _policy_of(view: TraceView) -> tuple[tuple[Permission, ...], tuple[tuple[str, str], ...]]:
    """``read_policy(invariants.policy_text(view))``, once per distinct system prompt and tool descriptions among the
    last few: a run's prompt is compared with theirs (a length check, then a memory compare), where building the policy
    text anew cost ~70 microseconds a run."""
    system = _invariants.system_text(view)  # (once per view: the other policy rules read it too)
    if not system:
        return (), ()
    tools = view.traj.meta.get("tools")
    # (the same as ``_tool_docs``' descriptions: no declared tool, no description)
    descriptions = tuple(_invariants._tool_docs(view)[1]) if tools else ()
    for seen, descs, parsed in _RECENT:
        if seen == system and descs == descriptions:
            return parsed
    parsed = read_policy(_invariants.policy_text(view))
    _RECENT.insert(0, (system, descriptions, parsed))
    del _RECENT[_RECENT_PROMPTS:]
    return parsed


def refused_permitted(view: TraceView, writes: list[ToolCall]) -> tuple[int, str] | None:
    """(step, evidence) of the first refusal of a change the policy (``invariants.policy_text``) permits, before the
    first of ``writes`` (the run's domain writes; see the module doc), or None. The policy is read only where a reply
    refuses."""
    if not writes or not view.user_steps:
        return None
    first_write = writes[0].step
    permits, banned = _policy_of(view)
    if not permits:
        return None
    # the replies after the first user turn that names a permitted thing (user turns are short; replies listing
    # flights are long, and a substring search that fails reads all of one); the turns lower-cased once per view
    # (``lowered``: the consent rules read them so too)
    texts = view.texts
    said = [u for u in view.user_steps if u < first_write]
    joined = "\n".join([texts[u] for u in said])  # (first their words as written, joined: a few C scans)
    if not any(p.thing in joined or p.thing.capitalize() in joined or p.thing.upper() in joined for p in permits):
        return None
    asks = next((u for u in said if any(_names(view.lowered(u), p.thing) for p in permits)), None)
    if asks is None:
        return None
    replies = [i for i in view.assistant_steps if asks < i < first_write and texts[i]]
    # a word every refusal holds (``_refuses``' own gate, on the text as written: "Unable", "cannot", "Can't"), in
    # any of those replies (their words joined: a few C scans), then reply by reply: the word, a permitted thing named,
    # then the refusal's sentence
    if not any(map("\n".join([texts[i] for i in replies]).__contains__, _REFUSAL_WORDS)):
        return None
    for i in replies:
        if not any(map(texts[i].__contains__, _REFUSAL_WORDS)):
            continue
        low = view.lowered(i)
        if not any(_names(low, p.thing) for p in permits):
            continue
        sentence = _refusal_sentence(low)
        if sentence is None:
            continue
        if _applies_a_prohibition(sentence, permits, banned):
            continue  # the refusal names what a prohibition covers: the agent applied a rule that exists
        asked = " ".join([view.lowered(u) for u in said if u < i])
        blanket = _BLANKET.search(sentence) is not None
        refused_kinds: frozenset[str] | None = None
        # the things the refusal's sentence names first, then those a blanket refusal covers elsewhere in the reply
        for p in sorted(permits, key=lambda p: not _names(sentence, p.thing)):
            if not (_names(sentence, p.thing) or (blanket and _names(low, p.thing))) or not _names(asked, p.thing):
                continue
            if refused_kinds is None:  # (a word's kinds walk ~100 stems: read only for a refusal that may count)
                refused_kinds = kinds_named(sentence)
            if not refused_kinds <= p.kinds:
                continue  # it refuses another action than the one permitted ("unable to remove a passenger")
            if any(_serves(view, w, p.thing, i) for w in writes if w.step > i):
                continue
            quote = " ".join(view.texts[i].split())[:150]
            return i, f"refused a change the policy permits ({p.sentence[:120]!r}): {quote}"
    return None


# invariants imports this module at its top, so its names (and detectors', which it binds as ``_detectors``) are read
# through the module, bound here once both are loaded, not by an ``import`` inside each function (one costs ~1
# microsecond at every call)
from evoharness.diagnosis import invariants as _invariants  # noqa: E402
