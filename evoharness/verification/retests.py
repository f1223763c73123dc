"""At most one re-verification of an undecided candidate: every test of a commit against a main head, kept.

An undecided verdict (the sequential gain test's last look short of its boundary, every other gate passing)
invites a re-run with more rollouts. The test and its re-run may each let an edit that changes nothing
through with probability ``sequential_alpha``, so the two together with at most twice that (2% at the
default 0.01). A third test, and every one after it, would add to that bound: re-running until it passes
(docs/verification.md, "Undecided verdicts"). `RetestLog` enforces the bound for `evoharness verify`:

- every verification of a commit against main's head is recorded as a git note on the commit, under
  ``refs/notes/<notes_ref>-tests`` (whatever ``--record`` says: the record is what makes the bound hold);
  a verdict a run noted on the commit (``refs/notes/<notes_ref>``) counts as one test too. A test is of
  the commit's *tree*: the tests of every commit with the same tree count (an amended or re-made commit
  of the same edit is the same hypothesis, and reads the same cached rollouts);
- after an undecided verdict the same commit may be tested against the same main head once more: the
  re-verification. Unless that accepted it, any later test is refused (`RetestRefused`) before a rollout
  is paid. Tests against another main head are another hypothesis and start afresh; a main head with the
  same tree (an empty commit, a commit and its revert) is the same main.

The record is read from every ``refs/notes/*-tests`` ref and the verdict notes from every other notes ref, not
only those ``harness_repo.notes_ref`` names now: setting another ``notes_ref`` starts a new record, not a new
count.

A verification in progress holds a reservation in the record, so two concurrent re-verifications cannot
both take the one re-run; one whose process died on this host (its pid gone) no longer counts. One left by a
process killed on another host cannot be told from a running one: ``release`` (`evoharness verify CANDIDATE
--harness DIR --release-reservation`) removes it on the user's word.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import git

from evoharness.errors import InputError
from evoharness.harness_repo import gitops
from evoharness.harness_repo.models import Verdict

RUNNING = "running"


class RetestRefused(InputError):
    """A further test of a candidate commit would spend false-accept rate the stated bound does not cover."""


def outcome(verdict: Verdict) -> str:
    """accepted | undecided | rejected."""
    if verdict.accepted:
        return "accepted"
    return "undecided" if verdict.measurements.get("needs_rollouts") else "rejected"


def entry(verdict: Verdict, k: int | None = None, noted: bool = False) -> dict:
    """A test's record; ``noted``: the same test also wrote its verdict into the commit's verdict note."""
    m = verdict.measurements
    return {"base": verdict.base, "outcome": outcome(verdict), "k": k if k is not None else m.get("k"),
            "looks": m.get("looks"), "needs_rollouts": m.get("needs_rollouts"), "suggested_k": m.get("suggested_k"),
            "signature": verdict.signature, "noted": noted, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _alive(test: dict) -> bool:
    """A reservation counts unless its process is known to be gone (same host, no such pid)."""
    if test.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(test.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def refusal(tests: list[dict]) -> str | None:
    """Why one more test of a commit against one main head is refused (``tests``: the earlier ones, in
    order), or None when it is allowed."""
    running = [t for t in tests if t.get("outcome") == RUNNING]
    if running:
        t = running[0]
        return (f"a verification of this commit against this main head is in progress (pid {t.get('pid')} on "
                f"{t.get('host')}, since {t.get('at')}); wait for it, or, if that process was killed, remove its "
                "reservation with `evoharness verify CANDIDATE --harness DIR --release-reservation`")
    first = next((i for i, t in enumerate(tests) if t.get("outcome") == "undecided"), None)
    if first is None or first == len(tests) - 1:
        return None  # never undecided, or this is the one re-verification it allows
    after = tests[first + 1:]
    if all(t.get("outcome") == "accepted" for t in after):
        return None  # the re-verification accepted it: a re-run reproduces that from the cache
    return (f"already re-verified once after an undecided verdict ({first + 1 + len(after)} tests against this "
            f"main head: {', '.join(t.get('outcome', '?') for t in tests)}); a further test would let an edit "
            "that changes nothing pass with more than twice sequential_alpha (docs/verification.md, \"Undecided "
            "verdicts\"). Not accepted: propose a new candidate, or verify it again after main moves")


class RetestLog:
    """The tests of each candidate commit (``hr``: a `HarnessRepo`), kept in ``refs/notes/<notes_ref>-tests``."""

    def __init__(self, hr) -> None:
        self.hr = hr
        self.ref = f"{hr.config.notes_ref}-tests"

    def tests(self, commit: str, base: str) -> list[dict]:
        """Earlier tests of ``commit``'s tree against ``base``, oldest first: the record's (of this commit and
        of any other with the same tree), and the verdict a run noted on such a commit unless a recorded test
        wrote that note (``verify --record``: same signature; a replay from the cache signs the same verdict,
        so an unnoted one does not stand for the note)."""
        sha = self.hr.repo.commit(commit).hexsha
        tree = self.hr.tree_hash(sha)
        same_main = self._same_main(base)
        tests_refs, verdict_refs = self._refs()
        own: list[dict] = []
        for ref in tests_refs:
            for other, note in gitops.read_notes(self.hr.repo, ref).items():
                for t in note.get("tests", []) if isinstance(note, dict) else []:
                    if (isinstance(t, dict) and same_main(t.get("base")) and (other == sha or t.get("tree") == tree)
                            and (t.get("outcome") != RUNNING or _alive(t))):
                        own.append(t)
        own.sort(key=lambda t: str(t.get("at") or ""))  # ISO times: oldest first (one commit's stay in order)
        for v in self._same_tree_verdicts(sha, tree, verdict_refs):
            if same_main(v.base) and not any(t.get("noted") and t.get("signature") == v.signature for t in own):
                own.insert(0, {**entry(v), "at": None, "from": "verdict note"})
        return own

    def _same_main(self, base: str):
        """A test of ``b`` counts against ``base`` when ``b`` is ``base`` or a commit with the same tree: an
        empty commit on main (or a commit and its revert) is not another hypothesis."""
        try:
            base_tree = self.hr.tree_hash(base)
        except (ValueError, git.BadName):
            base_tree = None

        def same(b: object) -> bool:
            if b == base:
                return True
            if not isinstance(b, str) or base_tree is None:
                return False
            try:
                return self.hr.tree_hash(b) == base_tree
            except (ValueError, git.BadName):  # a main head that is gone
                return False

        return same

    def _refs(self) -> tuple[list[str], list[str]]:
        """(every notes ref holding test records, every other notes ref), as ``read_notes`` names them: the
        configured ones first. Another ``notes_ref`` does not hide the tests recorded under the last one."""
        tests_refs, verdict_refs = [self.ref], [self.hr.config.notes_ref]
        listed = self.hr.repo.git.for_each_ref("--format=%(refname)", "refs/notes/").splitlines()
        for name in (r.removeprefix("refs/notes/") for r in listed if r.startswith("refs/notes/")):
            refs = tests_refs if name.endswith("-tests") else verdict_refs
            if name not in refs:
                refs.append(name)
        return tests_refs, verdict_refs

    def _same_tree_verdicts(self, sha: str, tree: str, refs: list[str]) -> list[Verdict]:
        """The verdicts noted (under any of ``refs``) on ``sha`` and on every other commit whose tree is ``tree``."""
        out: list[Verdict] = []
        for ref in refs:
            for other, note in gitops.read_notes(self.hr.repo, ref).items():
                if not isinstance(note, dict) or "verdict" not in note:
                    continue
                if other != sha:
                    try:
                        if self.hr.tree_hash(other) != tree:
                            continue
                    except (ValueError, git.BadName):  # a note on a commit that is gone
                        continue
                try:
                    v = Verdict.model_validate(note["verdict"])
                except ValueError:  # a note of another tool, or edited by hand
                    continue
                if not any(v.signature == w.signature and v.base == w.base for w in out):
                    out.append(v)
        return out

    def check(self, commit: str, base: str) -> tuple[int, bool]:
        """(the number this test will have, whether it comes after an undecided verdict: the re-verification);
        `RetestRefused` when the bound forbids it."""
        tests = self.tests(commit, base)
        why = refusal(tests)
        if why:
            raise RetestRefused(commit[:10], why)
        return len(tests) + 1, any(t.get("outcome") == "undecided" for t in tests)

    @contextmanager
    def test(self, commit: str, base: str, k: int) -> Iterator[dict]:
        """Check and reserve (under the repo lock), yield the reservation; the caller sets ``verdict`` in it
        (a `Verdict`; ``noted`` True when it also records the verdict note) and the record gets its outcome.
        A test that produced no verdict (an error, a budget refused) leaves nothing behind: it accepted
        nothing."""
        sha = self.hr.repo.commit(commit).hexsha
        with gitops.repo_lock(self.hr.repo, self.hr.config.lock_timeout_s):
            number, retest = self.check(sha, base)
            tree = self.hr.tree_hash(sha)
            stamp = {"base": base, "tree": tree, "outcome": RUNNING, "k": k, "host": socket.gethostname(),
                     "pid": os.getpid(), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            self._update(sha, lambda tests: [*tests, stamp])
        slot: dict = {"number": number, "reverification": retest, "verdict": None, "noted": False}
        try:
            yield slot
        finally:
            done = slot["verdict"]
            with gitops.repo_lock(self.hr.repo, self.hr.config.lock_timeout_s):
                def settle(tests: list) -> list:  # the reservation becomes the test's record, or goes
                    if done is None:
                        return [t for t in tests if t != stamp]
                    return [t if t != stamp else {**entry(done, k, slot["noted"]), "tree": tree} for t in tests]
                self._update(sha, settle)
                reduced = self.hr.repo.commit(done.commit).hexsha if done is not None else sha
                if reduced != sha:  # refused hunks were dropped: the verdict is on the branch's new head
                    self._update(reduced, lambda tests: [*tests, {**entry(done, k, slot["noted"]),
                                                                  "tree": self.hr.tree_hash(reduced)}])

    def release(self, commit: str, base: str) -> list[dict]:
        """Remove the reservations of ``commit``'s tree against ``base`` (under any tests ref) and return them:
        what a verification killed on another host leaves (nothing here can tell it from a running one). One
        whose process runs on this host is a `RetestRefused`, and nothing is removed."""
        sha = self.hr.repo.commit(commit).hexsha
        tree, same_main = self.hr.tree_hash(sha), self._same_main(base)
        removed: list[dict] = []
        with gitops.repo_lock(self.hr.repo, self.hr.config.lock_timeout_s):
            notes = [(ref, other, note) for ref in self._refs()[0]
                     for other, note in gitops.read_notes(self.hr.repo, ref).items() if isinstance(note, dict)]
            held = [(ref, other, note, [t for t in note.get("tests", []) if isinstance(t, dict)
                                         and t.get("outcome") == RUNNING and same_main(t.get("base"))
                                         and (other == sha or t.get("tree") == tree)]) for ref, other, note in notes]
            for t in (t for *_, ts in held for t in ts):
                if t.get("host") == socket.gethostname() and _alive(t):
                    raise RetestRefused(sha[:10], f"the verification holding the reservation runs on this host (pid "
                                                  f"{t.get('pid')}, since {t.get('at')}): stop it or wait for it")
            for ref, other, note, ts in held:
                if ts:
                    gitops.write_note(self.hr.repo, ref, other,
                                      {**note, "tests": [t for t in note.get("tests", []) if t not in ts]})
                    removed += ts
        return removed

    def _update(self, sha: str, change) -> None:
        note = gitops.read_notes(self.hr.repo, self.ref).get(sha) or {}
        gitops.write_note(self.hr.repo, self.ref, sha, {**note, "tests": change(note.get("tests", []))})
