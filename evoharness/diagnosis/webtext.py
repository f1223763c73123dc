"""What a tool agent's message in a multi-agent log says of its own, and what it only relays.

A web surfer, a file surfer or a terminal posts what it did, then what it saw: Magentic-One's MultimodalWebSurfer
("I clicked 'X'.\\n\\nHere is a screenshot of [Title](url). The viewport shows ... The following metadata was
extracted from the webpage: {...} Automatic OCR of the page screenshot has detected the following text: ..."), a
text browser's or FileSurfer's page ("Address: url\\nTitle: Title\\nViewport position: ...\\n=====\\n<page>"), an
executor's program output ("The script ran, then exited with Unix exit code: 0\\nIts output was: ...", AG2's
``exitcode: 0 (execution succeeded)\\nCode output: ...``, or bare output under an executor's name). The page, the
file and the program's output are what the agent met, not its act or claim: a word that merely appears there (a
"protected by reCAPTCHA" footer, an article about Cloudflare, "roads blocked by snow") says nothing of the agent.
``ToolText`` splits a message into the agent's own words, the page's title and the relayed text; ``refusal`` reads
each part for what it can say: that the page the agent landed on *is* a block or challenge page, or that the agent or
the program was refused (``F2.guardrail``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evoharness.traces.patterns import gate_text

# a text browser's or FileSurfer's page (AG2's WebSurfer, Magentic-One 0.2): the address, the title when the page has
# one, then the viewport
PAGE_HEADER = re.compile(r"\s*Address: \S+[^\n]*\n(?:Title: (?P<title>[^\n]*)\n|(?=Viewport position: ))")
# Magentic-One's MultimodalWebSurfer: the action it took, then the page it shows ("Here is a screenshot of [title](url).
# The viewport shows N% of the webpage, ..."); a title may hold brackets, so the title runs to the last "](" of the line
SCREENSHOT = re.compile(r"Here is a screenshot of \[(?P<title>[^\n]*)\]\([^\s)]*\)\. The viewport shows")


def is_page(text: str) -> bool:
    """``text`` is a page a browser or file surfer shows (``PAGE_HEADER`` at its start, or a MultimodalWebSurfer's
    ``SCREENSHOT`` report): a tool's output, whatever name posts it."""
    return bool(PAGE_HEADER.match(text)) or ("Here is a screenshot of [" in text and bool(SCREENSHOT.search(text)))


@dataclass(frozen=True)
class ToolText:
    """A tool agent's message in parts: ``own`` -- the agent's own words (the action it reports, its summary or
    answer); ``title`` -- the title of the page it shows ("" when none); ``page`` -- the page, file or program output
    it relays."""

    own: str
    title: str
    page: str

    @staticmethod
    def of(text: str, program: bool = False) -> ToolText:
        """The parts of ``text``, a tool agent's message; ``program``: it is a program's output (an executor's message,
        or a framework's report of a code run under any name: ``multiagent.is_exec_report``), every word of it the
        program's."""
        if program:
            return ToolText("", "", text)
        head = PAGE_HEADER.match(text)
        if head:
            return ToolText("", (head.group("title") or "").strip(), text[head.end():])
        shot = SCREENSHOT.search(text)
        if shot:
            return ToolText(text[:shot.start()], shot.group("title").strip(), text[shot.end():])
        return ToolText(text, "", "")


# What only a block or challenge page, or a refused request, says to its visitor -- a statement about this visit, not
# a word on a subject: read in the page as in the agent's own words. A captcha is a challenge when the visitor is told
# to solve it; "protected by reCAPTCHA" is a notice on an ordinary page.
CHALLENGE = re.compile(
    r"\b(?:verify(?:ing)?|confirm(?:ing)?|prove) (?:that )?you(?:'re|’re| are) (?:a )?human"
    r"|\b(?:are you|you(?:'re|’re| are) not|i'?m not|i’m not|i am not) a (?:robot|bot)\b"
    r"|\bunusual traffic from your\b|\bdetected unusual traffic\b"
    r"|\bchecking (?:if the site connection is secure|your browser)"
    r"|\breview the security of your connection\b"
    r"|\b(?:complete|solve|pass|fill (?:in|out)) (?:the|a|this) (?:captcha|security check|challenge)\b"
    r"|\byou have been blocked\b"
    r"|\byour (?:ip(?: address)?|access|request|computer|browser) (?:has been|was|is|have been) "
    r"(?:blocked|denied|restricted|rate[- ]limited)\b"
    r"|\byou (?:don't|don’t|do not) have permission to access\b"
    r"|\baccess to this (?:page|site|website|resource) (?:has been|was|is) denied\b"
    r"|\benable javascript and cookies to continue\b",
    re.IGNORECASE,
)
# a literal every match of CHALLENGE holds, lower-cased (``_gated``): phrases, not words ("bot" is in "both")
CHALLENGE_WORDS = ("re human", "re a human", "a robot", "a bot", "unusual traffic", "checking if the site",
                   "checking your browser", "security of your connection", "captcha", "security check", "the challenge",
                   "a challenge", "this challenge", "you have been blocked", "your ip", "your access", "your request",
                   "your computer", "your browser", "permission to access", "access to this", "javascript and cookies")
# a request answered 403 (forbidden) or 429 (too many requests), as a program or the agent reports it ("HTTP Error 403:
# Forbidden", "403 Client Error", "Status code: 403", "Non-successful status code 429"): read in the agent's words and a
# program's output, not in a page's text (an article on HTTP errors; a real error page says so in its title)
STATUS = re.compile(r"\b(?:http(?: error)?:? ?|status(?: code)?:? (?:of |was |is )?|error:? )(?:403|429)\b"
                    r"|\b(?:403|429):? (?:forbidden|client error|too many requests)\b", re.IGNORECASE)
STATUS_WORDS = ("403", "429")
STATUS_CONTEXT = ("http", "status", "error", "forbidden", "too many requests")  # every match holds one of these too
# In the agent's own words a bare mention is its report: it met a captcha ("blocked by a CAPTCHA"), access was denied,
# it or its request was blocked. Not a captcha notice it relays ("protected by reCAPTCHA"), not a word quoted from the
# page or typed into it ("I typed 'captcha solver' into ...": ``QUOTED`` is blanked first), not others blocked ("the
# roads were blocked"), nor the name of a company that sells such protection (a page about Cloudflare is no refusal).
OWN_REFUSAL = re.compile(
    r"\b(?<!protected by )(?:re|h)?captcha|\baccess (?:was |is |has been |had been )?denied\b"
    r"|\b(?:i|we|access|(?:my|our|the) (?:requests?|access|ip(?: address)?|browser|connection|search|query|visit)) "
    r"(?:was|were|am|is|are|has been|have been|had been|got|get|being) (?:\w+ )?blocked\b"
    r"|\bblocked (?:me|us|my|our|access)\b"
    r"|\bblocked by (?:a |an |the )?(?:captcha|recaptcha|firewall|bot|anti-bot|security|cloudflare|site|website|server)"
    r"|\bnot allowed to access\b|\brate[- ]limited\b",
    re.IGNORECASE,
)
OWN_WORDS = ("captcha", "denied", "blocked", "not allowed to access", "limited")
QUOTED = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|\"[^\"\n]*\"|‘[^’\n]*’|“[^”\n]*”")
# a page whose title says it is a block or challenge page, read part by part ("Attention Required! | Cloudflare"): the
# whole part is the phrase, so an article titled "How to fix 403 Forbidden" or "CAPTCHA - Wikipedia" is none. A captcha
# page is named by its vendor ("Radware Bot Manager Captcha"): one to three words before "captcha", none of them a
# question or an article's word
TITLE_PART = re.compile(r"\s+[|\-–—·]\s+")
BLOCK_TITLE = re.compile(
    r"access denied|attention required!?|just a moment\W*|one more step|robot check|are you a (?:robot|human)\??"
    r"|security check|human verification|bot verification|verify(?:ing)? you are (?:a )?human\W*"
    r"|checking your browser\W*|(?:error )?(?:403|429|1020)(?: forbidden| too many requests)?|forbidden"
    r"|too many requests|you have been blocked|blocked|access to this page has been denied\.?"
    r"|request (?:blocked|rejected)"
    r"|pardon our interruption\W*|ddos-guard"
    r"|(?:(?!(?:what|how|why|who|when|where|which|is|are|does|do|can|about|the|a|an|solve|solving|bypass|bypassing)\b)"
    r"[\w-]+ ){1,3}captcha(?: (?:challenge|page|verification))?",
    re.IGNORECASE,
)
READ = 4000  # characters of a message read for a refusal: a block page says so at once
# a block or challenge page holds little but its message (Cloudflare's, Google's "unusual traffic", a captcha vendor's:
# 300-900 characters of text); a page with more text than this that quotes one -- a results page listing an indexed
# block page, an article -- is no block page. The page's text: its OCR text or its viewport, not the metadata before
BLOCK_PAGE_CHARS = 1200
PAGE_TEXT = re.compile(r"Automatic OCR of the page screenshot has detected the following text:\s*|\n=====+\n")


def refusal(text: str, program: bool = False) -> str | None:
    """What in a tool agent's message says that a site or service refused it, or None: the page's title names a block
    or challenge page (``BLOCK_TITLE``); the page, a short one (``BLOCK_PAGE_CHARS``), addresses its visitor as one
    (``CHALLENGE``); a program's output says so or reports a 403 / 429 (``STATUS``); or the agent's own words, quotes
    blanked, report a refusal (``CHALLENGE``, ``STATUS``, ``OWN_REFUSAL``). ``program``: the message is a program's
    output (``ToolText.of``). Each part's first ``READ`` characters are read."""
    parts = ToolText.of(text, program)
    if parts.title and any(BLOCK_TITLE.fullmatch(p) for p in TITLE_PART.split(parts.title[:READ])):
        return f"title {parts.title!r}"
    page = parts.page
    if not program:
        start = PAGE_TEXT.search(page, 0, READ)
        page = page[start.end():] if start else page
        if len(page) > BLOCK_PAGE_CHARS and len(page.strip()) > BLOCK_PAGE_CHARS:
            page = ""
    reads = ((QUOTED.sub("''", parts.own[:READ]), (CHALLENGE, STATUS, OWN_REFUSAL)),
             (page[:READ], (CHALLENGE, STATUS) if program else (CHALLENGE,)))
    for piece, patterns in reads:
        if not piece:
            continue
        low = gate_text(piece)
        for pattern in patterns:
            hit = _gated(pattern, piece, low)
            if hit:
                return hit.group(0)
    return None


def _gated(pattern: re.Pattern[str], text: str, low: str | None) -> re.Match[str] | None:
    """``pattern.search(text)``, skipped where ``low`` (``gate_text(text)``; None: the regex must run) misses a word
    of each of the pattern's groups in ``GATE`` (every match of the case-blind pattern holds one of each)."""
    if low is not None and not all(any(w in low for w in group) for group in GATE[pattern]):
        return None
    return pattern.search(text)


GATE = {CHALLENGE: (CHALLENGE_WORDS,), STATUS: (STATUS_WORDS, STATUS_CONTEXT), OWN_REFUSAL: (OWN_WORDS,)}
