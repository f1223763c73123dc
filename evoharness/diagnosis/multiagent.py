"""Detectors for multi-agent text logs (Who&When, AgentRx Magentic-One, AG2 CaptainAgent).

These logs have no tool calls: agents talk, and some agents *are* tools (a terminal that
prints ``exitcode: 1``, a web surfer that reports what it clicked). They apply only to
trajectories whose assistant messages carry two or more agent ``name``s; a single-agent
tool-calling trace is never read by them.

Rules (each documented where it fires; tuned on Who&When Algorithm-Generated only):

- ``F1.unsupported_fact``: the first reasoning turn that says it simulates, assumes or
  makes up data (``FABRICATION``, not in a passage it copies from an earlier tool's output: ``_own_fabrication``), or
  states two or more numbers (three or more digits)
  that appear nowhere earlier in the log or the task (an earlier number rounded or cut to fewer decimals is relayed,
  not new: ``_rounded_from``). A reasoning turn is one by an agent
  that is not a tool (``agent_role``) and not a tool's output posted under an agent's name (a code run's
  report, ``is_exec_report``; a page a browser or file surfer shows, ``webtext.is_page``: ``Address: ...`` / ``Title:
  ...`` or a MultimodalWebSurfer's ``Here is a screenshot of [...](...)``), not the opening task
  restatement, not a plan or ledger of an orchestrator, and outside fenced code.
- ``F1.unseen_report``: an agent's turn right after a page it showed itself (AG2's WebServing_Expert posts the pages
  its browser shows under its own name) that states a number of three or more digits neither that page nor any earlier
  message holds: it reports something it did not see (``UnseenReportDetector``).
- ``F2.guardrail``: a tool agent's message saying a site or service refused it (``webtext.refusal``): the page it
  landed on is a block or challenge page (its title, or a challenge addressed to the visitor: "verify you are human",
  "unusual traffic from your computer network", "you have been blocked"), its program got a 403 / 429, or its own
  words report a refusal (a captcha, access denied). A word that only appears on an ordinary page (a "protected by
  reCAPTCHA" footer, an article about Cloudflare) is no refusal: the humans' "Guardrails Triggered".
- ``F4.no_progress``: the first Magentic-One ledger that says progress is not being made
  (or the team is in a loop) points at the agent action it judged: the last non-orchestrator
  message before it. A ledger is headed ``Updated Ledger`` or is the bare JSON object AutoGen 0.2's
  orchestrator prints (``is_ledger``); either way it is no reasoning turn. Class F4 (the instruction was not
  carried out), not F3: the run went on.
- ``F4.handoff_code``: an opening handoff (the team's task restatement) that carries code -- a prior
  attempt's code or the code to fix, which the team runs and builds on: its first code run comes before any agent
  writes code of its own -- and whose handed-over results
  report no failure: the run's first commitment is that code, at the opening message. (A handoff that
  says the last attempt failed is redone, so it is not relied on: ``reports_failure``, its prose or a section
  headed for errors or issues that lists some; a heading or code is no report.)
- ``F4.lost_task``: an opening handoff that has lost the user's request -- it holds fewer than half the distinct words
  (three letters or more) of the task, where a handoff restates it: the team was handed another task (a stale error
  message in its place), and no step after it can answer the request. The planner's instruction is the decisive error,
  not the agents who carry it out.
- ``F4.answer_origin``: the first message that contains the final answer's value (the text after the
  last ``FINAL ANSWER:``, four to 80 characters, not a non-answer such as "unable to determine", not in
  the task): the agent that produced the value the wrong answer used, where it first produced it. The
  final-answer message itself is not an origin.
- ``F4.accepted_report``: in an orchestrated log (Magentic-One ledgers), the last worker report before
  the first ledger that declares the request satisfied: the report the orchestrator relied on to stop,
  in a run that failed. Used where the answer's value has no earlier origin. Where that report says the worker
  did not get there ("I was unable to find ...": ``REPORTED_FAILURE`` in its own first paragraph, not the page it
  shows), ending the run on it was the orchestrator's call: the signal is the satisfied ledger itself.
- ``F4.first_commitment``: where no other signal fires, a failed run's content failure is
  located at its first commitment: the reasoning turn that wrote the code whose execution failed first
  (the last reasoning turn with code before the first run that exited non-zero, ``ran_and_failed``, not AG2's
  ``unknown language`` answer to a block it could not run, ``UNKNOWN_LANGUAGE``: no code ran; with no
  reasoning turn before that run, the opening handoff when it carries code: the code that ran is the handoff's),
  else the first reasoning turn with code (the first action the run builds on) -- unless that code ran clean and the
  next reasoning turn calls its result wrong and replaces the code (``rejected_and_replaced``): the replacement is
  then the first action the run builds on -- else the first reasoning turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import lru_cache

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView, once
from evoharness.diagnosis.models import FailureClass, Signal
from evoharness.diagnosis.webtext import ToolText, is_page, refusal
from evoharness.traces.patterns import gate_text

F1, F2, F4 = FailureClass.F1, FailureClass.F2, FailureClass.F4

# An agent's role, from its name: one rule for every multi-agent log (Who&When, AgentRx, AG2, AutoGen 0.2 and 0.4+,
# Magentic-One 0.2 and 0.4). The name is split into words (CamelCase, snake_case, kebab-case, digits: ``NAME_WORD``);
# trailing words that say nothing of a role -- ``agent`` and numbers (``WebSurferAgent``, ``executor_agent``,
# ``coder_2``) -- are dropped; the last word left is the head noun, and its role is ``ROLE_OF_HEAD``'s (any other head:
# ``agent``, a reasoning agent). A word elsewhere only qualifies the head: ``WomenInComputerScienceHistory_Expert`` is
# an expert, ``Orchestrator_Expert`` no orchestrator. An executor runs what it is given and chooses nothing; a tool
# (an executor, or a web / file surfer, a browser) reports what it did or saw; an orchestrator writes the plans and
# ledgers of a Magentic-One team. docs/diagnosis.md ("Agent roles") tabulates the names each role accepts.
ROLE_OF_HEAD = {"orchestrator": "orchestrator", "terminal": "executor", "executor": "executor", "computer": "executor",
                "runner": "executor", "sandbox": "executor", "interpreter": "executor", "shell": "executor",
                "console": "executor", "repl": "executor", "surfer": "tool", "browser": "tool"}
ROLE_SUFFIX = re.compile(r"agent|\d+", re.IGNORECASE)  # trailing words that name no role
# ``interpreter`` names an executor alone or after a word of code (``Interpreter``, ``Code_Interpreter``,
# ``python_interpreter``); after another word it is an expert who interprets (``Results_Interpreter``,
# ``Data_Interpreter``, ``LanguageInterpreter``)
CODE_WORDS = frozenset(("code", "python", "py", "ipython", "jupyter", "shell", "bash", "sh", "js", "javascript",
                        "node", "sql", "command", "cmd", "script", "program"))
NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# a plan or ledger of an orchestrator, or the team's opening restatement: no agent's reasoning. Magentic-One 0.2 opens
# its task ledger with "Initial plan:" / "New plan:"; AutoGen 0.4's MagenticOneOrchestrator posts the ledger bare ("We
# are working to address the following user request: ... Here is an initial fact sheet ...": its educated guesses are
# guesses, not facts an agent states)
# AutoGen 0.2's orchestrator (the agentchat_contrib one Magentic-One began as) prints its progress ledger bare, as the
# JSON object alone (``{"is_request_satisfied": {...}, "is_progress_being_made": {...}, "next_speaker": ...}``), where
# Magentic-One 0.2 and AutoGen 0.4 head it ``Updated Ledger:``: a ledger either way (``is_ledger``)
LEDGER_JSON = re.compile(r'\s*\{\s*"(?:is_request_satisfied|is_progress_being_made|is_in_loop|next_speaker|'
                         r'instruction_or_question)"\s*:')
# Magentic-One 0.2's orchestrator reporting a ledger it could not parse ("Failed to parse ledger information: {...}",
# the raw ledger after it) is a ledger too, no claim
CONTROL = re.compile(r"\s*(initial plan|new plan|updated ledger|next speaker|stalled|replan|"
                     r"failed to parse ledger information|"
                     r"you are given: \(1\) a task|we are working to address the following user request|"
                     + LEDGER_JSON.pattern.removeprefix(r"\s*") + ")", re.IGNORECASE)
FABRICATION = re.compile(
    r"\b(simulat(?:e|ed|ing|ion)|hypothetical(?:ly)?|placeholder|mock(?:ed)? data|dummy|"
    r"fictional|made[- ]up|for (?:demonstration|illustration)|let's assume|assuming|sample data|example data)\b",
    re.IGNORECASE,
)
# "placeholder" counts where the agent uses placeholder values ("fill the gaps with placeholder data", "a placeholder
# 'N/A' for each distance"), not where it names a slot its code leaves to fill: the object of a verb of filling, with
# no "with" / "by" / "using" between ("replace the placeholder `YOUR_API_KEY` with a real key", "fill in the {api_key}
# placeholder"), or the subject of one still to be done ("the YOUR_API_KEY placeholder must be replaced"), and no
# "use" before it: unfinished code, no data made up (``_names_a_slot``)
SLOT_BEFORE = re.compile(r"\b(?:replac|fill|substitut|swap|insert|updat)\w*(?:\s+(?:in|out))?\b"
                         r"(?:(?!\b(?:with|by|using|use[sd]?)\b)[^.;!?\n]){0,40}$", re.IGNORECASE)
SLOT_AFTER = re.compile(r"s?(?:\s+\S+){0,3}?\s+(?:must|should|needs?\s+to|has\s+to|have\s+to|is\s+to|are\s+to)\s+"
                        r"be\s+(?:replaced|filled|substituted|set)\b", re.IGNORECASE)
SLOT_USED = re.compile(r"\bus(?:e|es|ed|ing)\b[^.;!?\n]{0,40}$", re.IGNORECASE)


def _names_a_slot(prose: str, m: re.Match[str]) -> bool:
    """Whether the ``FABRICATION`` match ``m`` is "placeholder" naming a slot to fill (``SLOT_BEFORE``,
    ``SLOT_AFTER``), not placeholder values the agent uses."""
    if m.group(0).lower() != "placeholder":
        return False
    before = prose[max(0, m.start() - 60):m.start()]
    if SLOT_USED.search(before):
        return False
    return SLOT_BEFORE.search(before) is not None or SLOT_AFTER.match(prose, m.end()) is not None


def first_fabrication(prose: str) -> re.Match[str] | None:
    """The first ``FABRICATION`` match of ``prose`` that is not a slot named (``_names_a_slot``)."""
    m = gated_search(FABRICATION, FABRICATION_WORDS, prose)
    while m is not None and _names_a_slot(prose, m):
        m = FABRICATION.search(prose, m.end())
    return m
# a word every match of FABRICATION holds: the case-blind regex (which tries a match at every character:
# ~1 ms a Who&When log for each) runs only where one occurs lower-cased, or in a text that may fold onto them ("ſ":
# gate_text)
FABRICATION_WORDS = ("simulat", "hypothetical", "placeholder", "mock", "dummy", "fictional", "made", "demonstration",
                     "illustration", "let's assume", "assuming", "sample data", "example data")


def gated_search(pattern: re.Pattern[str], words: tuple[str, ...], text: str) -> re.Match[str] | None:
    """``pattern.search(text)``, or None at once for a text that holds none of ``words`` lower-cased (every match
    of the case-blind ``pattern`` holds one of them; ``gate_text``: not where a character may fold onto them)."""
    low = gate_text(text)
    if low is not None and not any(w in low for w in words):
        return None
    return pattern.search(text)


# a number not inside a word or after a decimal point, ``(?<![\w.])\d[\d,]*(?:\.\d+)?`` written digit first (the
# lookbehind then checks the character before that digit; at the text's start it has no room and passes, as the
# other's does): a pattern that opens with a character class lets the engine skip to a digit, where one that opens
# with a lookbehind tries a match at every character (~4x the time on Who&When's messages)
NUMBER = re.compile(r"\d(?<![\w.]\d)[\d,]*(?:\.\d+)?")
# where a place is, not a fact about it: a street address, a ZIP code, a phone number, coordinates. One such datum
# splits into several numbers (a house number and a ZIP; three groups of a phone number; a latitude and a longitude),
# so a single address met the two-numbers bar of F1.unsupported_fact alone; their digits are not counted as new
# numbers. Case-sensitive: a street type and a state are capitalised ("in 20500 cases" is no ZIP).
_STATES = ("AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND "
           "OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY PR").replace(" ", "|")
_STREET = r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Drive|Dr|Lane|Ln|Parkway|Pkwy"
_LOCATION = (
    # a street address: a house number, one to four capitalised or numbered words, a street type ("350 5th Ave")
    rf"(?<![\w.,])\d{{1,6}}[A-Z]?(?:-\d{{1,5}})?\s+(?:[NSEW]\.?\s+)?(?:(?:[A-Z][\w'.-]*|\d{{1,3}}(?:st|nd|rd|th))\s+){{1,4}}"
    rf"(?:{_STREET})\b"
    # a US ZIP code after a state's two letters, ZIP+4, or after the words zip / postal code
    rf"|\b(?:{_STATES}),?\s+\d{{5}}(?:-\d{{4}})?\b|(?<![\w.,-])\d{{5}}-\d{{4}}\b"
    r"|(?i:\b(?:zip|postal)(?:\s*code)?\s*:?\s*)\d{3,6}(?:-\d{4})?\b"
    # a phone number: (555) 123-4567, 555-123-4567 / 555.123.4567, +44 20 7946 0958, "phone: 555 0100"
    r"|(?:\+\d{1,3}[\s.-]?)?\(\d{2,4}\)\s?\d{3,4}[\s.-]\d{4}\b|(?:\+\d{1,3}[\s.-]?)?(?<![\w.,-])\d{3}([.-])\d{3}\1\d{4}\b"
    r"|\+\d{1,3}(?:[\s.-]\d{1,5}){2,4}\b"
    r"|(?i:\b(?:phone|tel|telephone|fax)\.?(?:\s*(?:number|no\.?))?\s*:?\s*)\+?[\d(][\d\s().-]{5,18}\d"
    # coordinates: degrees with a hemisphere (40.7128° N, 40°42′46″N), a latitude, longitude pair of decimals of four
    # or more places (40.7128, -74.0060), or a number named latitude / longitude
    r"|(?<![\w.])\d{1,3}(?:\.\d+)?\s?°(?:\s?\d{1,2}(?:\.\d+)?\s?['′](?:\s?\d{1,2}(?:\.\d+)?\s?[\"″])?)?\s?[NSEW]\b"
    r"|(?<![\w.])-?\d{1,2}\.\d{4,},\s*-?1?\d{1,2}\.\d{4,}"
    r"|(?i:\b(?:lat(?:itude)?|lon(?:g(?:itude)?)?|lng)\s*[:=]?\s*)-?\d{1,3}\.\d+")


@lru_cache(maxsize=1)
def location() -> re.Pattern[str]:
    """The place pattern (``_LOCATION``), compiled on first use: about 7 ms, paid only by a log with a turn of two
    or more new numbers, not at import."""
    return re.compile(_LOCATION)


FENCE = re.compile(r"```[^`]*(?:`(?!``)[^`]*)*```")
LEDGER_STALL = re.compile(
    r'"is_in_loop"\s*:\s*\{[^{}]*"answer"\s*:\s*true|"is_progress_being_made"\s*:\s*\{[^{}]*"answer"\s*:\s*false'
)
# a code run that exited non-zero, in the executors' own wording: AG2's terminal (``exitcode: 1 (execution
# failed)``), Magentic-One's ComputerTerminal (``The script ran, then exited with Unix exit code: 1``, ``...
# produced no output to console. The Unix exit code was: 1``), AutoGen's CodeExecutorAgent (``... exited with
# an error (POSIX exit code: 1)``)
# Any other executor's opening statement of its exit code, in the words such reports use (a general vocabulary, not
# one framework's line): ``Exit code: 1``, ``exit_status=1``, ``Return code: 1``, ``<returncode>1</returncode>``,
# ``Process finished with exit code 1``, ``[Command exited with code 1]``, ``Execution failed with exit code 1``:
# ``EXIT_STATEMENT`` is such a statement up to its code, which follows it
EXIT_STATEMENT = (r"\s*[\[(<]?\s*(?:(?:the\s+)?(?:process|command|script|program|execution|code|run)\s+"
                  r"(?:finished|exited|ended|completed|terminated|failed|ran|returned)\s+with\s+(?:an?\s+)?"
                  r"(?:exit\s+)?(?:code|status)"
                  r"|exit[ _]?(?:code|status)|return[ _]?code|returncode>?)\s*[:=]?\s*")
# The frameworks' own lines are a run's report whoever posts them (AG2's ``user_proxy`` runs the assistant's code and
# posts it under its own name); an exit code stated in other words is one only in an executor's turn (``agent_role``):
# an expert opening with "Exit code 1 would have meant ..." quotes or discusses a code, it ran nothing
EXEC_FAILED = re.compile(r"\s*(?:exitcode: [1-9]|The script ran, then exited with (?:Unix exit code: |an error "
                         r"\(POSIX exit code: )[1-9]|The script ran but produced no output to console\. "
                         r"The (?:Unix|POSIX) exit code was: [1-9])", re.IGNORECASE)
EXIT_FAILED = re.compile(rf"{EXIT_STATEMENT}(?:[1-9]|-\d)", re.IGNORECASE)
# AG2's executor meeting a code block whose language it does not know (``unknown language json``, ``... plaintext``,
# ``... unknown``: a fence tagged with no language it runs) runs nothing for it and answers exit code 1 with that line
# last (the blocks before it ran, the ones after it are skipped): no code ran and failed -- a format problem of the
# reply that posted the block, not a failed run. A script's own message quoting the words (``ValueError: unknown
# language x``) is not AG2's line and stays a failure.
UNKNOWN_LANGUAGE = re.compile(r"(?:\n|Code output: ?)unknown language[^\n]*\s*$")
# an executor's report of a code run, whatever its exit code, in the executors' own wording (as ``EXEC_FAILED``): the
# text opens with it, so a reasoning turn that mentions an exit code later on is no report. Whoever posts it, it is a
# tool's output: in AG2's two-agent chat the ``user_proxy`` runs the assistant's code and posts the report under its
# own name, as an executor under a name that does not say so (``executor_agent``) would.
EXEC_REPORT = re.compile(r"\s*(?:exitcode: \d|The script ran(?:, then exited with "
                         r"| but produced no output to console))", re.IGNORECASE)
EXIT_REPORTED = re.compile(rf"{EXIT_STATEMENT}-?\d", re.IGNORECASE)
# AG2's executor answering a message that holds no code: it ran nothing (``There is no code from the last 1 message for
# me to execute. Group chat manager should let other participants ...``)
NO_CODE = re.compile(r"\s*There is no code from the last \d+ messages? for me to execute")
LEDGER_SATISFIED = re.compile(r'"is_request_satisfied"\s*:\s*\{[^{}]*"answer"\s*:\s*true')
# a worker's report that says it did not get what it was asked for ("I was unable to find ...", "The search returned no
# results"), read in its own first paragraph (``_report_head``), not in the page or file a surfer shows (a page saying
# "No results found" is no report of the surfer's)
REPORTED_FAILURE = re.compile(r"\b(?:unable to|could not|couldn't|cannot|can't|(?:was|were) not able to|"
                              r"did not find|didn't find|no (?:relevant )?results|failed to)\b", re.IGNORECASE)
OPENING = re.compile(r"\s*you are given: \(1\) a task", re.IGNORECASE)
HANDOFF_RESULTS = re.compile(r"^#+ *results\b[^\n]*from last response", re.IGNORECASE | re.MULTILINE)
# a report in the handed-over results that the last attempt failed, read in their prose (``handoff_prose``): whole
# words, so an exception's name (``ValueError``, ``ConnectionError``) is no report
HANDOFF_FAILED = re.compile(r"\b(?:not (?:been )?completed|could not|couldn't|unable|error|fail)", re.IGNORECASE)
MD_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t][^\n]*$", re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
NOT_LINE_BREAK = re.compile(r"[^\n]")
# a heading of a section for the errors or issues met (CaptainAgent's "## Errors or issues in the conversation"): what
# the section lists is a report of them, unless it says there were none
ISSUES_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t][^\n]*\b(?:errors?|issues?|problems?)\b[^\n]*$",
                            re.IGNORECASE | re.MULTILINE)
# a failure said not to have happened ("no errors were noted", "ran without errors", "did not fail"): no report
NO_FAILURE = re.compile(r"\b(?:no|without|zero)[^\S\n]+(?:errors?|failures?)\b|\b(?:did[^\S\n]+not|didn't|never)"
                        r"[^\S\n]+fail", re.IGNORECASE)
# "None", "None identified.", "no issues were noted": the section says there were none
NONE_SAID = re.compile(r"\W*(?:(?:none|nothing)(?:[^\S\n]+(?:identified|noted|found|observed|reported|detected|"
                       r"encountered|so far))*|n/?a|no (?:errors?|issues?|problems?)\b[^\n]*|there (?:were|was|are|is) "
                       r"no (?:errors?|issues?|problems?)\b[^\n]*)\W*", re.IGNORECASE)
FINAL_ANSWER = re.compile(r"FINAL ANSWER:[ \t]*([^\n]*)", re.IGNORECASE)
# no leading ``\s*``: tried at every position of a run of blanks, it made ``sub`` quadratic (a final answer padded with
# 100,000 spaces took ~45 CPU-s); answer_key's split/join drops the blanks before the noise anyway
HARNESS_NOISE = re.compile(r"(?:SCENARIO\.PY COMPLETE|RUN\.SH COMPLETE|!#!#).*$", re.DOTALL)
NON_ANSWER = re.compile(r"\b(unable|unknown|cannot|can't|could not|not (?:be )?(?:determined|found|available)|"
                        r"no (?:answer|data|information)|n/a|none)\b", re.IGNORECASE)
LEDGER_REASON = re.compile(r'"is_progress_being_made"\s*:\s*\{\s*"reason"\s*:\s*"([^"]{0,300})')


def handoff_prose(text: str) -> str:
    """What a handoff's text says in its own words: without its code (fenced blocks, an unclosed one to the end, and
    inline code spans) and its template's headings (the group-chat manager's ``## Errors or issues in the
    conversation`` is a heading every handoff carries, not a report of an error)."""
    text = FENCE.sub("\n", text)
    if (start := text.find("```")) >= 0:
        text = text[:start]
    return MD_HEADING.sub("", INLINE_CODE.sub(" ", text))


def code_blanked(text: str) -> str:
    """``text`` with its fenced code (an unclosed fence to the end) blanked, its line breaks kept: a place in it is the
    same place in ``text``, so a heading found in it is one outside code (a ``# ...`` line in code is a comment)."""
    text = FENCE.sub(lambda m: NOT_LINE_BREAK.sub(" ", m.group()), text)
    if (start := text.find("```")) >= 0:
        text = text[:start] + NOT_LINE_BREAK.sub(" ", text[start:])
    return text


def reports_failure(results: str) -> bool:
    """Whether a handoff's handed-over results (the text after their heading) say the last attempt failed: their
    prose says so (``HANDOFF_FAILED``; "no errors", "did not fail" do not), or a section headed for errors or issues
    (a heading outside code) lists some: anything, code too, but "None" (``NONE_SAID``).
    A heading or code is no report: the template heads every handoff "Errors or issues in the conversation", and
    code names exceptions (``except ValueError:``)."""
    if HANDOFF_FAILED.search(NO_FAILURE.sub(" ", handoff_prose(results))):
        return True
    outside_code = code_blanked(results)  # a heading is one outside code
    for head in ISSUES_HEADING.finditer(outside_code):
        following = MD_HEADING.search(outside_code, head.end() + 1)
        # all the section holds, its code too: a traceback shown as a block is a report
        said = results[head.end():following.start() if following else len(results)].strip()
        if said and not NONE_SAID.fullmatch(said):
            return True
    return False


def is_ledger(text: str) -> bool:
    """An orchestrator's progress ledger: headed ``Updated Ledger`` (Magentic-One 0.2, AutoGen 0.4) or the bare JSON
    object AutoGen 0.2's orchestrator prints (``LEDGER_JSON``)."""
    return text.lstrip().startswith("Updated Ledger") or bool(LEDGER_JSON.match(text))


def ran_and_failed(text: str, speaker: str) -> bool:
    """A reply saying code ran and exited non-zero: a framework's line (``EXEC_FAILED``), or an exit code in other
    words in an executor's turn (``EXIT_FAILED``); not AG2's "unknown language" answer to a block it could not run
    (``UNKNOWN_LANGUAGE``)."""
    return (bool(EXEC_FAILED.match(text)) or is_executor_name(speaker) and bool(EXIT_FAILED.match(text))) \
        and not UNKNOWN_LANGUAGE.search(text)


def _quote(text: str, limit: int = 160) -> str:
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


@lru_cache(maxsize=1024)
def agent_role(name: str) -> str:
    """``orchestrator``, ``executor``, ``tool`` (a surfer or browser) or ``agent``: the role of the name's head noun,
    its last word once trailing ``agent`` and numbers are dropped (``ROLE_OF_HEAD``)."""
    words = NAME_WORD.findall(name)
    while words and ROLE_SUFFIX.fullmatch(words[-1]):
        words.pop()
    if not words:
        return "agent"
    head = words[-1].lower()
    if head == "interpreter" and len(words) > 1 and words[-2].lower() not in CODE_WORDS:
        return "agent"
    return ROLE_OF_HEAD.get(head, "agent")


def is_tool_name(name: str) -> bool:
    """A tool agent is named for what it is (``agent_role``): an executor (``Computer_terminal``, ``ComputerTerminal``,
    ``code_executor``, ``executor_agent``) or a surfer / browser (``WebSurfer``, ``WebSurferAgent``)."""
    return agent_role(name) in ("executor", "tool")


def is_executor_name(name: str) -> bool:
    """An executor (``agent_role``): it runs the code it is given and chooses nothing."""
    return agent_role(name) == "executor"


def is_orchestrator_name(name: str) -> bool:
    """An orchestrator (``agent_role``): Magentic-One's ``Orchestrator``, AutoGen 0.4's ``MagenticOneOrchestrator``."""
    return agent_role(name) == "orchestrator"


def is_exec_report(text: object, speaker: str) -> bool:
    """A code run's report: a framework's own line (``EXEC_REPORT``), whoever posted it, or an exit code in other words
    (``EXIT_REPORTED``) in an executor's turn."""
    return isinstance(text, str) and (bool(EXEC_REPORT.match(text))
                                      or is_executor_name(speaker) and bool(EXIT_REPORTED.match(text)))


def is_no_code_reply(text: object) -> bool:
    """AG2's executor saying the message it answered held no code (``NO_CODE``): nothing ran."""
    return isinstance(text, str) and bool(NO_CODE.match(text))


def responsible_agent(messages: list[dict], step: int) -> str | None:
    """The agent answerable for a step: its speaker -- except at an executor's output (a terminal, a code
    executor: it runs the code it is given and chooses nothing; or a code run's report under any name, such as
    AG2's ``user_proxy``), where it is the agent that wrote the code it ran (the last earlier turn with a code
    fence by an agent that is not a tool, not itself a report). A web or file surfer chooses its own clicks, so it
    answers for its own steps. Where the executor ran nothing because the message it answered held no code (AG2's
    "There is no code from the last 1 message"), it is the agent of that message: the last earlier agent that is not
    a tool -- not the author of some older code. At a tool call's result (a ``tool`` message) it is the named agent
    whose call it answers (an AutoGen AgentChat team: the result's own ``name`` is the tool's)."""
    if not 0 <= step < len(messages):
        return None
    if messages[step].get("role") == "tool":
        caller = _caller(messages, step)
        if caller is not None:
            return caller
    name = messages[step].get("name")
    if name and is_no_code_reply(messages[step].get("content")):
        return next((str(m["name"]) for m in reversed(messages[:step]) if m.get("role") == "assistant"
                     and m.get("name") and not is_tool_name(str(m["name"]))
                     and not is_exec_report(m.get("content"), str(m["name"]))
                     and not is_no_code_reply(m.get("content"))), str(name))
    if not name or not (is_executor_name(str(name)) or is_exec_report(messages[step].get("content"), str(name))):
        return str(name) if name else None
    for j in range(step - 1, -1, -1):
        m = messages[j]
        author = m.get("name")
        text = m.get("content")
        if m.get("role") == "assistant" and author and not is_tool_name(str(author)) and isinstance(text, str) \
                and "```" in text and not is_exec_report(text, str(author)):
            return str(author)
    return str(name)


def _caller(messages: list[dict], step: int) -> str | None:
    """The name of the assistant whose tool call the ``tool`` message at ``step`` answers (same ``tool_call_id``),
    None when that assistant has no name or no earlier call has the id."""
    cid = messages[step].get("tool_call_id")
    for j in range(step - 1, -1, -1):
        m = messages[j]
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        if isinstance(calls, list) and any(isinstance(c, dict) and c.get("id") == cid for c in calls):
            return str(m["name"]) if m.get("name") else None
    return None


class AgentLog:
    """The multi-agent reading of a trajectory: speakers, reasoning turns, tool outputs."""

    def __init__(self, view: TraceView) -> None:
        # the view's parts, not the view: the view keeps its AgentLog (``of``), and a log holding the view back would
        # make the two a reference cycle, which keeps the whole trajectory alive until the garbage collector runs
        self.msgs = view.traj.messages
        self.calls = view.calls
        self.task = view.traj.task
        self.assistant_steps = view.assistant_steps
        self._tool: dict[int, bool] = {}  # is_tool's answers by step: several rules ask it of each message

    @once
    def agents(self) -> set[str]:
        return {str(m["name"]) for m in self.msgs if m.get("role") == "assistant" and m.get("name")}

    @once
    def applies(self) -> bool:
        return not self.calls and len(self.agents) >= 2

    @staticmethod
    def of(view: TraceView) -> AgentLog:
        """One AgentLog per view (the detectors share it)."""
        log = view.__dict__.get("_agent_log")
        if log is None:
            log = view.__dict__["_agent_log"] = AgentLog(view)
        return log

    def text(self, i: int) -> str:
        c = self.msgs[i].get("content")
        return c if isinstance(c, str) else ""

    def is_tool(self, i: int) -> bool:
        """A tool agent's turn, or a tool's output posted under an agent's name (a page a browser or file surfer shows,
        ``webtext.is_page``; a code run's report; an executor's "no code" reply)."""
        tool = self._tool.get(i)
        if tool is None:
            text, name = self.text(i), str(self.msgs[i].get("name") or "")
            tool = self._tool[i] = (is_tool_name(name) or is_page(text) or is_exec_report(text, name)
                                    or is_no_code_reply(text))
        return tool

    def is_orchestrator(self, i: int) -> bool:
        return is_orchestrator_name(str(self.msgs[i].get("name") or ""))

    @once
    def answer_key(self) -> tuple[str, int] | None:
        """The final answer's value (lower-cased) and the step stating it: the text after the last
        ``FINAL ANSWER:``, 4-80 characters, harness noise cut, not a non-answer."""
        for i in range(len(self.msgs) - 1, -1, -1):
            text = self.text(i)
            low = gate_text(text)  # the case-blind regex runs only where its literal may be (a C scan)
            found = FINAL_ANSWER.findall(text) if low is None or "final answer:" in low else None
            if not found:
                continue
            key = " ".join(HARNESS_NOISE.sub("", found[-1]).split()).strip(" .*\"'`")
            if 4 <= len(key) <= 80 and not NON_ANSWER.search(key):
                return key.lower(), i
            return None
        return None

    @once
    def answer_origin(self) -> tuple[str, int] | None:
        """The answer's value and the first assistant step before the final answer that holds it (not when the
        task itself holds it: then the answer echoes the question)."""
        if self.answer_key is None:
            return None
        key, final = self.answer_key
        pattern = re.compile(r"(?<!\w)" + re.escape(key) + r"(?!\w)", re.IGNORECASE)
        if _holds(pattern, key, self.task or ""):
            return None
        for i in self.assistant_steps:
            if i >= final:
                break
            if _holds(pattern, key, self.text(i)):
                return key, i
        return None

    @once
    def reasoning_turns(self) -> list[int]:
        """Assistant turns by non-tool agents, past the opening restatement, not plans/ledgers, not empty."""
        out = []
        for i in self.assistant_steps:
            text = self.text(i)
            if self.is_tool(i) or CONTROL.match(text) or not text.strip() or text.strip() == "TERMINATE":
                continue
            out.append(i)
        return out


def _plain_numbers(text: str) -> list[str]:
    """``[n.replace(",", "") for n in NUMBER.findall(text)]`` with one join, replace and split for the lot (a number
    holds no blank), not a Python step per number: a Who&When log's messages hold ~130 numbers a run."""
    found = NUMBER.findall(text)
    if not found:
        return found
    joined = " ".join(found)
    return joined.replace(",", "").split(" ") if "," in joined else found


def _rounded_from(number: str, seen: set[str] | dict[str, set[str]]) -> bool:
    """``number`` is an earlier, more precise number rounded or cut to its own decimals (``791.65`` or ``792`` after a
    run printed ``791.6543403552349``): the value is relayed, not introduced -- the agent whose output first held it
    answers for it. Read only for a number that is otherwise new. ``seen``: the earlier numbers, or their decimals by
    integer part (``_by_whole``; only those with this number's integer part or the one below can round to it: a pass
    over every earlier number for each new one was quadratic in a log that relays a printed table)."""
    plain = number.replace(",", "")
    whole, _, frac = plain.partition(".")
    try:
        target = Decimal(plain)
    except InvalidOperation:
        return False
    quantum = Decimal(1).scaleb(-len(frac))
    # the integer part less one (``792`` from ``791.65``), exact at any length: ``int()`` refuses 4,300+ digits
    below = Context(prec=len(whole) + 2).subtract(Decimal(whole), 1) if whole.isdigit() else None
    heads = (whole, f"{below}") if below is not None else (whole,)
    by_whole = seen if isinstance(seen, dict) else _by_whole(seen)
    for s in (s for head in heads for s in by_whole.get(head, ())):
        if len(s.partition(".")[2]) <= len(frac):
            continue
        try:
            d = Decimal(s)
        except InvalidOperation:
            continue
        exact = Context(prec=len(s) + 2)  # enough digits for any number of the log: quantize never overflows
        if target in (d.quantize(quantum, ROUND_HALF_UP, exact), d.quantize(quantum, ROUND_DOWN, exact)):
            return True
    return False


def _by_whole(numbers: Iterable[str], into: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """The numbers with decimals among ``numbers``, by their integer part (``into``, updated, or a new dict)."""
    out: dict[str, set[str]] = {} if into is None else into
    for n in numbers:
        whole, dot, _ = n.partition(".")
        if dot:
            out.setdefault(whole, set()).add(n)
    return out


class _SeenNumbers:
    """The numbers of the task and of the messages read so far (commas dropped), with their decimals by integer part
    (``_by_whole``, for ``_rounded_from``): what ``F1.unsupported_fact`` and ``F1.unseen_report`` count a number as
    new against."""

    def __init__(self, task: str) -> None:
        self.digits: set[str] = set(_plain_numbers(task))
        self.decimals = _by_whole(self.digits)

    def add(self, text: str) -> None:
        """The numbers of ``text`` are seen from now on."""
        found = _plain_numbers(text)
        self.digits.update(found)
        _by_whole(found, self.decimals)

    def new(self, prose: str, at_least: int = 1) -> list[str]:
        """The numbers of three or more digits in ``prose`` that are in no message read (``_novel``), less a value
        relayed rounded (``_rounded_from``; read only where ``at_least`` such numbers are found, as that is where it
        could matter)."""
        novel = _novel(prose, self.digits)
        if len(novel) >= at_least:
            novel = [n for n in novel if not _rounded_from(n, self.decimals)]
        return novel


def _novel(prose: str, seen_digits: set[str]) -> list[str]:
    """The numbers of three or more digits in no earlier message, in order, less those that only sit in where a
    place is (``location()``). The place pattern is read only when two such numbers are found, and only in a
    window around each (``finditer`` with pos / endpos: its lookbehinds still see the text before)."""
    novel = [n for n in dict.fromkeys(NUMBER.findall(prose))
             if sum(ch.isdigit() for ch in n) >= 3 and n.replace(",", "") not in seen_digits]
    if len(novel) < 2:
        return novel
    new = set(novel)
    found = [(n, m.start(), m.end()) for m in NUMBER.finditer(prose) if (n := m.group(0)) in new]
    places: list[tuple[int, int]] = []
    lo, hi = 0, -1
    for _, s, e in [*found, ("", len(prose) + 1_000, 0)]:  # windows of 120 characters each side, merged
        if s - 120 > hi:
            if hi >= 0:
                places += [m.span() for m in location().finditer(prose, lo, hi)]
            lo = max(s - 120, 0)
        hi = min(e + 120, len(prose))
    return list(dict.fromkeys(n for n, s, e in found if not any(a <= s and e <= b for a, b in places)))


def _holds(pattern: re.Pattern[str], key: str, text: str) -> bool:
    """``pattern.search(text)`` for ``pattern``, the case-blind search of ``key`` (lower case) as a word: for an ASCII
    key the regex (a match tried at every character) runs only where ``key`` is in the text lower-cased
    (``gate_text``)."""
    if key.isascii():
        low = gate_text(text)
        if low is not None and key not in low:
            return False
    return pattern.search(text) is not None


class UnsupportedFactDetector:
    id = "F1.unsupported_fact"
    failure_class = F1
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies:
            return []
        reasoning = set(log.reasoning_turns)
        seen = _SeenNumbers(view.traj.task or "")
        for i in range(len(log.msgs)):
            text = log.text(i)
            if i in reasoning:
                prose = FENCE.sub(" ", text)
                fab = first_fabrication(prose)
                if fab:
                    fab = _own_fabrication(prose, fab, log, i)
                if fab:
                    word = fab.group(0)
                    return [self._signal(i, f"works from simulated or assumed data ({word!r}): {_quote(prose)}")]
                novel = seen.new(prose, at_least=2)
                if len(novel) >= 2:
                    return [self._signal(i, f"numbers in no earlier message: {', '.join(novel[:4])} — "
                                            f"{_quote(prose)}")]
            seen.add(text)
        return []

    def _signal(self, step: int, evidence: str) -> Signal:
        return Signal(id=self.id, failure_class=F1, step=step, evidence=evidence)


class UnseenReportDetector:
    """``F1.unseen_report``: an agent that has just shown a page (a browser's page dump posted under its own name,
    ``webtext.is_page``: AG2's WebServing_Expert) and then, in its next turn, reports what it found, stating a number
    (three or more digits, as ``F1.unsupported_fact`` counts them) that neither that page nor any earlier message or
    the task holds: it reports something it did not see. One such number is enough here (``F1.unsupported_fact``
    asks two of any reasoning turn): a report of a page answers for every value it takes from the page. A value
    relayed rounded is relayed (``_rounded_from``); a place is no fact (``location()``)."""

    id = "F1.unseen_report"
    failure_class = F1
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies:
            return []
        steps = log.assistant_steps
        # (the page shown, the report): a turn right after a page its own speaker posted
        reports = [(page, i) for page, i in zip(steps, steps[1:], strict=False) if log.msgs[i].get("name")
                   and log.msgs[page].get("name") == log.msgs[i].get("name") and is_page(log.text(page))]
        reasoning = set(log.reasoning_turns) if reports else set()
        reports = [(page, i) for page, i in reports if i in reasoning]
        if not reports:  # (most logs: no agent reports a page it showed; nothing else is read)
            return []
        seen = _SeenNumbers(view.traj.task or "")
        done = 0  # the messages whose numbers are in ``seen``
        for page, i in reports:
            for j in range(done, i):
                seen.add(log.text(j))
            done = i
            prose = FENCE.sub(" ", log.text(i))
            novel = seen.new(prose)
            if novel:
                return [Signal(id=self.id, failure_class=F1, step=i,
                               evidence=f"reports what the page it showed (step {page}) does not hold: "
                                        f"{', '.join(novel[:4])} — {_quote(prose)}")]
        return []


# where a passage an agent quotes ends: a quotation mark (what lies beyond it is the agent's own words again)
QUOTE_MARK = re.compile(r'["“”]')


def _own_fabrication(prose: str, first: re.Match[str], log: AgentLog, step: int) -> re.Match[str] | None:
    """The first ``FABRICATION`` match in ``prose`` (the turn at ``step``; ``first``, its first match) that is the
    agent's own: not one inside a passage it copies from an earlier tool's output -- a page, a file, a program's output
    that says "simulated" or "example data" is the source's wording, not the agent working from made-up data.
    Copied: the match with the 30 characters before it, or after it, up to a quotation mark and at least 20 of them,
    is in such an output (blanks folded)."""
    sources = [" ".join(log.text(j).split()) for j in log.assistant_steps if j < step and log.is_tool(j)]
    if not sources:
        return first
    for m in FABRICATION.finditer(prose, first.start()):
        if _names_a_slot(prose, m):
            continue
        a, b = m.span()
        left = QUOTE_MARK.split(prose[max(0, a - 30):a])[-1]
        right = QUOTE_MARK.split(prose[b:b + 30])[0]
        spans = [" ".join(span.split()) for span in (left + m.group(0), m.group(0) + right)
                 if len(span.strip()) - len(m.group(0)) >= 20]
        if not any(span in src for span in spans for src in sources):
            return m
    return None


class GuardrailDetector:
    id = "F2.guardrail"
    failure_class = F2
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies:
            return []
        for i in view.assistant_steps:
            if log.is_tool(i):
                text = log.text(i)
                name = str(log.msgs[i].get("name") or "")
                hit = refusal(text, is_executor_name(name) or is_exec_report(text, name))
                if hit:
                    return [Signal(id=self.id, failure_class=F2, step=i,
                                   evidence=f"refused by the site/service ({hit}): {_quote(text)}")]
        return []


class NoProgressDetector:
    id = "F4.no_progress"
    failure_class = F4
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies:
            return []
        last_action: int | None = None
        for i in view.assistant_steps:
            if not log.is_orchestrator(i):
                last_action = i
                continue
            text = log.text(i)
            if last_action is not None and is_ledger(text) and LEDGER_STALL.search(text):
                why = LEDGER_REASON.search(text)
                return [Signal(id=self.id, failure_class=F4, step=last_action,
                               evidence=f"orchestrator at step {i}: no progress"
                                        f"{' — ' + _quote(why.group(1)) if why else ''}; "
                                        f"judged action: {_quote(log.text(last_action), 120)}")]
        return []


def _failed(view: TraceView, cfg: DiagnosisConfig) -> bool:
    """A scored failure or an unscored failure-only record (Healthy runs are never located)."""
    t = view.traj
    return (t.score is not None and t.score < cfg.poor_delivery_threshold) or (
        t.score is None and bool(t.meta.get("failure_only")))


class HandoffCodeDetector:
    id = "F4.handoff_code"
    failure_class = F4
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies or not _failed(view, cfg):
            return []
        steps = view.assistant_steps
        if not steps:
            return []
        i = steps[0]
        text = log.text(i)
        if not OPENING.match(text) or "```" not in text:
            return []
        results = HANDOFF_RESULTS.search(text)
        if results and reports_failure(text[results.end():]):
            return []
        if not self._ran_first(log, i):
            return []
        code = FENCE.search(text)
        return [Signal(id=self.id, failure_class=F4, step=i,
                       evidence=f"the opening handoff carries code the run builds on: "
                                f"{_quote(code.group(0) if code else text)}")]

    @staticmethod
    def _ran_first(log: AgentLog, handoff: int) -> bool:
        """The team's first code run is the handoff's code: no reasoning turn holding code comes between the handoff
        and the first run's report (where an agent writes its own code before anything runs, the run builds on that
        code, and the handed-over code was never run). A log with no code run at all is read as before (no tuning log
        has such a handoff: not judged)."""
        run = next((j for j in log.assistant_steps if j > handoff
                    and is_exec_report(log.text(j), str(log.msgs[j].get("name") or ""))), None)
        return run is None or not any(handoff < j < run and "```" in log.text(j) for j in log.reasoning_turns)


# a word of a request, for ``LostTaskDetector``: three or more letters or digits of any script
REQUEST_WORD = re.compile(r"[^\W_]{3,}")
BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")  # (a CRLF text's blank line too)


class LostTaskDetector:
    """An opening handoff (the team's restatement of its task, ``OPENING``) that has lost the user's request: it holds
    fewer than half of the task's distinct words. A handoff restates the request (AG2's ``# General Task`` section
    copies it) and adds the manager's plan; one that carries a stale error message in its place hands the team another
    task, so no later step can answer the request: the instruction, not its execution, is where the run fails (Who&When:
    the earliest step whose action leads to the failure). The handoff's words are those past its opening lines (the
    template's "You are given: ..." paragraph); a task of fewer than five such words, or a handoff that hands over
    fewer, is not judged."""

    id = "F4.lost_task"
    failure_class = F4
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies or not _failed(view, cfg) or not view.assistant_steps:
            return []
        i = view.assistant_steps[0]
        text = log.text(i)
        if not OPENING.match(text):
            return []
        request = set(REQUEST_WORD.findall((view.traj.task or "").lower()))
        parts = BLANK_LINE.split(text, 1)
        body = parts[1] if len(parts) > 1 else ""  # past its opening lines: what it hands over
        handed = set(REQUEST_WORD.findall(body.lower()))
        if len(request) < 5 or len(handed) < 5:
            return []
        held = len(request & handed)
        if 2 * held >= len(request):
            return []
        return [Signal(id=self.id, failure_class=F4, step=i,
                       evidence=f"the opening handoff holds {held} of the request's {len(request)} words: the team "
                                f"was handed another task: {_quote(handoff_prose(body))}")]


class AnswerOriginDetector:
    id = "F4.answer_origin"
    failure_class = F4
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies or not _failed(view, cfg) or log.answer_origin is None:
            return []
        key, i = log.answer_origin
        return [Signal(id=self.id, failure_class=F4, step=i,
                       evidence=f"the final answer's value {key!r} first appears here: {_quote(log.text(i))}")]


class AcceptedReportDetector:
    id = "F4.accepted_report"
    failure_class = F4
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        log = AgentLog.of(view)
        if not log.applies or not _failed(view, cfg) or log.answer_origin is not None:
            return []  # where the answer's value has an origin, that step, not the report accepted at the end
        last_report: int | None = None
        for i in view.assistant_steps:
            if not log.is_orchestrator(i):
                last_report = i
                continue
            text = log.text(i)
            if last_report is not None and is_ledger(text) and LEDGER_SATISFIED.search(text):
                if REPORTED_FAILURE.search(_report_head(log.text(last_report))):
                    # the worker said it did not get there: ending the run on that report is the orchestrator's call
                    return [Signal(id=self.id, failure_class=F4, step=i,
                                   evidence=f"declares the request satisfied on a report of failure (step "
                                            f"{last_report}): {_quote(log.text(last_report), 120)}")]
                return [Signal(id=self.id, failure_class=F4, step=last_report,
                               evidence=f"orchestrator at step {i} declares the request satisfied on this report: "
                                        f"{_quote(log.text(last_report), 120)}")]
        return []


def _report_head(text: str) -> str:
    """A worker report's own words: the first paragraph, at most 400 characters, of what it says before the page it
    shows (``ToolText.own``: a page dump, ``Address: ... Title: ...``, is all page; a MultimodalWebSurfer's page
    follows its action)."""
    return ToolText.of(text).own.lstrip().split("\n\n", 1)[0][:400]


# a reasoning turn's own verdict that the result it answers is wrong ("it seems like there was an error or
# miscalculation", "the script did not work as intended", "the output ... is incorrect", "highly improbable"), read in
# its prose before its first code block (``rejected_and_replaced``): the team threw that result away
REJECTED_RESULT = re.compile(
    r"\b(?:did(?: not|n't) work(?: as (?:intended|expected))?"
    r"|there (?:was|is|seems to be|must be|might be|may be) an? (?:error|mistake|miscalculation|bug)"
    r"|(?:result|output|count|number|value|answer|total)s?\b[^.!?\n]{0,40}? (?:is|are|was|were|seems?|appears?|looks?) "
    r"(?:to be )?(?:incorrect|wrong|implausible|improbable|unrealistic)"
    r"|highly (?:improbable|implausible|unlikely))\b", re.IGNORECASE)


def rejected_and_replaced(log: AgentLog, turns: list[int], code: int) -> tuple[int, int] | None:
    """Where the first code of a run (the reasoning turn ``code``) ran clean but the team threw its result away:
    (the step of that run's report, the reasoning turn that replaced the code) -- the first reasoning turn after the
    report holds code and its prose before that code says the result is wrong (``REJECTED_RESULT``); the run is the
    first code run after ``code`` with no other code written between. The run does not
    build on a result it rejected; it builds on the code that replaced it (later fixes refine that code in turn, so
    the replacement, not the last fix, is the first commitment). None where the first run failed, ran nothing or
    its result was kept."""
    run = next((j for j in log.assistant_steps if j > code
                and is_exec_report(log.text(j), str(log.msgs[j].get("name") or ""))), None)
    if run is None or ran_and_failed(log.text(run), str(log.msgs[run].get("name") or "")) \
            or UNKNOWN_LANGUAGE.search(log.text(run)) or any(code < j < run and "```" in log.text(j) for j in turns):
        return None  # (a later code block before the run: the run is that code's, not the first's)
    nxt = next((j for j in turns if j > run), None)
    if nxt is None:
        return None
    text = log.text(nxt)
    fence = text.find("```")
    if fence < 0 or not REJECTED_RESULT.search(text[:fence]):
        return None
    return run, nxt


class FirstCommitmentDetector:
    """Fires only for an unscored failure-only record or a scored failure; Healthy runs are untouched."""

    id = "F4.first_commitment"
    failure_class = F4
    multi_agent_only = True  # returns nothing unless AgentLog.applies (no tool calls): the labeller skips it

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        t = view.traj
        log = AgentLog.of(view)
        if not _failed(view, cfg) or not t.delivered or not log.applies or not log.reasoning_turns:
            return []
        turns = log.reasoning_turns
        failed_run = next((i for i in range(len(log.msgs))
                           if ran_and_failed(log.text(i), str(log.msgs[i].get("name") or ""))), None)
        before = [i for i in turns if failed_run is not None and i < failed_run]
        # the code's author: the last turn with code before the run (not an instruction to run it), else the last
        author = max((i for i in before if "```" in log.text(i)), default=max(before, default=None))
        if author is not None:
            i, why = author, f"wrote the code whose run failed first (step {failed_run})"
        elif failed_run is not None and self._handoff_code_before(view, log, failed_run):
            # no reasoning turn before the failed run: the code that ran is the opening handoff's
            i = view.assistant_steps[0]
            why = f"the opening handoff's code, whose run failed first (step {failed_run})"
        else:
            i = first = next((i for i in turns if "```" in log.text(i)), turns[0])
            why = "first reasoning turn the run builds on"
            if "```" in log.text(i):
                why = "first action (code) the run builds on"
                redo = rejected_and_replaced(log, turns, i)
                if redo is not None:
                    run, i = redo
                    why = (f"first action (code) the run builds on: it replaces the code of step {first}, whose clean "
                           f"run's result (step {run}) the team rejected")
        return [Signal(id=self.id, failure_class=F4, step=i, evidence=f"{why}: {_quote(log.text(i))}")]

    @staticmethod
    def _handoff_code_before(view: TraceView, log: AgentLog, step: int) -> bool:
        """The opening handoff (the team's task restatement) comes before ``step`` and carries code."""
        first = view.assistant_steps[0] if view.assistant_steps else None
        return first is not None and first < step and bool(OPENING.match(log.text(first))) and "```" in log.text(first)
