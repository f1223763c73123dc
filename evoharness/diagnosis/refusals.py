"""F4.refused_request: a failed conversation whose agent turned down a change as a whole, then wrote something else.

``F4.stalled`` places a run that wrote nothing at the agent's first refusal. A run that did write is placed at its
first write (``F4.first_write``) or at a rule its writes broke. But where the agent declined a change the user asked
for by a blanket word on the thing's state -- "the reservation is in basic economy, which cannot be modified" to a user
who asked to change its passenger -- and then wrote something else in its place (booked a new reservation; upgraded
the cabin and never changed the passenger), the writes follow from that refusal, and the refusal is where the run left
the user's request. Read from the trace alone: the user's words, the agent's replies, the names of the tools it called
-- no expected actions.

The signal: the first assistant reply before the run's first write that says the thing "cannot be modified" (or
changed, altered, updated: ``blanket``, a refusal of every change at once, not of the one asked) where a thing the
user asked to act on before it (``requested_objects``: the object of a verb of action, "change the passenger", "add
three checked bags") is acted on by no write after it -- no argument name of a later write holds the thing's word
("passenger": no write with a ``passengers`` argument; read from the arguments, not the tool's name, so a tool renamed
keeps the label). A thing is kept only where the domain policy (the system
prompt) names it: a policy names what its actions are done to (passengers, bags, flights,
orders, items, addresses, payment), not the products or places a user mentions (the system prompt is read whole: where
it documents tools, what they act on counts too). Not a refusal of the very action
asked ("I'm unable to remove a passenger", "I cannot cancel individual flight segments"): the agent judged that
request, rightly as often as not (tau-bench airline: a passenger cannot be removed), and the run failed elsewhere;
nor one whose request a later write served. Failed delivered single-agent conversations with a write only (no write:
``F4.stalled``'s); a reward-1 run's label cannot change.
"""

from __future__ import annotations

import re

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.consent import _word_kinds
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import _failed_delivery, _refuses, quote
from evoharness.diagnosis.invariants import write_calls
from evoharness.diagnosis.models import FailureClass, Signal

F4 = FailureClass.F4
_WORDS = re.compile(r"[a-z]+")
# the words between a verb of action and its object: determiners, possessives, numbers, and the qualifiers a user puts
# before the thing ("the checked bags", "my upcoming trip")
_BEFORE_OBJECT = frozenset((
    "the", "my", "our", "a", "an", "this", "that", "these", "those", "all", "both", "his", "her", "their", "your",
    "some", "any", "one", "two", "three", "four", "five", "six", "another", "extra", "more", "new", "current",
    "upcoming", "existing", "other"))
_MIN_OBJECT = 3  # letters: "bag" is a thing, "it" / "me" are not


def _stem(word: str) -> str:
    """A noun's singular as its stem ("passengers" -> "passenger", "addresses" -> "address", "bags" -> "bag")."""
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def requested_objects(text: str) -> list[str]:
    """The stems of the things ``text`` asks to act on: each word naming a kind of action (``consent._KINDS``:
    change, upgrade, add, cancel, return, exchange, ...) followed, past ``_BEFORE_OBJECT`` words and one participle
    ("checked"), by a word that names no kind itself. "I need to change the passenger on my trip" -> ["passenger"];
    "upgrade to economy" -> [] (a target, not a thing acted on)."""
    words = _WORDS.findall(text.lower())
    out: list[str] = []
    for k in range(1, len(words)):
        # an object phrase opens here (a determiner, a number ...) after a verb of action: the verb is looked up only
        # before such a word (a kind lookup walks ~100 stems on a word's first sight)
        if words[k] not in _BEFORE_OBJECT or words[k - 1] in _BEFORE_OBJECT or not _word_kinds(words[k - 1]):
            continue
        j = k
        while j < len(words) and words[j] in _BEFORE_OBJECT:
            j += 1
        if j + 1 < len(words) and words[j].endswith("ed") and not _word_kinds(words[j]):
            j += 1  # "checked bags", "booked flight"
        if j < len(words) and len(words[j]) >= _MIN_OBJECT and not _word_kinds(words[j]):
            out.append(_stem(words[j]))
    return out


_NEGATED_BE = ("cannot be ", "can't be ", "can\u2019t be ", "can not be ", "Cannot be ", "Can't be ", "Can\u2019t be ")
_ANY_CHANGE = ("modified", "changed", "altered", "updated")


def blanket(text: str) -> bool:
    """Does ``text`` say a thing "cannot be modified" (changed, altered, updated; "can't be", "can not be"), as written
    or opening a sentence ("Cannot be ...")? Substring searches, not a regex: a case-blind regex run over every reply of
    every failed run cost ~10 M instructions a pass over tau-bench airline, where these cost a fraction."""
    for neg in _NEGATED_BE:
        i = text.find(neg)
        while i >= 0:
            end = i + len(neg)
            if i == 0 or not text[i - 1].isalnum():
                for word in _ANY_CHANGE:
                    if text.startswith(word, end) and not text[end + len(word):end + len(word) + 1].isalnum():
                        return True
            i = text.find(neg, end)
    return False


def _opens_a_word(text: str, stem: str) -> bool:
    """Does ``stem`` open a word of ``text`` ("passenger" in "passengers")? A substring search, not a regex per stem (a
    compile costs ~2 ms: more than the rule's reading of a run)."""
    i = text.find(stem)
    while i >= 0:
        if i == 0 or not text[i - 1].isalnum():
            return True
        i = text.find(stem, i + 1)
    return False


def _keys(args: object, depth: int = 0) -> list[str]:
    """The argument names of a call's parsed arguments, nested ones too ("passengers", "total_baggages",
    "payment_id", "item_ids"): what a write acts on, whatever its tool is called."""
    if depth > 4:
        return []
    if isinstance(args, dict):
        return [str(k) for k in args] + [k for v in args.values() for k in _keys(v, depth + 1)]
    if isinstance(args, list):
        return [k for v in args[:50] for k in _keys(v, depth + 1)]
    return []


class RefusedRequestDetector:
    id = "F4.refused_request"
    failure_class = F4
    skips_healthy = True  # returns nothing on a Healthy run (its label cannot change): the labeller does not call it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        if not _failed_delivery(view, cfg) or not view.user_steps or not view.assistant_steps:
            return []
        msgs, texts = view.traj.messages, view.texts
        if msgs[view.assistant_steps[0]].get("name"):
            return []  # a multi-agent log: no user to decline
        writes = write_calls(view)
        if not writes:
            return []  # a run that wrote nothing is F4.stalled's
        first = writes[0].step
        # the replies before the first write only (a scan of every reply of every failed run cost ~20 M instructions a
        # pass over tau-bench airline)
        # (every negation ``blanket`` reads ends in "t be ": one scan of a reply, not seven)
        blanket_steps = [i for i in view.assistant_steps if i < first and "t be " in texts[i] and blanket(texts[i])]
        refusals = [i for i in blanket_steps if _refuses(view.lowered(i))]
        if not refusals:
            return []
        policy: str | None = None
        for r in refusals:
            asked = dict.fromkeys(s for u in view.user_steps if u < r for s in requested_objects(view.texts[u]))
            keys = " ".join(k for w in writes if w.step > r for k in _keys(w.args)).lower()
            unserved = [s for s in asked if s not in keys]
            if not unserved:
                continue
            if policy is None:  # the system prompt as it is (its tool documentation, where it has some, names what the
                # tools act on as well): ``invariants.policy_text`` strips that at ~0.5 M instructions a run
                policy = "\n".join(m["content"] for m in msgs if m.get("role") == "system"
                                   and isinstance(m.get("content"), str)).lower()
            named = [s for s in unserved if _opens_a_word(policy, s)]
            if named:
                later = ", ".join(dict.fromkeys(w.name for w in writes if w.step > r)) or "none"
                return [Signal(id=self.id, failure_class=F4, step=r,
                               evidence=f"declined every change before the first write, and no later write acts on the "
                                        f"{named[0]} the user asked about (later writes: {later}): "
                                        f"{quote(view.texts[r], 150)}")]
        return []
