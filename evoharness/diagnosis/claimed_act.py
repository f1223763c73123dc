"""``F1.claimed_act``: an agent that said it was about to look something up and then reports having done it, with
nothing run in between.

In a multi-agent text log an act of looking (opening a page, retrieving an article, checking a schedule) shows as a
tool's output: a code run's report, a page a browser or file surfer shows, a tool agent's turn. An agent whose turn
announces such an act ("Please hold on while I verify the information", "Give me a moment to verify the details",
"I will now proceed to access the article") and whose next turn reports it done ("I have verified the class
schedules", "Having carefully reviewed the ending scene", "I have successfully retrieved the article"), when no tool
output came between the two, reports an act the log shows never happened: what it then states rests on nothing the
team was shown. An executor's answer that the message it got held no code (AG2's "There is no code from the last 1
message for me to execute": ``is_no_code_reply``) is no such output: it says nothing ran. That report is the failing
step, and its speaker the agent answerable for it (Who&When: "does not actually verify", "fabricates the content of
the website"). Read from what the turns say, not from an agent's name
or a framework's layout: the announcement and the report are one speaker's consecutive reasoning turns
(``AgentLog.reasoning_turns``) or one turn, the announcement first ("I'll check the online database ... After looking
up this information: Reggie Jackson, 86 walks": nothing runs inside a turn); the report holds no code (a turn with code
is doing the act) and is no plan (``PLANNED``: "Once I have gathered the data, I will share it"); the rule fires only
on failed runs (``FailedRunDetector``).

Not a claimed check alone: "I have verified the steps" after nothing was announced is as often a team member
re-reading the log's own work (an earlier rule that read the claim alone lost on Algorithm-Generated's third,
docs/diagnosis.md); the announcement says the act was to reach outside the conversation.
"""

from __future__ import annotations

import bisect
import re

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.failed_only import FailedRunDetector
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.diagnosis.multiagent import FENCE, AgentLog, _quote, is_no_code_reply

_LOOK = (r"search|check|verify|look|confirm|find|gather|retrieve|access|review|cross-reference|conduct|perform|open"
         r"|visit|consult|examine|browse|locate|obtain|fetch|download")
# a turn that says an act of looking is still to come: a wait request, or a first-person act announced
ANNOUNCED = re.compile(
    r"\b(?:hold on|give me a (?:moment|minute|second)|one moment|bear with me"
    rf"|(?:I will|I[’']ll|I am going to|I[’']m going to|let me)\s+(?:now\s+)?(?:proceed\s+to\s+)?(?:{_LOOK}))\b",
    re.IGNORECASE)
_DONE = (r"verified|checked|retrieved|reviewed|confirmed|looked up|searched|gathered|accessed|cross-referenced"
         r"|located|obtained|consulted|visited|examined|opened|browsed|fetched|downloaded")
_HOW = r"(?:(?:now|successfully|carefully|thoroughly|manually)\s+)*"
# a turn that reports such an act done, in the first person; its heads ("I have", "I've", "Having", "After") as they
# are written (``_may_claim`` scans for them), the rest case-blind
CLAIMED = re.compile(
    rf"\b(?:I(?: have|[’']ve)\s+(?i:{_HOW}(?:{_DONE}))"
    rf"|[Hh]aving\s+(?i:{_HOW}(?:reviewed|checked|verified|examined|cross-referenced|consulted|searched|looked"
    r"|visited|retrieved|accessed|browsed))"
    rf"|[Aa]fter\s+(?i:{_HOW}(?:reviewing|checking|verifying|visiting|searching|examining|consulting"
    r"|cross-referencing|looking|accessing|browsing)))\b")
# what a claimed act looked at, right after the claim: the team's own work, which the log holds ("I have reviewed the
# code above", "Having checked the calculations"): re-reading the conversation needs no tool
OWN_WORK = re.compile(r"\W*(?:(?:all|each|every|the|our|your|my|their|his|her|these|this|those|that|above|previous"
                      r"|provided|given|proposed)\s+)*(?:code|script|solution|calculation|computation|step|output"
                      r"|result|logic|reasoning|answer|conversation|discussion|work|analysis|finding|plan|approach)s?\b",
                      re.IGNORECASE)


def _may_claim(text: str) -> bool:
    """``CLAIMED`` can match: the text holds one of its heads as written (a C scan; the regex costs ~25 ns a character,
    and 5 of 6 Who&When reasoning turns hold none)."""
    return "I have" in text or "I've" in text or "I’ve" in text or "aving" in text or "fter" in text


# a sentence that speaks of an act still to come, or of one on a condition ("Once I have gathered the data, I will share
# it", "After checking, I'll report"): a plan, not a report
PLANNED = re.compile(r"\b(?:will|shall|going to|once|if|when|until)\b|[’']ll\b", re.IGNORECASE)
# where a sentence ends: a stop followed by white space, or a line break -- not the dot inside an address
# (anderson.example/schedule) or of an abbreviation (e.g., i.e., etc., vs.)
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](?=\s)|\n", re.IGNORECASE)


class _Plans:
    """Whether the sentence holding a claim is a plan (``PLANNED``), for any number of claims in one text: the sentence
    ends are found once and each sentence read once (a claim per sentence of a long turn, each read from the turn's
    start, was quadratic: 2,000 planned claims in a 120 KB turn took 11 s)."""

    def __init__(self, text: str) -> None:
        self.text = text
        ends = [(m.start(), m.end()) for m in _END.finditer(text)]
        self.starts, self.ends = [a for a, _ in ends], [b for _, b in ends]
        self.seen: dict[tuple[int, int], bool] = {}

    def planned(self, claim: re.Match[str]) -> bool:
        """The sentence holding ``claim`` speaks of the act as still to come or conditional."""
        k = bisect.bisect_right(self.ends, claim.start())  # the ends up to the claim
        j = bisect.bisect_left(self.starts, claim.end())  # the first end after it
        if (k, j) not in self.seen:
            start = self.ends[k - 1] if k else 0
            end = self.starts[j] if j < len(self.starts) else len(self.text)
            self.seen[k, j] = PLANNED.search(self.text, start, end) is not None
        return self.seen[k, j]


def _claim(text: str) -> re.Match[str] | None:
    """The turn's first report of an act done (``CLAIMED``), unless it is a look at the team's own work."""
    claim = CLAIMED.search(text)
    return None if claim is None or OWN_WORK.match(text, claim.end()) or _Plans(text).planned(claim) else claim


def _announced_then_claimed(text: str) -> tuple[re.Match[str], re.Match[str]] | None:
    """An act announced and, later in the same turn, reported done in a sentence that is no plan (``PLANNED``) and not
    of the team's own work: "I'll check the online database ... After looking up this information: Reggie Jackson, 86
    walks". A turn is one message: nothing can have run between its two sentences."""
    promise = ANNOUNCED.search(text)
    if promise is None:
        return None
    plans = _Plans(text)
    for claim in CLAIMED.finditer(text, promise.end()):
        if not OWN_WORK.match(text, claim.end()) and not plans.planned(claim):
            return promise, claim
    return None


def first_claimed_act(view: TraceView) -> Signal | None:
    """The first reasoning turn, with no code, that reports an act of looking done (``CLAIMED``) where its speaker's
    previous reasoning turn announced it (``ANNOUNCED``, outside code) and no tool output lies between the two, or
    where the turn itself announced it before the report."""
    log = AgentLog.of(view)
    if not log.applies:
        return None
    last_turn: dict[str, int] = {}  # a named speaker's latest reasoning turn so far
    last_tool = -1  # the latest tool output so far (an executor's "no code" reply ran nothing: no act done)
    reasoning = set(log.reasoning_turns)
    for i in log.assistant_steps:
        if i not in reasoning:
            if log.is_tool(i) and not is_no_code_reply(log.text(i)):
                last_tool = i
            continue
        raw = log.msgs[i].get("name")
        if not raw:
            continue  # no speaker named: whose announcement it answers cannot be told
        name = str(raw)  # the speaker as ``AgentLog.agents`` names it (a hand-written log's name may be a JSON object)
        before, last_turn[name] = last_turn.get(name), i
        text = log.text(i)
        if "```" in text or not _may_claim(text):
            continue
        found = _announced_then_claimed(text)  # announced and reported in one turn
        where = "earlier in the same turn"
        if found is None and before is not None and before >= last_tool:
            claim = _claim(text)
            promise = ANNOUNCED.search(FENCE.sub(" ", log.text(before))) if claim is not None else None
            if claim is not None and promise is not None:
                found, where = (promise, claim), f"at step {before}"
        if found is None:
            continue
        promise, claim = found
        return Signal(id=ClaimedActDetector.id, failure_class=FailureClass.F1, step=i,
                      evidence=f"reports {claim.group(0)!r} of what it announced {where} "
                               f"({promise.group(0)!r}), with no tool output between: {_quote(text)}")
    return None


class ClaimedActDetector(FailedRunDetector):
    id = "F1.claimed_act"
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it
    find = staticmethod(first_claimed_act)
