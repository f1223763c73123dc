"""What an instruction-following reader takes from instruction text: the stand-in model's parser.

`read_directives(text, tool_names)` splits text into sentences and classifies each *generically*, by
its grammar and the vocabulary it uses (negation, imperative verbs, the nouns "tool", "argument",
"answer", format names), never by a fixed sentence. A sentence with a condition ("if", "once",
"when", "until", ...) only applies when its condition holds; the reader treats such sentences as
"when you are done" advice, never as a standing order.

Fields (docs/agent.md has the reactions): ``tools_off`` (unconditional negated use of tools in
general), ``answer_now`` (an unconditional order to answer now/immediately/at once), ``answer_off``
(an unconditional negated answer; "without" makes it positive), ``forbidden`` (a negated verb whose
object names a tool, or verb + noun spelling a tool's name), ``format_good`` / ``format_bad``
(arguments + JSON; JSON negated or another format named), ``names_good`` / ``names_bad``, ``no_repeat``,
``deliver``, ``stop_when_done`` (a conditional "stop calling tools"), ``verify``, ``skip_checks``,
``answer_words``, ``fixed_answer``, ``urge_if_done`` (a conditional "answer now", read in later turns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

NEG = r"(?:do not|don't|dont|never|must not|mustn't|should not|shouldn't|may not|cannot|can't|avoid|refrain from|stop)"
COND = re.compile(r"\b(if|when|whenever|once|after|until|unless|as soon as|in case|before you)\b")
CALLVERB = r"(?:call|calling|use|using|invoke|invoking|run|running|make|making)"
TOOLNOUN = r"(?:tools?|tool calls?|functions?|function calls?)"
SENT_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+")
TOOLS_OFF = re.compile(NEG + r"\s+(?:\w+\s+){0,2}?" + CALLVERB + r"\s+(?:any\s+|the\s+)?" + TOOLNOUN
                       + r"(?:\s+at all)?\s*(?:[.,;:!)]|$|\band\b|\bfor\b|\bbut\b)")
WITHOUT_TOOLS = re.compile(r"\bwithout\s+(?:using|calling|any)\s+(?:any\s+)?" + TOOLNOUN)
ANSWER_NOW = re.compile(r"\b(?:answer|reply|respond|give (?:your|the|a) (?:final )?answer)\b.{0,50}?"
                        r"\b(?:immediately|right away|at once|now|straight away|first|directly)\b")
ANSWER_WORD = re.compile(r"\b(?:answer|reply|respond|deliver|final answer|conclude)\b")
ARG_WORD = re.compile(r"\b(?:arguments?|parameters?|args|inputs?)\b")
OTHER_FORMAT = re.compile(r"\b(?:python|yaml|xml|key=value|key-value|plain text|comma[- ]separated|positional|"
                          r"single quotes?)\b")
NAMES_GOOD = re.compile(r"\bexact(?:ly)?\b.{0,40}\b(?:parameter|argument)\s+names\b|\b(?:parameter|argument)\s+"
                        r"names\b.{0,30}\bexact(?:ly)?\b")
NAMES_BAD = re.compile(r"\b(?:camelcase|camel case|abbreviat\w*|shorten\w*)\b")
REPEAT_WORD = re.compile(r"\b(?:repeat|resend|re-send|retry|send (?:it|them|the same \w+) again|same call)\w*")
VERIFY_WORD = re.compile(r"\b(?:verify|verification|double[- ]check|re-?check|confirm)\w*")
SKIP_WORD = re.compile(r"\bskip\w*\s+(?:the\s+|all\s+|any\s+)?(?:verification|verifying|checks?|checking)\b")
WORD_LIMIT = re.compile(r"\b(?:answers?|reply|replies|responses?)\b.{0,40}?\b(?:at most|under|no more than|"
                        r"fewer than|within|maximum of)\s+(\d+)\s+(words?|characters?|chars?)")
ANSWER_NEG = re.compile(r"\b" + NEG + r"\s+(?:(?!and\b|then\b|or\b)\w+\s+){0,3}?"
                        r"(?:answer|reply|respond|deliver|conclude|give)")
FIXED = re.compile(r"\b(?:answer|reply|respond)\b.{0,25}?\bwith\b.{0,15}?[\"'“‘](.{1,80}?)[\"'”’]")


@dataclass(frozen=True)
class Directives:
    """What one text tells the reader. A value: the stand-in shares one text's directives between rollouts."""

    tools_off: bool = False
    answer_now: bool = False
    answer_off: bool = False
    forbidden: frozenset[str] = field(default_factory=frozenset)
    format_good: bool = False
    format_bad: bool = False
    names_good: bool = False
    names_bad: bool = False
    no_repeat: bool = False
    deliver: bool = False
    stop_when_done: bool = False
    verify: bool = False
    skip_checks: bool = False
    answer_words: int | None = None
    fixed_answer: str | None = None
    urge_if_done: bool = False  # a conditional "answer now" (meaningful in a later user turn)

    def merged(self, other: Directives) -> Directives:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(other, f.name)
            if isinstance(v, bool):
                out[f.name] = getattr(self, f.name) or v
            elif isinstance(v, frozenset):
                out[f.name] = self.forbidden | v
            elif v is not None:
                out[f.name] = v
        return replace(self, **out)


def sentences(text: str) -> list[str]:
    out = []
    for raw in SENT_SPLIT.split(text or ""):
        s = re.sub(r"^[\s#>*\-+\d.)]+", "", raw).replace("`", "").strip().lower()
        if s:
            out.append(s)
    return out


def _tool_tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[_\W]+", name.lower()) if t]


def _forbidden_tools(s: str, tool_names: list[str]) -> set[str]:
    out = set()
    for m in re.finditer(NEG + r"\s+(\w+)(?:\s+(?:any|a|an|the|to))?\s+(\w+)", s):
        verb, noun = m.group(1), m.group(2)
        for name in tool_names:
            toks = _tool_tokens(name)
            if name.lower() in s[m.start():]:
                if re.search(NEG + r"\s+(?:\w+\s+){0,3}" + re.escape(name.lower()), s):
                    out.add(name)
            elif len(toks) >= 2 and toks[0] == verb and noun.rstrip("s") in {t.rstrip("s") for t in toks[1:]}:
                out.add(name)
    return out


def read_directives(text: str, tool_names: list[str] | None = None) -> Directives:
    """The directives in ``text`` (a system prompt, a user turn) as an instruction-following model reads them."""
    d: dict[str, Any] = {}
    forbidden: set[str] = set()
    names = list(tool_names or [])
    for s in sentences(text):
        cond = bool(COND.search(s))
        neg = re.search(r"\b" + NEG + r"\b", s) is not None
        if not cond and (TOOLS_OFF.search(s) or WITHOUT_TOOLS.search(s)):
            d["tools_off"] = True
        answer_negated = ANSWER_NEG.search(s) is not None
        if ANSWER_NOW.search(s) and not answer_negated:
            if cond:
                d["urge_if_done"] = True
            else:
                d["answer_now"] = True
        if ANSWER_WORD.search(s) and answer_negated and not cond and "without" not in s:
            d["answer_off"] = True
        if neg and not cond:
            forbidden |= _forbidden_tools(s, names)
        if ARG_WORD.search(s):
            json_word = re.search(r"\bjson\b", s) is not None
            if json_word and not neg:
                d["format_good"] = True
            if (json_word and neg) or (OTHER_FORMAT.search(s) and not neg):
                d["format_bad"] = True
            if NAMES_GOOD.search(s) and not neg:
                d["names_good"] = True
            if NAMES_BAD.search(s) and not neg:
                d["names_bad"] = True
        if neg and REPEAT_WORD.search(s):
            d["no_repeat"] = True
        if "final answer" in s or re.search(r"\banswer\b", s):
            if re.search(r"\b(?:always|must|every run|a partial answer)\b", s) and not neg:
                d["deliver"] = True
            if neg and "without" in s:
                d["deliver"] = True
        if cond and re.search(NEG + r"\s+(?:\w+\s+){0,2}?" + CALLVERB + r"\s+(?:any\s+|the\s+)?" + TOOLNOUN, s):
            d["stop_when_done"] = True
        if VERIFY_WORD.search(s):
            if neg or SKIP_WORD.search(s):
                d["skip_checks"] = True
            else:
                d["verify"] = True
        elif SKIP_WORD.search(s):
            d["skip_checks"] = True
        m = WORD_LIMIT.search(s)
        if m and not neg:
            n = int(m.group(1))
            d["answer_words"] = max(1, n // 6) if m.group(2).startswith("char") else n
        m = FIXED.search(s)
        if m and not neg:
            d["fixed_answer"] = m.group(1)
    return Directives(**d, forbidden=frozenset(forbidden))
