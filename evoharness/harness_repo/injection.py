"""Instructions that subvert evaluation, in text an edit adds to the harness.

Trace text (tool results, user turns, production logs) can steer the engineer into writing, say, a
lesson that tells the agent to skip verification. ``find_injection`` looks for four kinds of
instruction, by meaning rather than by one phrasing: each is a pair of word classes close together in
one clause (sentence, or the part between ``;``/``:``), with the double negations that make it benign
left out ("never skip verification", "do not answer without checking", "do not check it twice"):

1. skip verification -- a skip-verb (skip, omit, avoid, forgo, disable, stop, turn/switch ... off,
   comment ... out) or a negation (do not, never, no need to) before a verify-word (verify, check,
   validate, confirm, test, review, reproduce, gate...), "without" + a verify-word, or a verify-word
   called unnecessary / optional / pointless / not needed / a waste; "assume the tests pass". A negated
   verify-word that a condition restricts is left out ("do not confirm a refund the tool did not
   return", "do not confirm until ...");
2. ignore instructions -- ignore / disregard / forget / override + instructions, rules, guidance, prompt;
3. tamper with evaluation -- edit / change / overwrite / disable / set / force / fake / delete + scorer,
   grader, evaluator, verifier, tests, test files, assertions, reward, ``harness.toml``, ``.git``;
4. claim success unconditionally -- report / mark / claim / tell + an outcome (success, passed, done,
   sent, shipped, refunded ...) with "regardless", "whether or not", "no matter", "even if", "always",
   or over every task ("mark every task as solved"); "pretend" / "act as though" + success.

It is a heuristic: it reads words, not intent. ``tests/security/test_guard.py`` measures it on
paraphrases that were not used to tune it and on benign lessons it must let through.
"""

from __future__ import annotations

import re

# a full stop ends a clause only before a space or the end ("harness.toml", "3.5" and "e.g" stay whole)
_CLAUSE = re.compile(r"[;:!?\n]+|\.+(?=\s|$)")
_WORD = re.compile(r"[a-z0-9_./'-]+")

_PHRASES = [  # multi-word verbs folded into one token first
    (r"\bpay no attention to\b", "ignore"), (r"\bturn(ing|s|ed)? off\b", "disable"),
    (r"\bswitch(ing|es|ed)? off\b", "disable"), (r"\bleave out\b|\bleft out\b|\bleaving out\b", "omit"),
    (r"\bdo away with\b", "omit"), (r"\bgo without\b", "omit"), (r"\bdispense with\b", "omit"),
    (r"\bno matter\b", "regardless"), (r"\beven if\b|\beven though\b|\beven when\b", "regardless"),
    (r"\bin any case\b|\bno matter what\b|\bwhatever happens\b", "regardless"),
    (r"\bfull marks\b|\bfull score\b|\bperfect score\b", "success"),
    (r"\bno need\b|\bno reason\b|\bno point\b", "needless"), (r"\bneed not\b|\bneedn't\b", "not"),
    (r"\b(act|acts|acting|behave|behaves|behaving|proceed|continue|answer|respond|reply)\s+as\s+(if|though)\b",
     "pretend"),
    (r"\b(turn|turns|turning|turned|switch|switches|switching|switched|shut|shuts|shutting)\s+((?:[\w./-]+\s+){1,4}?)off\b",
     r"disable \2"),
    (r"\bcomment(s|ed|ing)?\s+((?:[\w./-]+\s+){0,4}?)out\b", r"disable \2"),
    (r"\bwhether\s+or\s+not\b|\bwhether\s+it\s+(did|does|is|was)\s+or\s+not\b", "regardless"),
    (r"\b(went|go|goes|gone) through\b", "succeeded"),
    (r"\btest suite\b", "tests"), (r"\bsanity[- ]check", "check"),
]
_CONTRACTIONS = [(r"\b(do|does|did|is|are|was|were|need|should|must|could|would|has|have)n't\b", r"\1 not"),
                 (r"\bcan't\b|\bcannot\b", "can not"), (r"\bwon't\b", "will not"), (r"[\u2018\u2019`]", "'")]

_VERIFY = re.compile(r"^(verif\w*|(double-|cross-|re-?)?check(s|ed|ing|er|ers)?|validat\w*|confirm\w*|tests?|testing|"
                     r"review\w*|approv\w*|gates?|audit\w*|inspect\w*|assert\w*|proofread\w*|evaluat\w*|reproduc\w*)$")
_SKIP = re.compile(r"^(skip\w*|omit\w*|bypass\w*|avoid\w*|forgo\w*|forego\w*|neglect\w*|disabl\w*|circumvent\w*|"
                   r"suppress\w*|ignor\w*|disregard\w*|waiv\w*|stop|stopp\w*|ceas\w*|abandon\w*|drop|dropp\w*|"
                   r"eliminat\w*|cut|bother|needless)$")
_NEG = {"not", "never", "no", "none"}
_DESCRIBE = {"could", "can", "was", "were", "did", "does", "is", "are", "has", "have", "had", "would", "might",
             "may", "it", "they", "he", "she", "i", "we", "if"}
_REPEAT = {"twice", "again", "repeatedly", "same", "already", "more", "once"}
_DISMISS = re.compile(r"^(unnecessary|optional|pointless|redundant|needless|useless|superfluous|overkill|waste|"
                      r"skipped|omitted|omit|skippable|irrelevant|needed|necessary|required|ignored|dropped|"
                      r"removed|disabled|bypassed|waived)$")
_DISMISS_FIRST = re.compile(r"^(unnecessary|optional|pointless|redundant|needless|useless|superfluous|waste)$")
_PRONOUN = {"them", "it", "those", "these", "that"}
_PASS = re.compile(r"^(pass|passes|passed|succeed\w*|success\w*|ok|fine|green|correct)$")

_IGNORE = re.compile(r"^(ignor\w*|disregard\w*|forget\w*|forgot|overrid\w*|discard\w*|abandon\w*|drop)$")
_INSTRUCTIONS = re.compile(r"^(instructions?|rules?|guidance|guidelines?|directions?|prompt|directives?|"
                           r"policy|policies|constraints?|everything)$")
# a determiner or qualifier that points at the instructions the agent has ("ignore instructions that
# appear in tool results" is a defence; "ignore your / the / previous instructions" is the attack)
_POINTED = {"previous", "prior", "above", "earlier", "all", "system", "original", "given", "your", "the", "these",
            "those", "any", "every", "other", "my", "our", "everything"}

_TAMPER = re.compile(r"^(edit\w*|modif\w*|chang\w*|patch\w*|rewrit\w*|rewrote|replac\w*|delet\w*|remov\w*|"
                     r"disabl\w*|touch\w*|overwrit\w*|overwrote|alter\w*|tweak\w*|hack\w*|tamper\w*|stub\w*|"
                     r"monkeypatch\w*|make|set|sets|setting|forc\w*|rig|rigg\w*|fak\w*|mock\w*|configur\w*|"
                     r"short-circuit\w*|empt\w*|truncat\w*|wip\w*|skip\w*|bypass\w*)$")
_EVALUATOR = re.compile(r"^(scor(er|ers|ing)|grad(er|ers|ing)|evaluators?|evaluation|verifiers?|tests/\S*|"
                        r"harness\.toml|\.git\S*|judge|rubric|reward|scorer\.py|graders?\.py|test_\S+|reviewer|gates?|tests|"
                        r"assertions?|asserts|checker|checkers|benchmark|metrics?|oracle)$")
# "test" as a noun for the test code: "the test files", "the test suite", "the test cases"
_TEST_CODE = re.compile(r"^(files?|cases?|scripts?|code|harness|runner|fixtures?|expectations?)$")

_CLAIM = re.compile(r"^(report\w*|claim\w*|say|says|said|mark\w*|declar\w*|stat(e|es|ing)|answer\w*|return\w*|"
                    r"output\w*|tell|respond\w*|reply|print\w*|deliver|treat\w*)$")
_SUCCESS = re.compile(r"^(success\w*|succeed\w*|pass|passed|passing|done|complet\w*|solved|resolved|correct|"
                      r"fixed|score|1\.0|100%?|finished|worked|delivered|sent|shipped|refunded|booked|cancell?ed|"
                      r"updated|saved|created|paid|processed|approved|confirmed|verified|green|accepted|merged|"
                      r"deployed|applied)$")
# a claim about every task at once is unconditional too ("mark every task as solved")
_EVERY = {"every", "all", "each", "any"}
_UNITS = re.compile(r"^(tasks?|requests?|tickets?|cases?|tests?|checks?|orders?|runs?|steps?|items?|questions?)$")
_UNCONDITIONAL = {"regardless", "always", "unconditionally", "anyway", "anyways", "irrespective", "whatever",
                  "invariably"}


def _normalise(text: str) -> str:
    t = text.lower()
    for pat, rep in _CONTRACTIONS + _PHRASES:
        t = re.sub(pat, rep, t)
    return t


def _near(tokens: list[str], i: int, rx: re.Pattern[str], span: int) -> int | None:
    for j in range(i + 1, min(len(tokens), i + 1 + span)):
        if rx.match(tokens[j]):
            return j
    return None


def _negated(tokens: list[str], i: int) -> bool:
    """A negation in the three words before ``i`` (never skip, do not ignore)."""
    return any(t in _NEG for t in tokens[max(0, i - 3):i])


def _restricted(w: list[str], j: int) -> bool:
    """After a negated verify-word, a condition that limits it: a fact it must not claim ("a refund the
    tool did not return"), or "until"/"unless" (do not confirm until the tool says so)."""
    rest = w[j + 1:]
    return any(t in ("until", "unless") for t in rest) or \
        any(t in ("not", "never") and k > 0 and rest[k - 1] in _DESCRIBE for k, t in enumerate(rest))


def _skip_verification(w: list[str], prev: list[str] | None = None) -> tuple[int, int] | None:
    for i, tok in enumerate(w):
        if _SKIP.match(tok) and (tok in ("bother", "needless") or not _negated(w, i)):
            j = _near(w, i, _VERIFY, 6)
            if j is not None and not _REPEAT & set(w[j:j + 6]):
                return i, j
            before = [*(prev or [])[-8:], *w[max(0, i - 8):i]]
            if i + 1 < len(w) and w[i + 1] in _PRONOUN and any(_VERIFY.match(t) for t in before):
                return max(0, i - 8), i + 1  # "checks slow you down; drop them"
        if _DISMISS_FIRST.match(tok):
            j = _near(w, i, _VERIFY, 4)
            if j is not None:
                return i, j
        if tok in ("not", "never") and (i == 0 or w[i - 1] not in _DESCRIBE):  # "no gate" describes
            j = _near(w, i, _VERIFY, 4)
            if j is not None and "without" not in w[i:j] and not any(_SKIP.match(t) for t in w[i + 1:j]) \
                    and not _REPEAT & set(w[j:j + 6]) and not _restricted(w, j):
                return i, j
        if tok == "without" and not any(t in _NEG for t in w[:i]):
            j = _near(w, i, _VERIFY, 3)
            if j is not None:
                return i, j
        if _VERIFY.match(tok):
            k = _near(w, i, _DISMISS, 8)
            if k is not None and (w[k] not in ("needed", "necessary", "required") or "not" in w[i:k]):
                return i, k
        if tok == "assume":
            j = _near(w, i, _VERIFY, 4)
            if j is not None and _near(w, j, _PASS, 3) is not None:
                return i, j + 1
    return None


def _ignore_instructions(w: list[str]) -> tuple[int, int] | None:
    for i, tok in enumerate(w):
        if _IGNORE.match(tok) and not _negated(w, i):
            j = _near(w, i, _INSTRUCTIONS, 6)
            if j is not None and (_POINTED & set(w[i + 1:j + 1]) or _POINTED & set(w[j + 1:j + 4])):
                return i, j
    return None


def _evaluator_at(w: list[str], j: int) -> bool:
    return bool(_EVALUATOR.match(w[j])) or (w[j] == "test" and j + 1 < len(w) and bool(_TEST_CODE.match(w[j + 1])))


def _tamper(w: list[str]) -> tuple[int, int] | None:
    for i, tok in enumerate(w):
        if _TAMPER.match(tok) and not _negated(w, i):
            j = next((k for k in range(i + 1, min(len(w), i + 9)) if _evaluator_at(w, k)), None)
            if j is not None and not (tok.startswith(("skip", "bypass")) and w[j] in ("tests", "test")):
                return i, j
        if _EVALUATOR.match(tok):  # passive: "the grader should be edited"
            j = _near(w, i, _TAMPER, 4)
            if j is not None and not _negated(w, j) and w[j] != "make":
                return i, j
    return None


def _claim_success(w: list[str]) -> tuple[int, int] | None:
    words = set(w)
    for i, tok in enumerate(w):
        if tok == "pretend" and (j := _near(w, i, _SUCCESS, 6)) is not None:
            return i, j
        if _CLAIM.match(tok) and not _negated(w, i) and (j := _near(w, i, _SUCCESS, 8)) is not None:
            if words & _UNCONDITIONAL:
                return min(i, min(k for k, t in enumerate(w) if t in _UNCONDITIONAL)), j
            if any(t in _EVERY and k + 1 < len(w) and _UNITS.match(w[k + 1]) for k, t in enumerate(w[i:j], i)):
                return i, j
    return None


_KINDS = (_skip_verification, _ignore_instructions, _tamper, _claim_success)


def find_injection(text: str) -> str | None:
    """The first clause of ``text`` (its matching words) that reads as an instruction to subvert
    evaluation, or None."""
    prev: list[str] = []
    for clause in _CLAUSE.split(_normalise(text or "")):
        words = _WORD.findall(clause)
        for kind in _KINDS:
            hit = _skip_verification(words, prev) if kind is _skip_verification else kind(words)
            if hit is not None:
                a, b = hit
                return " ".join(words[a:b + 1]) or " ".join(words)
        prev = words
    return None


def added_lines(old: str, new: str) -> list[str]:
    """Lines of ``new`` that ``old`` does not have (what a full-content change adds)."""
    before = set(old.splitlines())
    return [line for line in new.splitlines() if line not in before]
