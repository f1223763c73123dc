"""Coding-agent rules read from the delivered patch (``F2.truncated_file``, ``F4.forbidden_edit``).

``F2.truncated_file``: the delivered patch cuts off the end of a file that existed before -- its last hunk has no
context after its last change (a unified diff shows up to three lines of context after a change; none means the
change reaches the file's end) and removes three or more lines there that the patch adds nowhere. A coding agent
rewrites a file with a program (``awk ... > tmp && mv tmp FILE``, ``head -n``, a Python script writing a string it
built) and a wrong range or a pattern that never matches drops everything after it; the agent rarely looks at the
whole file again, and a compile check still passes when the cut falls between two definitions. The tool did what it
was told, not what the agent meant: an invalid invocation (AgentRx's category; F2 under the crosswalk, routed to the
harness: an edit tool that refuses to drop a file's tail, or a check that shows the diff's size, prevents it).

Located at the write that cut it, as far as the run shows: the last write of that file that went through and rewrote
it whole (a redirection, ``mv`` / ``cp`` onto it, Python writing it -- not an in-place ``sed -i`` / ``perl -i`` /
``patch`` / editor replacement, which changes the lines it matches), else the last write of it that went through. A
patch cut short by whoever stored it (its hunks' line counts disagree with their headers) says nothing and is skipped.
"""

from __future__ import annotations

import re

from evoharness.diagnosis.config import DiagnosisConfig
from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import IN_PLACE_EDIT, _failed_delivery, _refused, _write_targets, quote, writes_file
from evoharness.diagnosis.invariants import write_calls
from evoharness.diagnosis.models import FailureClass, Signal

HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_SECTION = re.compile(r"^(?=diff --git )", re.M)
_NOT_EXISTING = re.compile(r"^(?:new file mode|deleted file mode|--- /dev/null|\+\+\+ /dev/null)", re.M)
_PATH = re.compile(r"diff --git a/(\S{1,300}) b/")
MIN_CUT_LINES = 3
MAX_FILES = 16  # files of one patch looked up among the writes (each a pass over the run's write calls)


def cut_tails(patch: str) -> list[tuple[str, list[str]]]:
    """``(path, lines)`` for each file that existed before whose end the patch removes: the last hunk's changes after
    its last context line hold ``MIN_CUT_LINES`` or more removed non-blank lines that no added line of that file's
    diff restores (a block moved or re-indented elsewhere in the file is no cut), one of them at an outer level than
    every line added there (a cut drops what followed -- the rest of a block, the next definition -- and puts nothing
    at that level back; rewriting the last lines of the last function, at the level they were, is no cut). Hunks
    whose line counts disagree with their headers (a patch stored cut short) are skipped."""
    out: list[tuple[str, list[str]]] = []
    for section in _SECTION.split(patch):
        m = _PATH.match(section)
        if m is None or _NOT_EXISTING.search(section):
            continue
        lines = section.split("\n")
        last = max((i for i, line in enumerate(lines) if line.startswith("@@")), default=None)
        header = HUNK.match(lines[last]) if last is not None else None
        if header is None:
            continue
        body = [line for line in lines[last + 1:] if not line.startswith("\\")]  # "\ No newline at end of file"
        while body and body[-1] == "":
            body.pop()
        old_n, new_n = int(header.group(1) or 1), int(header.group(2) or 1)
        if sum(line[:1] in (" ", "-") for line in body) != old_n or \
                sum(line[:1] in (" ", "+") for line in body) != new_n:
            continue
        context = max((i for i, line in enumerate(body) if line[:1] == " "), default=-1)
        tail = body[context + 1:]
        added = {line[1:].strip() for line in lines if line.startswith("+") and not line.startswith("+++")}
        gone = [line[1:] for line in tail if line.startswith("-") and line[1:].strip()
                and line[1:].strip() not in added]
        put = [line[1:] for line in tail if line.startswith("+") and line[1:].strip()]
        if len(gone) >= MIN_CUT_LINES and (not put or min(map(_indent, gone)) < min(map(_indent, put))):
            out.append((m.group(1), gone))
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class TruncatedFileDetector:
    """``F2.truncated_file`` (module docstring): a failed run whose delivered patch cuts off the end of an existing
    file, at the write that cut it."""

    id = "F2.truncated_file"
    failure_class = FailureClass.F2

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        answer = view.traj.final_answer
        if not isinstance(answer, str) or "diff --git" not in answer or not _failed_delivery(view, cfg):
            return []
        cut = cut_tails(answer[:500_000])
        if not cut:
            return []
        writes = write_calls(view)
        target = _write_targets(view, writes)
        for path, gone in cut[:MAX_FILES]:  # a hostile patch of thousands of cut files: the first few
            done = [c for c in writes if not _refused(view, c) and writes_file(view, c, path, target)]
            if not done:
                continue
            whole = [c for c in done if not IN_PLACE_EDIT.search(c.canonical[:20_000])]
            w = (whole or done)[-1]
            how = "the last write that rewrote it whole" if whole else "the last write of it"
            return [Signal(id=self.id, failure_class=FailureClass.F2, step=w.step,
                           evidence=f"the delivered patch cuts off the end of {path}: {len(gone)} lines removed "
                                    f"up to its end and added nowhere (from {quote(gone[0].strip(), 60)!r}); {how}: "
                                    f"{w.name}({quote(w.arguments, 100)})")]
        return []


# an explicit prohibition of changing the tests in the task's instructions (mini-swe-agent's "DO NOT MODIFY: Tests,
# configuration files"; "do not modify the tests", "must not change any test files"); "you don't need to modify the
# tests" permits, it does not forbid. The tests named after "DO NOT MODIFY" must be in what it forbids: not past
# "except" / "other than" / "but" / "only" or a sentence's end ("anything except the tests", "source files. You may
# add tests"), not "non-test files", not "the code under test"
FORBIDS_TESTS = re.compile(
    r"\bDO NOT MODIFY\b(?:(?!\b(?:except|other than|besides|but|outside|apart from|only)\b|[.;!?](?:\s|$))[^\n]){0,40}?"
    r"(?<![\w-])(?<!\bunder )tests?\b|"
    r"\b(?:do not|don't|must not|never|should not)\s+(?:modify|change|edit|touch)"
    r"\s+(?:the\s+|any\s+(?:of\s+the\s+)?|existing\s+)?(?:tests?|test files?|testing logic)\b", re.IGNORECASE)
# a test file: under a tests/ directory at any depth, a test/ or testing/ directory at the repository's root (pytest's
# testing/), or named as one; a package named test / testing below the root is library code (django/test/,
# numpy/testing/: a fix there is a source change)
TEST_PATH = re.compile(r"(?:^|/)tests/|^(?:test|testing)/|(?:^|/)test_[^/]*\.py$|_tests?\.py$|(?:^|/)conftest\.py$")
_INSTRUCTION_CHARS = 50_000


def changed_tests(patch: str) -> list[str]:
    """Test files that existed before (``TEST_PATH``; not ones the patch creates) the patch changes, in its order."""
    return [m.group(1) for section in _SECTION.split(patch)
            if (m := _PATH.match(section)) is not None and TEST_PATH.search(m.group(1))
            and not _NOT_EXISTING.search(section)]


class ForbiddenEditDetector:
    """``F4.forbidden_edit``: a failed run whose task forbids changing the tests (``FORBIDS_TESTS``, in the system
    prompt or the task before the agent's first turn) and whose delivered patch changes a test file that existed
    (``changed_tests``), at the first write of such a file that went through. The agent broke an explicit instruction
    of its task (AgentRx's Instruction/Plan Adherence Failure, F4), and the evaluation runs its own tests against those
    files. A located signal: it wins over ``F4.first_write`` (the first write of the source, made before)."""

    id = "F4.forbidden_edit"
    failure_class = FailureClass.F4

    def detect(self, view: TraceView, cfg: DiagnosisConfig) -> list[Signal]:
        answer = view.traj.final_answer
        if not isinstance(answer, str) or "diff --git" not in answer or not _failed_delivery(view, cfg):
            return []
        tests = changed_tests(answer[:500_000])[:MAX_FILES]
        if not tests:
            return []
        first = view.assistant_steps[0] if view.assistant_steps else len(view.texts)
        said = next((m for i in range(first) if view.roles[i] in ("system", "user")
                     and (m := FORBIDS_TESTS.search(view.texts[i][:_INSTRUCTION_CHARS])) is not None), None)
        if said is None:
            return []
        writes = write_calls(view)
        target = _write_targets(view, writes)
        w = next((c for c in writes if not _refused(view, c) and any(writes_file(view, c, p, target) for p in tests)),
                 None)
        if w is None:
            return []
        return [Signal(id=self.id, failure_class=FailureClass.F4, step=w.step,
                       evidence=f"the task says {quote(said.group(0), 60)!r}; the delivered patch changes "
                                f"{', '.join(tests[:3])}, first written here: {w.name}({quote(w.arguments, 100)})")]
