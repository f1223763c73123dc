"""The user's yes: whether a user message consents to what the agent's reply before it asked leave for.

Read by the confirmation policy (``invariants.policy_violations``), by where a confirmed write was decided
(``detectors.confirmed_proposal``) and by the user who says yes and leaves (``environment.UserQuitDetector``):

- ``affirmative``: a word of assent ("yes", "go ahead", "sure", "absolutely", "sounds good"), outside the phrases
  that hold one without saying yes ("make sure", "not sure", "I don't agree"), outside a question ("Is this
  approved?": ``unasked``), and no decline ("No, that's okay") unless an explicit yes overrides it;
- ``affirmed``: ``affirmative``, or a request to do what the agent's reply before it asked leave for
  (``requests_act``, ``asks_leave``: "Shall I proceed?" -- "Please make the change.");
- ``accepts``: ``affirmed``, or a choice among what the reply offered (``CHOICE``: "I'd like to go with Option 1").
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from functools import lru_cache

from evoharness.diagnosis.context import TraceView
from evoharness.traces.patterns import gate_text

# A user's yes, in the words of assent English has for it (a general vocabulary, not one benchmark's replies): yes and
# its informal forms, confirm, go ahead, proceed, sure, ok, correct, do it -- and alright, agreed, approved, sounds
# good, that works, works for me, go for it, let's do it, by all means, that's right, and absolutely, definitely,
# certainly, of course said as the answer (a stop, a comma or the end right after it: "Absolutely.", "Of course, go
# on"), not as an adverb ("I'll definitely reach out", "I absolutely need a refund"; no blank before the stop, so that
# cutting "absolutely not" out of "definitely absolutely not." makes no new yes)
AFFIRMATIVE = re.compile(
    r"\b(yes|yeah|yep|yup|confirm(ed)?|go ahead|proceed|please do|sure|ok(ay)?|correct|do it|alright|all right|"
    # (each alternative opening with its literal, no group: the engine then skips to their first letters)
    r"absolutely(?=[.,;:!]|$)|definitely(?=[.,;:!]|$)|certainly(?=[.,;:!]|$)|of course(?=[.,;:!]|$)|agree(d)?|"
    r"approve(d)?|sounds (?:good|great|fine)|that works|works for me|go for it|let['’]?s do (?:it|that|this)|"
    r"by all means|that['’]?s right|that is right)\b", re.I)
# AFFIRMATIVE case-sensitive, for a text's ``gate_text`` (lower-cased, no character that folds onto an ASCII letter):
# the same matches at the same places there (str.lower keeps each such text's length and every character's \w-ness;
# tests/diagnosis/test_diagnosis_fast_paths.py), ~10x faster than the case-blind search of the text
_AFFIRMATIVE_LOW = re.compile(AFFIRMATIVE.pattern)
# phrases that hold an affirmative word but say no yes: "make sure", "I'm not sure", "be sure", "that's not correct",
# "don't proceed yet" (the word "sure" in "make sure the fee is right" is no confirmation); cut before AFFIRMATIVE
NOT_AN_ANSWER = re.compile(
    # an intensifier that goes on to a negation, a "that's right" (or correct) that a negation frames: no assent ("I
    # definitely do not want that", "Of course I don't want to cancel", "I don't think that's right", "I'm not sure
    # it's correct"); at most two words between, none a yes, and no comma ("Absolutely, go ahead, but don't ..."
    # says yes)
    r"\b(?:absolutely|definitely|certainly|of course)\s+(?:(?!(?:yes|yeah|yep|yup)\b)\w+\s+){0,2}?"
    r"(?:not|never|\w+n['’]t)\b"
    # (with the assent word the negation governs: "absolutely never agree" leaves no "agree" behind)
    r"(?:\s+(?:really\s+|yet\s+)?(?:agree(?:d)?|approve(?:d)?|alright|all right|go ahead|proceed|confirm(?:ed)?|"
    r"do it|sure|correct|ok(?:ay)?)\b)?"
    r"|\b(?:not|never|\w+n['’]t)\s+(?:(?!(?:yes|yeah|yep|yup)\b)\w+\s+){0,2}?(?:that['’]?s|that\s+is|it['’]?s|it\s+is)\s+"
    r"(?:right|correct)\b"
    r"|\b(?:mak(?:e|es|ing)|made|be|being|not|never|n['’]t)\s+(?:(?:so|too|quite|really|very|entirely|totally|"
    r"completely)\s+)?sure\b"
    r"|\b(?:not|never|n['’]t)\s+(?:quite\s+|really\s+)?(?:correct|ok(?:ay)?)\b"
    r"|\b(?:do\s+not|don['’]t|not|never)\s+(?:yet\s+)?(?:go ahead|proceed|confirm(?:ed)?|do it)\b"
    # an assent word negated: "I don't agree", "not approved", "not alright", "absolutely not", "doesn't sound good"
    # (each match bounded by non-word characters, as the others: the negation spelt whole, "don't", not "n't")
    r"|\b(?:do\s+not|not|never|(?:(?:do|does|did)n|can|won)['’]t)\s+(?:really\s+|yet\s+)?"
    r"(?:agree(?:d)?|approve(?:d)?|alright|all right)\b"
    r"|\b(?:absolutely|definitely|certainly|of course)\s+not\b|\b(?:do|does|did)n['’]t\s+sound\s+(?:good|great|fine)\b",
    re.I)


# a decline: a message that opens with "no" / "nope" / "nah" (not "no problem", "no worries"), or says "no thanks",
# "no need", "I'll pass": "No, that's okay" declines whatever its "okay"; only an explicit yes overrides it
DECLINE = re.compile(r"^\W*(?:no|nope|nah)\b(?!\s+(?:problem|worries|issue))|\bno,?\s+thank(?:s| you)\b|\bno need\b"
                     r"|\bi['’]?ll pass\b|\bnot (?:necessary|needed|interested)\b", re.I)
EXPLICIT_YES = re.compile(r"\b(yes|yeah|yep|yup|go ahead|proceed|confirm(ed)?|please do|do it|"
                          r"absolutely(?=[.,;:!]|$)|definitely(?=[.,;:!]|$)|certainly(?=[.,;:!]|$)|"
                          r"agree(d)?|approve(d)?|"
                          r"go for it|by all means)\b", re.I)


# A question asks; it does not assent ("Is this approved?", "Do you agree?", "Is that okay?", "Are you sure?"). In a
# sentence ending in "?", each clause (cut at , ; :) that opens with an interrogative word, or the last clause when it
# is three words or fewer ("Approved?", "Sounds good?"), is a question; a yes in a clause of its own beside it still
# answers ("Yes, can you also email me the receipt?", "That sounds good, but can you remind me ...?"), and a request
# to go ahead put as a question ("Can you go ahead and cancel it?", "Could you help me proceed with the change?",
# "Shall we proceed?") is none
_QUESTION = re.compile(r"(?:^|(?<=[.!?\n]))[^.!?\n]*\?")  # a sentence ending in "?" (from a sentence's start only)
_CLAUSE = re.compile(r"[^,;:]+")
_INTERROGATIVE = frozenset((
    "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "would", "will", "shall", "should", "have",
    "has", "had", "may", "might", "must", "what", "why", "how", "who", "whom", "whose", "which", "when", "where",
    "isn't", "aren't", "wasn't", "don't", "doesn't", "didn't", "can't", "couldn't", "wouldn't", "won't",
    "shouldn't", "haven't", "hasn't"))
_GO_AHEAD_ASKED = re.compile(r"\s*(?:can|could|would|will|shall)\s+(?:you|we)\s+"
                             r"(?:(?:please|just|kindly|now|then|help\s+me|help\s+us)\s+){0,3}"
                             r"(?:go ahead|proceed|do it|do that|do this)\b", re.I)


def _asks(clause: str, last: bool) -> bool:
    """A clause of a question that asks (``_QUESTION``'s rule above)."""
    words = clause.split()
    if not words or _GO_AHEAD_ASKED.match(clause):
        return False
    return words[0].lower().replace("’", "'") in _INTERROGATIVE or last and len(words) <= 3


def unasked(text: str) -> str:
    """``text`` with the clauses of its questions that ask blanked: what is left may say yes."""
    def blank(m: re.Match) -> str:
        question = m.group(0)
        clauses = list(_CLAUSE.finditer(question))
        parts, end = [], 0
        for k, c in enumerate(clauses):
            if _asks(c.group(0), k == len(clauses) - 1):
                parts += [question[end:c.start()], " " * len(c.group(0))]
                end = c.end()
        return "".join(parts) + question[end:]
    return _QUESTION.sub(blank, text)


def affirmative(text: str) -> bool:
    """Whether a user message says yes: an affirmative word ("yes", "go ahead", "sure", "absolutely": ``AFFIRMATIVE``)
    outside the phrases that hold one without saying yes ("make sure", "not sure", "not correct", "don't proceed",
    "I don't agree") and outside a question ("Is this approved?": ``unasked``); a decline ("No, that's okay", "no
    thanks") says no unless it also holds an explicit yes ("No need for insurance, go ahead")."""
    told = unasked(text) if "?" in text else text
    low = gate_text(told)
    if not _assents(told, low):
        return False
    low = low if low is not None else told.lower()
    return not _held_back(low, _OPENING.match(low), text)


def _assents(text: str, low: str | None) -> bool:
    """``affirmative`` of a text whose questions are blanked (``unasked``), before the hold after its yes is looked for
    (``_held_back``); ``low``: its ``gate_text``."""
    # Short cuts, exact: every NOT_AN_ANSWER match is bounded by non-word characters on both sides, so cutting one
    # never makes a new AFFIRMATIVE match, and none holds "yes" / "yeah" / "yep" / "yup", which therefore survive the
    # cut ("please do" does not: "please do not proceed"); a "yes" is an explicit yes, so no decline can undo it. Only a
    # message whose affirmatives may be cut pays for the cut, and only an affirmative one for the decline test.
    found = False
    for word in (m.group(1) for m in AFFIRMATIVE.finditer(text)) if low is None else _affirmative_words(low):
        if word.lower() in _UNCUT:
            return True
        found = True
    if not found:
        return False
    if low is not None:  # the cut and the searches on the lower-cased text, case-sensitive (as the first search)
        # every NOT_AN_ANSWER match holds one of _NEGATING's words: without them the cut cuts nothing, and the
        # affirmative found above is still there
        if any(map(low.__contains__, _NEGATING)):
            cut = _NOT_AN_ANSWER_LOW.sub(" ", low)
            if _AFFIRMATIVE_LOW.search(cut) is None:
                return False
        else:
            cut = low
        # (a DECLINE match holds "no" -- no, nope, not --, "nah" or "pass")
        declines = ("no" in low or "nah" in low or "pass" in low) and _DECLINE_LOW.search(low) is not None
        return not declines or _EXPLICIT_YES_LOW.search(cut) is not None
    cut = NOT_AN_ANSWER.sub(" ", text)
    if AFFIRMATIVE.search(cut) is None:
        return False
    return DECLINE.search(text) is None or EXPLICIT_YES.search(cut) is not None


# A request to carry out the action asked about, with no word of assent ("Perfect, please make the change.", "Great,
# book it then.", "Please cancel it.", "OK. Please go on and cancel it."): a sentence, not a question, that opens --
# past interjections ("Perfect,", "Great,", "OK.", "Thanks,") -- with a verb of doing (``_DO``) and an object that
# points back at what was asked ("it", "that", "them", "the change", "the booking", ...: ``_DONE_TO``), "please"
# before it or not; or with "please go on / continue / carry on". Not "please make sure", "please don't ...", "please
# tell me ...", nor a request for something new ("please add a bag": no pointer back), nor a decline ("No, change it
# instead"). A yes only where it answers the agent asking leave for the action, and asks for an action of the kind
# asked (``leave_asked``, ``_KINDS``): the same words to a reply that asked nothing are a first request. The regex
# reads the shape; the verb and the noun are looked up after (a regex of every verb cost ~1.5 ms to compile at each
# start)
_DO = frozenset((
    "make", "do", "process", "submit", "place", "apply", "complete", "finalize", "finalise", "issue", "order",
    "execute", "handle", "approve", "turn", "transfer",
    # (those that name a kind of action, ``_KINDS``)
    "book", "cancel", "change", "update", "modify", "upgrade", "downgrade", "add", "remove", "delete", "switch", "swap",
    "replace", "move", "refund", "return", "exchange", "reserve", "purchase", "buy", "schedule", "send",
    "enable", "disable", "activate", "deactivate", "reactivate", "suspend", "resume", "pause", "block", "unblock",
    "lock", "unlock", "toggle", "reset", "restart", "reboot", "restore", "pay"))
_DONE_TO = frozenset((
    "change", "changes", "booking", "bookings", "cancellation", "update", "updates", "upgrade", "modification",
    "modifications", "order", "orders", "reservation", "exchange", "return", "refund", "switch", "swap", "transaction",
    "request", "flight", "flights", "trip", "purchase", "item", "items", "payment", "bill", "line", "lines", "roaming",
    "setting", "settings", "plan", "service", "subscription", "appointment", "visit", "ticket", "claim", "certificate",
    "transfer", "suspension", "removal", "deletion", "activation", "reset"))
_LEAD = (r"\s*(?:(?:ok(?:ay)?|great|perfect|thanks|thank\s+you|good|fine|excellent|wonderful|cool|nice|then|so|well|"
         r"right|awesome)\W+)*")
_ACT_SHAPE = re.compile(
    _LEAD + r"(?:please\s+)?(?:just\s+)?"
    r"(go\s+on|carry\s+on|continue|(\w+)\s+(?:it|that|this|them|those|these|so|the\s+(\w+)))\b"
    r"[^.!?\n]*(?:[.!\n]|$)", re.I)
# the same request put as a question, as politely as English puts one ("Can you book it?", "Could you please cancel
# it for me?", "Would you cancel that now, please?"): the question is the request alone -- its verb and object, and
# at most "please", "now", "then", "for me", "right away", "today". A question that goes on ("Can you cancel it and
# then reorder?", "Can you cancel it tomorrow instead?") asks about a plan, and one of another shape ("Is this
# approved?", "Could you tell me the refund first?") asks something
_POLITE_ASK = re.compile(
    r"(?:^|(?<=[.!?;\n]))" + _LEAD + r"(?:can|could|would|will)\s+you\s+(?:(?:please|kindly|just)\s+)*"
    r"(\w+)\s+(?:it|that|this|them|those|these|the\s+(\w+))"
    r"(?:\s+(?:please|now|then|for\s+(?:me|us)|right\s+away|today))*\s*,?\s*(?:please\s*)?\?", re.I)
_SENTENCE_END = re.compile(r"[.!;\n]")
# another action in the place of the one asked ("Please change it to express shipping instead", "Please exchange it
# rather than cancel"): no request to do what was asked
_IN_PLACE = re.compile(r"\b(?:instead|rather\s+than)\b", re.I)
# The kinds of action a request or the agent's question names, in the words a customer and an agent use for them:
# asked "Shall I cancel it?", "Please change it." asks for another action, no yes to the one asked, while "Please
# refund it" asks for the same. A word may name two kinds (a refund comes of a cancellation or of a return, a switch
# is a change or an exchange); a reservation, an order or a booking is what the action is done to, "the change",
# "these changes" stand for whatever was asked ("Perfect, please make the change.") and a participle after a
# determiner qualifies what is done ("this updated payment", "the cancelled flight"): none names a kind. Verbs of
# doing in general -- make, do, process, complete, handle, issue, go on -- name none either
_KINDS = (  # each kind's words: a word as written, or a stem ending in "*" that opens it ("cancel*": cancelled)
    # an order, a booking or an item removed or deleted is cancelled (retail's cancel_pending_order)
    ("cancel", "cancel* void voids voided voiding annul* refund* remov* delet*"),
    ("return", "return* refund*"),
    ("exchange", "exchang* swap* switch* replac*"),
    # (a swap or a replacement too: retail's modify_pending_order_items swaps an item for another option)
    ("change", "chang* modif* updat* edit edits edited editing amend* adjust* alter alters altered altering alteration "
               "alterations switch* swap* replac* move moves moved moving upgrad* downgrad* reschedul* add adds added "
               "adding remov* delet*"),
    # a visit or an appointment is scheduled as a flight is booked; data refuelled is bought (telecom's refuel_data)
    ("book", "book books booked reserve reserves reserved reserving purchas* buy buys buying bought schedul* "
             "refuel*"),
    # (not "transfer": an agent offers to transfer the user to a person as often as to transfer funds; a verb of doing
    # in general, as "process")
    ("send", "send sends sending sent compensat*"),
    # a line, a service or a setting turned on or off (telecom's enable_roaming, suspend_line, resume_line; a toggle
    # is either), reset or restarted, and a bill paid: the verbs a policy-following agent of another domain uses
    ("on", "enabl* activat* reactivat* resum* unsuspend* unblock* unlock* unpaus* restor* toggl*"),
    ("off", "disabl* deactivat* suspend* paus* block blocks blocked blocking lock locks locked locking freez* toggl*"),
    ("reset", "reset* reboot* restart* restor*"),
    ("pay", "pay pays paid paying"),
    # the two ways of a change that undo each other: "Please remove it." to "Shall I add a checked bag?" asks for a
    # change, but not the one asked (``_OPPOSITES``)
    ("add", "add adds added adding"),
    ("remove", "remov* delet*"),
    ("upgrade", "upgrad*"),
    ("downgrade", "downgrad*"))
# a request for one of a pair where the agent asked leave for the other, and not for it, is no yes (enabling and
# disabling are kinds of their own, on and off, that share none)
_OPPOSITES = (("add", "remove"), ("remove", "add"), ("upgrade", "downgrade"), ("downgrade", "upgrade"))
# "turn it on", "switch off roaming": the particle, not the verb, names the kind; and "send it back", "ship them
# back", "mail back the lamp": an item sent back is returned (a verb that sends, no kind of its own but a sending)
_PARTICLE_KINDS = {"on": frozenset(("on",)), "off": frozenset(("off",)), "back": frozenset(("return",))}
_PHRASAL = frozenset(("turn", "turns", "turned", "turning", "switch", "switches", "switched", "switching"))
_SENT_BACK = frozenset(("send", "sends", "sending", "sent", "ship", "ships", "shipped", "shipping", "mail", "mails",
                        "mailed", "mailing"))  # (not "take it back": a word withdrawn as often)
# "the change", "these changes": whatever was asked, no kind of its own; "this updated payment": a participle that
# qualifies a noun after a determiner
_DETERMINERS = frozenset(("the", "this", "that", "these", "those", "a", "an", "any", "such", "your", "my", "our"))
_THE_CHANGE = re.compile(r"\b(?:the|this|that|these|those|such|your)\s+changes?\b", re.I)
_LETTERS = re.compile(r"[a-z]+")


@lru_cache(maxsize=1)
def _kind_table() -> tuple[dict[str, frozenset[str]], tuple[tuple[str, str], ...]]:
    """``_KINDS`` as the kinds of each word written whole, and (stem, kind) pairs."""
    whole: dict[str, set[str]] = {}
    stems = []
    for kind, words in _KINDS:
        for word in words.split():
            if word.endswith("*"):
                stems.append((word[:-1], kind))
            else:
                whole.setdefault(word, set()).add(kind)
    return {w: frozenset(k) for w, k in whole.items()}, tuple(stems)


@lru_cache(maxsize=4096)
def _word_kinds(word: str) -> frozenset[str]:
    """The kinds of action (``_KINDS``) a lower-case word names."""
    whole, stems = _kind_table()
    return whole.get(word, frozenset()).union(kind for stem, kind in stems if word.startswith(stem))


def kinds_named(text: str) -> frozenset[str]:
    """The kinds of action (``_KINDS``) the words of ``text`` name, "the change" and a participle after a determiner
    ("the cancelled flight") set aside. (Looked up word by word: the kinds as compiled regexes cost ~7 M instructions
    to compile, at a run's first request to act.)"""
    words = _LETTERS.findall(text.lower())
    kinds: set[str] = set()
    for k, word in enumerate(words):
        if k and words[k - 1] in _DETERMINERS and (word in ("change", "changes") or word.endswith("ed")):
            continue
        if word in _PARTICLE_KINDS and k and words[k - 1] in _PHRASAL:
            kinds |= _PARTICLE_KINDS[word]
        elif word == "back" and k and _SENT_BACK.intersection(words[max(0, k - 3):k]):  # "send the lamp back"
            kinds |= _PARTICLE_KINDS[word]
        kinds |= _word_kinds(word)
    return frozenset(kinds)


def _requested(verb: str | None, noun: str | None) -> frozenset[str] | None:
    """The kinds of action a request's verb and noun after "the" ask for (``kinds_named``: the verb's, else the
    noun's; empty for a verb of doing in general or "the change"), None where the verb is no verb of doing (``_DO``)
    or the noun nothing done (``_DONE_TO``)."""
    if verb is not None and (verb.lower() not in _DO or noun is not None and noun.lower() not in _DONE_TO):
        return None
    kinds = kinds_named(verb) if verb is not None else frozenset()
    if not kinds and noun is not None and noun.lower() not in ("change", "changes"):
        kinds = kinds_named(noun)
    # a change is bought as often as made: new flights, an upgrade, bags ("Great, book it then." to "proceed with this
    # upgrade"); a request to change is still no request to book
    return kinds | {"change"} if "book" in kinds else kinds


def request_kinds(text: str, said: str | None = None) -> frozenset[str] | None:
    """The kinds of action (``_requested``) a sentence of ``text`` requests: a sentence outside its questions
    (``said``: ``unasked(text)``, computed where not given) opening as a request (``_ACT_SHAPE``), or a question that
    is the request alone (``_POLITE_ASK``); not another action in its place (``_IN_PLACE``). None where no sentence
    is one, or ``text`` is a decline (``DECLINE``)."""
    if said is None:
        said = unasked(text) if "?" in text else text
    pos, n = 0, len(said)
    while pos < n:
        m = _ACT_SHAPE.match(said, pos)
        if m is not None and _IN_PLACE.search(m.group(0)) is None \
                and (kinds := _shape_kinds(said, m.group(2), m.group(3), m.end(2))) is not None:
            return kinds if DECLINE.search(text) is None else None
        end = _SENTENCE_END.search(said, pos)
        if end is None:
            break
        pos = end.end()
    if "?" in text:
        for m in _POLITE_ASK.finditer(text):
            if (kinds := _requested(m.group(1), m.group(2))) is not None:
                return kinds if DECLINE.search(text) is None else None
    return None


def _shape_kinds(said: str, verb: str | None, noun: str | None, verb_end: int) -> frozenset[str] | None:
    """The kinds of action (``_requested``) a request of ``_ACT_SHAPE``'s shape in ``said`` asks for, its ``verb``
    (None for "go on" and its like) ending at ``verb_end`` and the ``noun`` after "the"; None where it asks none."""
    # (``_requested`` takes the verb as matched: None is "go on" and its like, which "" is not)
    kinds, verb = _requested(verb, noun), verb.lower() if verb else ""
    if verb in _SENT_BACK:
        # "send it back", "ship the lamp back": a return, whatever the verb names alone
        if "back" in (w.strip(".,;:!") for w in said[verb_end:verb_end + 32].lower().split()[1:4]):
            return _PARTICLE_KINDS["back"]
    if kinds is not None and verb in _PHRASAL:
        # "turn it on", "switch it off": the particle after the object names the kind; "turn it" alone asks nothing
        after = (w.strip(".,;:!") for w in said[verb_end:verb_end + 24].lower().split()[1:3])
        particle = next((_PARTICLE_KINDS[w] for w in after if w in _PARTICLE_KINDS), None)
        kinds = particle if particle is not None else None if verb == "turn" else kinds
    return kinds


# What a yes goes straight on to say, past its opening words -- of assent, thanks, interjections, "but" -- read on
# the lower-cased text with one anchored match (``_OPENING``; most yeses, "Yes, please proceed.", match nothing):
# - a hold of the action (group ``hold``): "OK, but don't cancel it yet.", "Sure, but wait - ...", "Yes, but not
#   now.", "Okay, wait, don't do it.", "Alright, but please hold off ...", "Yes, but let me think about it." -- wait,
#   hold on / off, hang on, not yet / now / so fast, let me think / check / ask, or a negated request to go on
#   ("don't proceed", "do not go ahead", "don't do it") or to act on what was asked ("don't cancel it yet", "never
#   book the flight": group ``held``, one of ``_DO``, its object a pointer back or a noun of ``_DONE_TO``). A refusal
#   that opens with assent, no yes (``_held_back``; a hold after a "but" later in the message too). Not a condition
#   on the yes ("Sure, but don't forget my card", "Yes, but don't send the receipt": no verb of doing, no pointer
#   back) nor a "wait" elsewhere ("Yes, please cancel it. I can't wait for the refund");
# - a request of ``_ACT_SHAPE``'s shape (group ``act``): "OK, please exchange it.", "Sure. Downgrade it then." -- no
#   yes where it asks for another action than the one asked (``_asks_another``). Only there: a request in a later
#   sentence ("Yes, go ahead with the return. Please send the refund to my card.") asks for a detail of what was
#   said yes to as often as for another action.
# The opening words and the verb are taken whole, never given back (possessive: no opening word is a verb of doing or
# a hold's first word, so no match is lost): ~3x fewer instructions than the same regex backtracking into them.
_HOLD = (r"(?P<hold>(?P<inherent>wait\b|(?:hold|hang)\s+on\b(?!\s+to\b)|hold\s+(?:off|up)\b"
         # a yes taken back: "never mind", "scratch that", "forget it", "I've changed my mind", "on second thought",
         # and a negation that stops the sentence ("actually, don't.", "no, don't")
         r"|never\s+mind\b|scratch\s+that\b|forget\s+(?:it|that|about\s+it)\b"
         r"|(?:i['’]ve\s+|i\s+have\s+|i\s+)?changed\s+my\s+mind\b|on\s+second\s+thoughts?\b"
         r"|(?:do\s+not|don['’]t)(?=\s*(?:[.!,;\n\u2013\u2014-]|$)))"
         # not now, and not the thing offered: "Okay, not that one.", "Sure, not this time.", "Ok, not at the moment."
         r"|not\s+(?:yet|now|just\s+yet|so\s+fast|right\s+now|today|this\s+time|for\s+(?:now|the\s+moment)"
         r"|at\s+(?:the|this)\s+(?:moment|time|point)|(?:that|this|those|these)\s+ones?)\b"
         r"|let\s+me\s+(?:think|check|ask|talk|consult|look|see|confirm|double)\b"
         r"|(?:do\s+not|don['’]t|never)\s+(?:(?:actually|just|quite|really|yet)\s+)?"
         r"(?:proceed|go\s+ahead|go\s+on|continue|do\s+(?:it|that|this|anything)"
         r"|(?P<held>\w++)\s+(?:it|that|this|them|those|these|anything|yet|now|the\s+(?P<held_noun>\w+)))\b)")
# the words a yes opens with: of assent, thanks, interjections, "but", "please", "first"
_LEAD_WORDS = (r"ok(?:ay)?|yes|yeah|yep|yup|sure|alright|all\s+right|absolutely|definitely|certainly|of\s+course|"
               r"great|perfect|thanks|thank\s+you|good|fine|excellent|wonderful|cool|nice|then|so|well|right|awesome|"
               r"but|please|just|actually|first|hmm+|um+|oh")
_OPENING = re.compile(
    r"\W*+(?:(?:" + _LEAD_WORDS + r")\W+)++"
    r"(?:" + _HOLD + r"|(?P<act>go\s+on|carry\s+on|continue|(?P<verb>\w++)\s+(?:it|that|this|them|those|these|so|"
    r"the\s+(?P<noun>\w+)))\b)")
# a hold after a "but" further on ("Yes, I see the fee, but don't cancel it yet.") or at a later sentence's start
# ("Yes, please cancel it. Actually, don't cancel it yet."), matched where the "but" or the stop ends
_HOLD_AFTER = re.compile(r"\W*+(?:(?:please|just|actually|first|then|for\s+now|hmm+|um+|oh|ok(?:ay)?|no|sorry)\W+)*+"
                         + _HOLD)
# a hold at a later sentence's start: after a stop, a semicolon, a line's end or a dash. One scan of the message in C,
# opening with a character class the engine skips to (~0.7 microseconds on a tau-bench yes; with "but" as a second
# alternative ~2: "but" is found by str.find)
_LATER_HOLD = re.compile(r"[.!;\n\u2013\u2014-]" + _HOLD_AFTER.pattern)
# A deferral: "first" or "before" right after the opening words, a "but" or a stop ("Okay, but first, ...", "Yes, but
# before you do that, ..."), that asks something before the action -- its sentence is a question that opens with no
# verb of doing ("can you tell me the refund?", "the refund goes to my card, right?"; not "first cancel the other one,
# okay?", an order of the work), or it asks to be told ("first tell me the refund", "first let me know ...")
_DEFER = re.compile(r"(?:first|before)\b")
_LEAD_RUN = re.compile(r"\W*+(?:(?:" + _LEAD_WORDS + r")\W+)*+")  # opening words only (fullmatch)
_BOUNDARIES = (".", "!", ";", "\n", "\u2013", "\u2014", "-")
_DEFER_WORD = re.compile(r"[\W]*+(?:(?:please|just|though)\W+)*+(\w*)")
_TELL_ME = re.compile(r"\W*+(?:(?:please|just|though)\W+)*+(?:tell\s+me|show\s+me|let\s+me\s+know|explain|"
                      r"(?:i|we)(?:\s+(?:need|want|would\s+like)|['’]d\s+like)\s+to\s+(?:know|see|hear|understand))\b")
# a sentence's end in the message as written (its questions not blanked): not a decimal point
_STOP = re.compile(r"[!?\n]|\.(?!\d)")
# a hold after a comma ("Yes, cancel it, actually don't", "Sure, go ahead, wait, how much is it?"): one marked as
# taking the yes back ("actually", "no", "sorry", "wait" before it), or a hold of its own (group ``inherent``: wait,
# hold on, never mind, "I changed my mind", a negation that stops the clause). Not a negated verb of doing or "not
# now" with no such mark ("Yes, cancel it, don't refund it to the gift card" asks for a detail as often)
_COMMA_HOLD = re.compile(r",\W*+(?P<marker>(?:(?:actually|no|sorry|hmm+|um+|oh|wait)\W+)+)?" + _HOLD)
# A deferral in other words than "first" / "before": the user puts the decision off -- "I'll get back to you", "I'll
# let you know", "I'll think about it", "let me sleep on it", "I need to check with my wife", "I need some time" --
# anywhere outside the message's questions and not negated ("I don't need to think about it"). Not "I'll get back
# to you if I need anything" nor "I'll let you know if ..." (a farewell after the action), nor one that goes on to
# what will be told or another matter ("let you know my new address", "get back to you on the hotel"): both stop
# their clause, or go on only to when ("later", "once ...") or to "on / about it"
# (a time, unless it goes on to another matter: "get back to you later about the hotel" puts off the hotel; "on /
# about whether" is the decision itself)
_LATER = (r"(?:later|soon|tomorrow)\b(?!\s+(?:about|on|regarding|with|for)\s+(?!(?:it|this|that|whether|if)\b))"
          r"|(?:on|about)\s+(?:whether|if)\b")
_PUT_OFF = re.compile(
    r"\b(?:get|come)\s+back\s+to\s+you\b(?=\s*+(?:[.!,;\n\u2013\u2014-]|$|" + _LATER + r"|once\b|when\b|"
    r"after\b|(?:on|about)\s+(?:it|this|that)\b))"
    r"|\blet\s+you\s+know\b(?=\s*+(?:[.!,;\n\u2013\u2014-]|$|" + _LATER + r"|once\b|when\b|after\b|"
    r"what\s+(?:i|we)\b|how\s+(?:i|we)\b))"
    r"|\b(?:think\s+(?:about\s+(?:it|this|that)|it\s+over)|sleep\s+on\s+it|consider\s+(?:my|our)\s+options)\b"
    # (the person alone, "first" or "about it" after: "talk to my wife about the refund" asks about a detail)
    r"|\b(?:(?:check|talk|speak|discuss\s+(?:it|this|that))\s+(?:with|to)|consult)\s+(?:my|our)\s+\w+(?:\s+\w+)?"
    r"(?=\s*+(?:[.!,;\n\u2013\u2014-]|$|first\b|before\b|about\s+(?:it|this|that)\b|and\b|then\b))"
    r"|\b(?:i|we)(?:\s+(?:need|want|would\s+like)|['’](?:ll\s+need|d\s+like))\s+"
    r"(?:(?:some|a\s+little|a\s+bit\s+of|more)\s+)*time\b"
    r"|\b(?:let\s+me|(?:i|we)(?:['’]ll|\s+will|\s+need\s+to|\s+want\s+to))\s+take\s+"
    r"(?:(?:some|a\s+little|a\s+bit\s+of|more)\s+)*time\b")
# Undecided, or the action put off to a later time, in a yes's words (``_held_back`` reads it as ``_PUT_OFF``):
# - "I'm not sure yet", "not ready", "I'm still undecided", "I don't know yet", "I haven't decided": the clause ends
#   there or goes on only to "yet", "about it" or whether to act ("I'm not sure if I want to"); not a doubt about
#   something else ("not sure why it failed", "I don't know the zip code");
# - "maybe later", "perhaps tomorrow", "maybe some other time", a sentence that is the time alone ("Okay, later."), or
#   the doing of it so put off ("let's do it later"); not a detail said for later ("I'll let you know my new address
#   later", "I'll call about the other flight later").
# Run only where a message holds one of its words (``_UNDECIDED_GATE``: most yeses hold none)
_UNDECIDED = re.compile(
    r"(?:(?:\b(?:i['’]?m|i\s+am|we['’]re|we\s+are)\s+)?(?:still\s+)?(?:\bnot\s+(?:(?:so|quite|really|entirely|totally|too)"
    r"\s+)?(?:sure|certain|ready|convinced|decided)|\bunsure|\buncertain|\bundecided|\bhesitant|\bon\s+the\s+fence)"
    r"|\b(?:i|we)\s+(?:(?:do\s+not|don['’]t)\s+know|(?:have\s+not|haven['’]t)\s+(?:yet\s+)?decided|(?:can['’]t|cannot)"
    r"\s+decide)"
    r")(?=\s*+(?:[.!,;\n\u2013\u2014-]|$|yet\b|about\s+(?:it|this|that)\b|(?:if|whether)\s+(?:i|we)\b|whether\b))"
    r"|\b(?:maybe|perhaps|possibly)\s+(?:later|tomorrow|(?:some|an)\s*other\s+(?:time|day)|next\s+(?:week|month|time)|"
    r"in\s+a\s+(?:bit|while|few\s+days))\b"
    r"|(?:^|(?<=[.,;!\n]))\s*(?:later|tomorrow|(?:some|an)\s*other\s+(?:time|day))(?:\s+(?:then|please|on))?"
    r"\s*(?=[.!;\n]|$)"
    r"|\b(?:do|make)\s+(?:it|that|this)\s+(?:later|tomorrow|(?:some|an)\s*other\s+(?:time|day)|next\s+(?:week|month))\b")
# a word one of _UNDECIDED's matches holds (its first alternative's "sure", "certain", "ready" or "convinced" after
# "not"): searched before it, each alternative opening with a letter (the engine skips to their first letters), where
# _UNDECIDED opens with optional words and is tried at every character; 27 substring scans cost ~2.5 M instructions
# a tau-bench airline pass
_UNDECIDED_GATE = re.compile(r"un(?:sure|certain|decided)|hesitant|fence|know|decide|maybe|perhaps|possibly|later|"
                             r"tomorrow|other|not\s+(?:\w+\s+)?(?:sure|certain|ready|convinced)")


# a question with a reservation ("Sure -- what's the refund, though?"): asked before the action, as "first" asks it;
# not a request beside the yes ("Yes, go ahead. Though, could you email me the receipt?")
_THOUGH = re.compile(r"^(?!.*\b(?:can|could|would|will)\s+you\b).*\bthough\b", re.S)
# a negation before a deferral in its clause: "I don't need to think about it"
_NEGATED_BEFORE = re.compile(r"(?:\bnot|\bnever|\bno|n['’]t)\b[^,.;!?\n]*$")
# the user's last word that says yes again after a hold, in the hold's own sentence: a clause that opens -- past
# "actually", "then", "no" and the like -- with a word of assent ("Yes, please. Hold on, actually go ahead.")
_YES_AGAIN = re.compile(r"\W*+(?:(?:actually|then|well|oh|hmm+|um+|no|but)\W+)*+(?:yes|yeah|yep|yup|sure|ok(?:ay)?|"
                        r"alright|all\s+right|go\s+ahead|proceed|please\s+(?:do|proceed|go\s+ahead)|do\s+it|"
                        r"go\s+for\s+it|let['’]?s\s+do\s+it)\b")
_CLAUSE_BREAK = re.compile(r"[,;:\u2013\u2014-]")
# a word of acknowledgement alone closing what the user said after a hold ("Not that one, okay.", "Wait. Okay."): a tag
# on the hold, not the yes said again
_BARE_OK = re.compile(r"\W*+(?:ok(?:ay)?|alright|all\s+right)\W*+")
# a refusal of the thing offered that asks for another one the agent has not put: "Not the lamp, the other one, yes.",
# "Not that one -- the blue one, okay?", "not this one, another one": the yes is to the other one. A bare "no" (or
# "nope", "nah") refuses it as well where what follows it is another one put with a determiner ("No, the other one,
# yes.", "Nope -- a different one."): not "No, one more thing", nor "No, a one-way trip is fine"
_OTHER_ONE = re.compile(r"\b(?:not\s+(?:the|that|this|those|these)\b[^.!?;,\n]{0,40}[,;:\u2013\u2014-]\W*+"
                        r"(?:(?:but|rather|instead|i\s+mean)\W+)?(?:the\s+|an?\s+)?(?:\w+\s+)?(?:other|another|"
                        r"different)?\s*ones?\b"
                        r"|(?:no|nope|nah)[^\S\n]*[,;:\u2013\u2014-]\W*+(?:(?:but|rather|instead|i\s+mean)\W+)?"
                        r"(?:(?:the|an?)\s+(?:\w+\s+)?|another\s+)ones?\b(?![-'’]))")
# a yes on a condition ("If it's under $200, yes.", "Yes, as long as the refund goes to my card"): no last word after
# a hold or a deferral, which it does not lift (on its own, "If that's the only option, then yes, please go ahead" is
# a yes, as before)
_CONDITION = re.compile(r"\b(?:if|unless|as\s+long\s+as|provided|providing|assuming|only\s+when)\b")
# every hold's word (``_HOLD``) a message may hold, and every deferral's (``_PUT_OFF``): C scans before any regex
_HOLD_GATE = ("n't", "n’t", "not", "wait", "hold", "hang", "let", "never", "mind", "scratch", "forget", "second")
_PUT_OFF_GATE = ("back to you", "let you know", "think", "sleep on", "consider", "with my", "to my", "with our",
                 "to our", "consult", "time")


def _held_back(low: str, opening: re.Match | None, text: str) -> bool:
    """A yes's lower-cased text ``low`` (its questions blanked; ``opening``: ``_OPENING.match(low)``; ``text``: the
    message as written) holds back the action it may seem to say yes to: a hold at its start, right after its opening
    words, after a "but", at a later sentence's start or after a comma with a mark of taking the yes back (``_HOLD``,
    ``_COMMA_HOLD``), a deferral that asks something first (``_DEFER``), a question with "though" (``_THOUGH``) or a
    deferral in other words (``_PUT_OFF``: "I'll get back to you") -- unless the user says yes again, with no
    condition, after the last of them (``_says_yes_again``: "OK, wait. Yes, go ahead.", "Hold on, actually go ahead.":
    the user's last word)."""
    if len(text) != len(low):  # (lower-casing changed the length: positions are read on ``low`` alone)
        text = low
    if "one" in low and ("no" in low or "nah" in low) and _OTHER_ONE.search(low) is not None:
        return True  # a yes to another one than the one offered, which the agent has still to put
    end = -1  # where the sentence of the last hold or deferral ends
    if opening is not None and opening.group("hold") is not None and _holds(opening):
        end = opening.end()
    elif (m := _HOLD_AFTER.match(low)) is not None and _holds(m):  # a hold that opens the message ("Wait. ...")
        end = m.end()
    # (every _HOLD match holds one of these words: short-circuit C scans, no regex, for most yeses)
    if any(map(low.__contains__, _HOLD_GATE)):
        m = _LATER_HOLD.search(low, end + 1)
        while m is not None:
            if _holds(m):
                end = max(end, m.end())
            m = _LATER_HOLD.search(low, m.end())
        if "," in low:
            m = _COMMA_HOLD.search(low, end + 1)
            while m is not None:
                if (m.group("marker") is not None or m.group("inherent") is not None) and _holds(m):
                    end = max(end, m.end())
                m = _COMMA_HOLD.search(low, m.end())
        k = low.find("but")  # (-1 for most yeses: one C scan)
        while k >= 0:
            after = k + 3
            if (not k or not low[k - 1].isalnum()) and (after == len(low) or not (low[after].isalnum()
                                                                                  or low[after] == "_")) \
                    and (m := _HOLD_AFTER.match(low, after)) is not None and _holds(m):
                end = max(end, m.end())
            k = low.find("but", after)
    if "first" in low or "before" in low:
        for d in _DEFER.finditer(low):
            if _defers(low, text, d):
                end = max(end, d.end())
    for put_off in (_PUT_OFF if any(map(low.__contains__, _PUT_OFF_GATE)) else None,
                    _UNDECIDED if _UNDECIDED_GATE.search(low) is not None else None):
        for m in put_off.finditer(low) if put_off is not None else ():
            clause = max(low.rfind(c, 0, m.start()) for c in ",.;!?\n") + 1
            if _NEGATED_BEFORE.search(low, clause, m.start()) is None:
                end = max(end, m.end())
    if "hough" in text:  # (a question's words are blanked in ``low``: read in ``text``)
        for q in _QUESTION.finditer(text):
            if _THOUGH.search(q.group(0).lower()) is not None:
                end = max(end, q.end())
    return end >= 0 and not _says_yes_again(low, text, end)


def _says_yes_again(low: str, text: str, end: int) -> bool:
    """After the last hold or deferral of a yes (ending at ``end`` in ``low``; ``text``: the message as written, or
    ``low``), the user says yes again, with no condition (``_CONDITION``): a clause of the hold's own sentence that
    opens with a word of assent (``_YES_AGAIN``: "Hold on, actually go ahead."), or a later sentence that says yes
    ("OK, wait. Yes, go ahead."). The user's last word stands."""
    stop = _STOP.search(text, end)
    limit = stop.start() if stop is not None else len(low)
    c = _CLAUSE_BREAK.search(low, end, limit)
    while c is not None:
        nxt = _CLAUSE_BREAK.search(low, c.end(), limit)
        clause = low[c.end():nxt.start() if nxt is not None else limit]
        if _YES_AGAIN.match(clause) and _CONDITION.search(clause) is None and _assents(clause, gate_text(clause)) \
                and not (nxt is None and _BARE_OK.fullmatch(low, c.end()) is not None):  # "Not that one, okay."
            return True
        c = nxt
    if stop is None:
        return False
    tail = low[stop.end():]
    if not _assents(tail, gate_text(tail)) or _BARE_OK.fullmatch(tail) is not None:  # "Wait. Okay."
        return False
    if _CONDITION.search(tail) is None:
        return True
    # (a condition somewhere: each later sentence on its own)
    start = stop.end()
    while start < len(low):
        s = _STOP.search(text, start)
        sentence = low[start:s.start() if s is not None else len(low)]
        if _CONDITION.search(sentence) is None and _assents(sentence, gate_text(sentence)):
            return True
        if s is None:
            break
        start = s.end()
    return False


def _defers(low: str, text: str, d: re.Match) -> bool:
    """The "first" or "before" ``d`` of a yes opens a deferral that asks something first (``_DEFER``)."""
    k = d.start()
    if k and (low[k - 1].isalnum() or low[k - 1] == "_"):
        return False
    # only opening words between it and the message's start, a stop (or the like) or a "but"
    start = max(low.rfind(c, 0, k) for c in _BOUNDARIES) + 1
    b = low.rfind("but", start, k)
    if b >= 0 and (not b or not low[b - 1].isalnum()) and not low[b + 3:b + 4].isalnum():
        start = b + 3
    if _LEAD_RUN.fullmatch(low, start, k) is None:
        return False
    if _TELL_ME.match(low, d.end()) is not None:
        return True
    stop = _STOP.search(text, d.end())
    if stop is None or stop.group() != "?":
        return False
    word = _DEFER_WORD.match(text.lower(), d.end()).group(1)
    return word not in _DO


def _holds(m: re.Match) -> bool:
    """A ``_HOLD`` match holds the action back: no verb, or a verb of doing (``_DO``) on what was asked."""
    held, noun = m.group("held"), m.group("held_noun")
    return held is None or held in _DO and (noun is None or noun in _DONE_TO)


def _asks_another(view: TraceView, i: int, requested: frozenset[str] | None) -> bool:
    """The yes at ``i`` goes straight on to ask for an action (``_OPENING``'s group ``act``, of the kinds
    ``requested``; None where it asks none) of another kind than the one the agent's reply before it asked leave
    for, or the opposite change (``_OPPOSITES``): "OK, please exchange it." to "Shall I process the return?", "OK,
    please downgrade it." to "Shall I upgrade ABC123?" -- no yes to what was asked. Where the request or the
    question names no kind, or the reply asked no leave, the yes stands. The reply and its question are read only
    for a yes whose request names a kind."""
    if not requested:
        return False
    reply = _reply_before(view, i)
    # another kind asked is a kind the end of the reply names (the asking sentence lies in it): where each kind it
    # names was requested, the yes stands, and the question is not looked for (``leave_asked``: ~130 k instructions
    # on a tau-bench reply's 400 characters, ~20 k for the kinds; 4 of the 7 tau-bench airline yeses that open with a
    # request stop here)
    if kinds_named(reply[-400:]) <= requested:
        return False
    asked = leave_asked(reply)
    return bool(asked) and (requested.isdisjoint(asked) or _opposed(requested, asked))


def _reply_before(view: TraceView, i: int) -> str:
    """The text of the last assistant message with text before message ``i`` ("" where none)."""
    msgs = view.traj.messages
    return next((view.texts[j] for j in range(i - 1, -1, -1) if msgs[j].get("role") == "assistant"
                 and view.texts[j].strip()), "")


# the agent asking the user's leave to act, in the end of its reply: "Shall I proceed?", "Please confirm.", "Would you
# like me to make this change?", "Do you want me to go ahead?", "Is that OK with you?", "Can I go ahead and do that?",
# "Please confirm if you would like to proceed", or an offer to act on the user's word ("Let me know your reason, and
# I'll proceed with the cancellation") -- not a question of which or what ("Which card would you like me to use?": it
# asks for a detail, not for leave). The verb after "shall I" or "I'll" (group ``act``) is one of ``_DO`` or going on
# (looked up after the match). Compiled when first asked (``leave_asked``): only a request to act asks it
_ASKS_LEAVE = (
    r"\b(?:shall|should|may|can)\s+(?:i|we)\s+(?P<act>\w+)"
    r"|\b(?:would\s+you\s+like|do\s+you\s+want)\s+(?:(?:me|us)\s+to|to\s+(?:go\s+ahead|proceed|confirm|continue))\b"
    r"|\b(?:please|kindly|can\s+you|could\s+you|to)\s+confirm\b|\bconfirm\s+(?:if|whether)\b"
    r"|\b(?:proceed|go\s+ahead)\s*\?"
    r"|\b(?:ok(?:ay)?|alright|all\s+right|fine)\s+with\s+you\b"
    r"|\bis\s+(?:that|this)\s+(?:ok(?:ay)?|alright|all\s+right|fine)\b"
    r"|\b(?:let\s+me\s+know|once\s+you|if\s+you)\b[^.?!\n]{0,80}?"
    r"\b(?:i['’]ll|i\s+will|i\s+can|we['’]ll|we\s+will|we\s+can)\s+(?P<offer>\w+)")
_GOING_ON = frozenset(("go", "proceed", "continue"))
_WH = frozenset(("which", "what", "where", "when", "how", "who", "whom", "whose", "why"))
_ASKING_END = re.compile(r"[.!?\n]")


@lru_cache(maxsize=1)
def _asks_leave_re() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """``_ASKS_LEAVE`` case-blind, and as it is (its letters are all lower-case), for a lower-cased text."""
    return re.compile(_ASKS_LEAVE, re.I), re.compile(_ASKS_LEAVE)


def _leave_asks(tail: str, low: str | None = None) -> Iterator[re.Match[str]]:
    """``_ASKS_LEAVE``'s matches in ``tail`` (``low``: ``tail.lower()``, where the caller has it). An ASCII tail is
    lower-cased and matched as it is, at about a third of the case-blind regex's cost (~400 k instructions on 400
    characters): the same matches at the same places, since ASCII holds none of the letters ``re.I`` folds beyond
    ``str.lower`` (long s, dotless and dotted i, the Kelvin sign) and lower-casing it keeps its length; a match's
    groups are then lower-cased, which every caller does to them anyway."""
    folded, lowered = _asks_leave_re()
    if tail.isascii():
        return lowered.finditer(tail.lower() if low is None else low)
    return folded.finditer(tail)


def leave_asked(reply: str) -> frozenset[str] | None:
    """The kinds of action the end of an agent's reply (its last 400 characters) asks the user's leave for
    (``_ASKS_LEAVE``, in a sentence that is no question of which or what): those the asking sentence names
    (``kinds_named``; empty when it names none: "Shall I proceed?", "Please confirm if you would like to proceed with
    these changes"). None where it asks no leave. Only the asking sentence: the lines before it list what the action
    brings about ("Refund method: credit card", "Total cost difference: $105") as often as the action itself."""
    tail = reply[-400:]
    for m in _leave_asks(tail):
        verb = m.group("act") or m.group("offer")
        if verb is not None and verb.lower() not in _DO and verb.lower() not in _GOING_ON:
            continue
        start = max(tail.rfind(c, 0, m.start()) for c in ".!?\n:") + 1
        words = tail[start:m.start()].split()
        if not words or words[0].lower().strip("*_") not in _WH:
            end = _ASKING_END.search(tail, m.end())
            asking = tail[start:end.end() if end is not None else len(tail)]
            # "proceed with this change" / "these changes": whatever the reply described, whatever else the sentence
            # names beside it ("..., and your preferred refund method")
            return frozenset() if _THE_CHANGE.search(asking) is not None else kinds_named(asking)
    return None


# What a yes to the agent's reply consents to where that is no action (``no_action_offered``): the asking sentence
# (as ``leave_asked`` finds it) offers to look something up -- its verb, after "shall I", "would you like me to" or
# "let me know ... I'll", is one of ``_LOOK``: "Would you like me to check your other orders?", "Shall I search for
# other flights?" --, or the reply asks no leave and its last question asks whether the user has another matter
# ("Is there anything else I can help you with?": ``_ANYTHING_ELSE``). A "Yes, send it back." to either answers it,
# and asks for the return as a first request does: the agent has not put the return to the user
_LOOK = frozenset((
    "check", "look", "find", "search", "see", "show", "list", "tell", "explain", "pull", "retrieve", "review",
    "calculate", "compute", "estimate", "fetch", "investigate", "explore", "browse", "research", "query", "verify",
    "double", "recheck", "locate", "read", "compare"))
_ANYTHING_ELSE = re.compile(r"\b(?:anything|something)\s+else\b|\bany\s+other\s+(?:questions?|requests?|concerns?|"
                            r"issues?|matters?|things?|ways?)\b|\bany(?:thing|\s+way)\s+(?:more|further)\b", re.I)
_ELSE_GATE = ("else", "other", "more", "further")  # (a word each _ANYTHING_ELSE match holds, with "any")
# the gate's words: ``_LOOK`` as bytes, and every ASCII byte that is no letter or digit made a blank ("check?" ->
# "check "). A verb the asking regex reads is a whole word (``\w+`` after a blank, as long as it goes), so a reply's
# end that makes it "a look-up" holds it as a word of ``_look_words``
_LOOK_BYTES = frozenset(w.encode() for w in _LOOK)
_WORD_BYTES = bytes(b if chr(b).isascii() and chr(b).isalnum() else 32 for b in range(256))
_NEXT_WORD = re.compile(r"\s+(?:(?:just|quickly|also|first|now)\s+)?(\w+)")
_ME_TO = re.compile(r"(?:me|us)\s+to$", re.I)


def _look_words(low: str) -> list[bytes]:
    r"""The words of a lower-cased text as ``_LOOK_BYTES`` holds them: runs of ASCII letters and digits, any other
    character a blank (a character outside ASCII is made "?" first). Each whole word of ``low`` (``\w+``) that is one
    of ``_LOOK`` is one of these: no character outside ``\w`` lower-cases to an ASCII letter or digit, and no
    character that lower-cases to an ASCII letter becomes more than one. ~25 k instructions on 400 characters, where
    a regex of ``_LOOK``'s words took ~100 k and ``re.findall(r"\w+", ...)`` ~130 k."""
    return low.encode("ascii", "replace").translate(_WORD_BYTES).split()


def no_action_offered(reply: str) -> str | None:
    """What a yes to ``reply`` (the agent's reply before it) consents to where that is no action: "a look-up" where
    the asking sentence of its end offers one, "another matter" where it asks no leave and its last question asks
    whether the user has anything else (``_LOOK``, ``_ANYTHING_ELSE``); None where it asks leave to act, or asks
    nothing of either kind."""
    tail = reply[-400:]
    # C scans first (the asking regex costs ~130 k instructions on an ASCII reply's end, ~400 k case-blind): an
    # answer needs a look-up verb or a word of "anything else" in the end; most replies before a yes hold neither
    low = tail.lower()
    if _LOOK_BYTES.isdisjoint(_look_words(low)) and ("any" not in low or not any(map(low.__contains__, _ELSE_GATE))):
        return None
    for m in _leave_asks(tail, low):
        verb = m.group("act") or m.group("offer")
        if verb is None and _ME_TO.search(m.group(0)) is not None and (w := _NEXT_WORD.match(tail, m.end())):
            verb = w.group(1)
        start = max(tail.rfind(c, 0, m.start()) for c in ".!?\n:") + 1
        words = tail[start:m.start()].split()
        if words and words[0].lower().strip("*_") in _WH:
            continue
        verb = verb.lower() if verb is not None else None
        if verb in _LOOK:
            return "a look-up"
        if verb is None or verb in _DO or verb in _GOING_ON:
            return None
    end = tail.rfind("?")
    if end >= 0:
        start = max(tail.rfind(c, 0, end) for c in ".!?\n") + 1
        if _ANYTHING_ELSE.search(tail, start, end) is not None:
            return "another matter"
    return None


# a word every yes ``affirmed`` reads holds, lower-cased: the first word of each AFFIRMATIVE alternative, or one of
# its words ("go ahead", "of course", "all right", "let's do it", "by all means"), a verb of doing (``_DO``) and going
# on ("go on", "carry on", "continue")
_YES_WORDS = frozenset((
    "yes", "yeah", "yep", "yup", "confirm", "confirmed", "go", "proceed", "please", "sure", "ok", "okay", "correct",
    "do", "alright", "right", "absolutely", "definitely", "certainly", "course", "agree", "agreed", "approve",
    "approved", "sounds", "works", "let", "lets", "means", "carry", "continue")) | _DO
_BLANK_PUNCTUATION = str.maketrans(dict.fromkeys(string.punctuation, " "))


def may_affirm(text: str) -> bool:
    """False only where ``affirmed`` is False for a message of ``text``: an ASCII text none of whose words (split at
    blanks and punctuation) is one of ``_YES_WORDS`` holds no yes (a word of assent and a request's verb are whole
    words). ~0.7 microseconds on a tau-bench user message where ``affirmed`` reads it in ~5."""
    if not text.isascii():
        return True
    return not _YES_WORDS.isdisjoint(text.lower().translate(_BLANK_PUNCTUATION).split())


def _opposed(requested: frozenset[str], asked: frozenset[str]) -> bool:
    """A request for one of a pair of opposite changes (``_OPPOSITES``) where the other was asked and it was not."""
    return any(a in requested and b in asked and a not in asked for a, b in _OPPOSITES)


def _per_view(view: TraceView, name: str) -> dict:
    """The view's memo ``name``, by message index, made empty at its first use: ``affirmed`` and ``refuses`` read each
    message once per view however many rules ask."""
    memo = view.__dict__.get(name)
    if memo is None:
        memo = view.__dict__[name] = {}
    return memo


def affirmed(view: TraceView, i: int) -> bool:
    """The user's message at ``i`` says yes, once per message of a view: ``affirmative(view.texts[i][:2000])``, or a
    request to do what the agent's reply before it asked leave for (``request_kinds``, ``leave_asked``): an action of
    a kind asked, or any where the request or the question names no kind; not the opposite of the change asked
    ("Please remove it." to "Shall I add a checked bag?": ``_OPPOSITES``). The confirmation rule and the first
    write's proposal (``detectors.confirmed_proposal``) ask it of the same user messages (tau-bench airline: 284
    questions a labelling pass, 168 of them distinct, ~3 microseconds each), and the user who says yes and leaves
    (``environment.UserQuitDetector``) of the message that ends the run."""
    memo = _per_view(view, "_affirmed")
    said = memo.get(i)
    if said is None:
        text = view.texts[i][:2000]
        told = unasked(text) if "?" in text else text  # (once for both readings)
        low = gate_text(told)
        said = _assents(told, low)
        requested = None
        if said:
            low = low if low is not None else told.lower()
            opening = _OPENING.match(low)
            if opening is not None and opening.group("act") is not None:
                requested = _shape_kinds(low, opening.group("verb"), opening.group("noun"), opening.end("verb"))
            said = not _held_back(low, opening, text) and not _asks_another(view, i, requested)
        elif (requested := request_kinds(text, told)) is not None:
            asked = leave_asked(_reply_before(view, i))
            said = asked is not None and (not requested or not asked or not requested.isdisjoint(asked)
                                          and not _opposed(requested, asked))
            if said:  # a request taken back or put off as a yes is ("Please cancel it. Actually, don't.")
                low = low if low is not None else told.lower()
                said = not _held_back(low, _OPENING.match(low), text)
        if said:  # (the kinds its request asks for, for ``refuses``)
            _per_view(view, "_yes_kinds")[i] = requested or frozenset()
        memo[i] = said
    return said


# A refusal of an action of some kind, anywhere in a message outside its questions: a negated verb of doing that
# names a kind (``_KINDS``), on what was asked ("don't cancel it", "never book the flight") or on nothing more ("I
# don't want to cancel", "please do not cancel yet"); its verb is looked up after the match (group 1). No leading
# ``\b``: the engine then skips to the first letters (d, n), and a match inside a word is set aside after
_REFUSED = re.compile(r"(?:do\s+not|don['’]t|never)\s+(?:(?:actually|just|really|yet|want(?:\s+you)?\s+to)\s+)?"
                      r"(\w+)(?=\s*(?:[.!,;\n\u2013\u2014-]|$|(?:it|that|this|them|those|these|yet|now|anything)\b|"
                      r"the\s+(\w+)))")
_CLAUSE_START = re.compile(r"(?:^|[.!,;\n\u2013\u2014-])")


def _request_at(low: str, start: int) -> frozenset[str]:
    """The kinds a request at ``start`` of ``low`` asks for (``_OPENING``'s act, or ``_ACT_SHAPE``); empty for none."""
    m = _OPENING.match(low, start)
    if m is not None and m.group("act") is not None:
        return _shape_kinds(low, m.group("verb"), m.group("noun"), m.end("verb")) or frozenset()
    if (m := _ACT_SHAPE.match(low, start)) is not None:
        return _shape_kinds(low, m.group(2), m.group(3), m.end(2)) or frozenset()
    return frozenset()


@lru_cache(maxsize=256)
def tool_kinds(name: str) -> frozenset[str]:
    """The kinds of action (``_KINDS``) a tool's name names ("cancel_pending_order": cancel), once per name."""
    return kinds_named(name)


def refuses(view: TraceView, i: int, kinds: frozenset[str]) -> bool:
    """The user's message at ``i`` refuses an action of one of ``kinds`` (a write's: ``kinds_named`` of its tool's
    name), or opens by asking only for actions of other kinds: "Don't cancel it. Yes, change it." before a
    cancellation (its yes is to the change), "Yes, change it." before one. A kind the message both refuses and asks
    for in any sentence ("Yes, cancel it, don't refund it to the gift card": a refund names a cancellation too) is
    asked for; a request of no kind ("Yes, please make the change.") is none, and a request in a later sentence asks
    for a detail as often ("Yes, go ahead with the return. Please send the refund to my card."), as in
    ``_asks_another``. Read where the confirmation rule found a yes before a write of some kind, once per message."""
    if not kinds:
        return False
    memo = _per_view(view, "_refusals")
    found = memo.get(i)
    if found is None:
        text = view.texts[i][:2000]
        low = text.lower()
        refused: set[str] = set()
        if any(map(low.__contains__, _NEGATING[1:])):  # (not, never, n't: a refusal holds one)
            said = unasked(low) if "?" in low else low
            for m in _REFUSED.finditer(said):
                k = m.start()
                if k and (said[k - 1].isalnum() or said[k - 1] == "_"):
                    continue
                if m.group(1) in _DO and (m.group(2) is None or m.group(2) in _DONE_TO):
                    refused |= kinds_named(m.group(1))
        # the opening request: as ``affirmed`` read it (most messages asked here were), else one anchored match or two
        opening = view.__dict__.get("_yes_kinds", {}).get(i)
        if opening is None:
            opening = _request_at(low, 0)
        requested = set(opening)
        if refused:  # a request at each clause's start
            for c in _CLAUSE_START.finditer(low):
                if c.end():
                    requested |= _request_at(low, c.end())
        found = memo[i] = (frozenset(refused - requested), opening)
    refused, opening = found
    return not refused.isdisjoint(kinds) or bool(opening) and opening.isdisjoint(kinds)


# NOT_AN_ANSWER and EXPLICIT_YES case-sensitive, for a ``gate_text`` as _AFFIRMATIVE_LOW (their literals are lower-case
# ASCII): cutting the lower-cased text's matches gives the lower-cased cut (the same spans, each replaced by a blank),
# itself a gate text. The case-blind cut tried its alternation at every character of the message (~4x slower)
_NOT_AN_ANSWER_LOW = re.compile(NOT_AN_ANSWER.pattern)
_EXPLICIT_YES_LOW = re.compile(EXPLICIT_YES.pattern)
_DECLINE_LOW = re.compile(DECLINE.pattern)  # (its literals lower-case ASCII too)
# a word each NOT_AN_ANSWER match holds: "sure" (make sure), "not", "never", or a negation's "n't" / "n’t"
_NEGATING = ("sure", "not", "never", "n't", "n’t")


_UNCUT = frozenset(("yes", "yeah", "yep", "yup"))
# _AFFIRMATIVE_LOW less its leading \b: a pattern that opens with a word, whose first letters the regex engine skips to
# (7 letters, about a quarter of a text's), where one that opens with \b starts a match at every character
_AFFIRMATIVE_WORD = re.compile(AFFIRMATIVE.pattern.removeprefix(r"\b"))


def _affirmative_words(low: str) -> Iterator[str]:
    """Group 1 of each match of ``_AFFIRMATIVE_LOW.finditer(low)``, in order, found by ``_AFFIRMATIVE_WORD``: a match of
    it at a word's start (the text's start, or after a character that is not ``\\w``: what the left ``\\b`` asks, since
    every affirmative opens with a letter) is ``_AFFIRMATIVE_LOW``'s match there, the same alternative taken; and
    where it matches elsewhere ("ok" in "book"), ``_AFFIRMATIVE_LOW`` matches nothing, so the search goes on from the
    next character. About 1.7x faster on tau-bench's user messages (tests/diagnosis/test_diagnosis_fast_paths.py)."""
    search = _AFFIRMATIVE_WORD.search
    pos = 0
    while (m := search(low, pos)) is not None:
        start = m.start()
        if start and (low[start - 1].isalnum() or low[start - 1] == "_"):  # re's \w: str.isalnum, or "_"
            pos = start + 1
            continue
        yield m.group(1)
        pos = m.end()


# the user choosing among what a reply offered, in the first person ("I'd like to go with Option 1", "Let's go with
# HAT100", "I'll take the first one", "We would prefer the morning flight"): it accepts that reply as a yes does. Not
# "take" in its idioms of handling or pausing ("take a look", "take a break", "take care", "take it from here", "take
# over", "take it up with the airline", "take our business elsewhere": ``_NOT_TAKEN``), nor a negation ("I don't want
# to go with", "let's not"), nor a question ("Should I go with Option 1?": ``unasked``), nor the verb followed by no
# choice of what was offered: a refusal ("I would prefer not to"), something else ("go with a different flight",
# "pick something else") or a choice put off ("I'll choose later")
_NOT_TAKEN = (r"a\s+(?:look|moment|minute|second|sec|break|step|while|breather|rest|chance|note)|care|time|note|over|"
              r"part|(?:it|this|that|them)\s+(?:from|up|back|easy|elsewhere|offline|further)|"
              r"(?:my|our)\s+(?:business|chances|time)")
CHOICE = re.compile(r"\b(?:i|we|let['’]?s|let\s+us)(?:['’]ll|['’]d|\s+will|\s+would)?"
                    r"(?:\s+(?:like|love|want)\s+to|\s+rather)?\s+"
                    rf"(?:go\s+with|take(?!\s+(?:{_NOT_TAKEN})\b)|choose|pick|opt\s+for|"
                    r"select|prefer)\b"
                    r"(?!\s+(?:not|never|neither|none|nothing|another|other|a\s+different|different|"
                    r"(?:something|anything|someone)\s+else|later)\b)", re.I)


def accepts(view: TraceView, i: int) -> bool:
    """The user message at ``i`` accepts the reply before it: a yes (``affirmed``) or a choice among what
    it offered (``CHOICE``)."""
    if affirmed(view, i):
        return True
    text = view.texts[i][:2000]
    return CHOICE.search(unasked(text) if "?" in text else text) is not None
