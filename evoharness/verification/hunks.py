"""Judge each part of a candidate: leave-one-out per hunk, then the hunk alone.

A candidate's gain is credited to its target as a whole, so a harmful part (a lesson saying "answer
immediately") rides along with a useful one (a loop-guard switch) whenever the useful one gains more
than the harmful one costs. A candidate whose diff has several independent hunks -- several files,
or changed regions of one file separated by unchanged lines (in Markdown also separate list items or
paragraphs of an inserted block) -- is therefore judged hunk by hunk, on the same tasks and seeds
as the candidate (paired), with the behaviour-aware gates (behaviour, gain, no_regression,
attribution): the hunk's own gain must be resolvable and come from the targeted behaviour.

1. leave-one-out: the candidate must pass them against the candidate *without the hunk*;
2. if not, the hunk *alone* on the base must pass them against the base (two halves of one fix, each
   enough alone, are both kept though neither adds much to the other).

A hunk that passes neither -- one that does nothing, or one that harms (removing it helps, and alone
it loses) -- is refused even when its siblings gain, and the candidate with it; the verdict names the
refused hunks, so the engineer can propose the useful ones on their own. Hunks that need each other
(a policy switch and the middleware it enables) pass by leave-one-out: removing either loses the gain.

Variant commits are built from git objects (no working tree is touched); the rollout cache is keyed
by tree, so re-verifying after a crash re-reads the same rollouts.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from evoharness.harness_repo.models import Candidate, GateResult
from evoharness.sandbox.api import RolloutRequest
from evoharness.verification.evidence import Evidence
from evoharness.verification.gates import AttributionGate, BehaviourGate, GainGate, Gate, NoRegressionGate
from evoharness.verification.observations import Observation

if TYPE_CHECKING:
    from evoharness.harness_repo.repo import HarnessRepo

Measure = Callable[[list[RolloutRequest]], list[Observation]]


@dataclass(frozen=True)
class Part:
    """One hunk of a candidate: ``label`` (``path#n`` and its lines); ``without``, the commit of the
    candidate with only this hunk reverted; ``alone``, the base with only this hunk applied."""

    label: str
    without: str
    alone: str | None = None


class HunkSource(Protocol):
    """Contract: ``parts(candidate)`` returns one `Part` per independent hunk of the candidate's change
    over its base, in a stable order; an empty list or a single part means there is nothing to judge
    separately. It may create objects (commits) but never moves a branch.

    ``reduce(candidate, refused)`` returns the candidate with the ``refused`` parts dropped, as a new
    head of the candidate's branch (idempotent: a second call finds that head), or None when it
    cannot (then the candidate is simply rejected).
    """

    def parts(self, candidate: Candidate) -> list[Part]: ...

    def reduce(self, candidate: Candidate, refused: Sequence[Part]) -> Candidate | None: ...


class StaticParts:
    """Parts given up front per candidate commit (the simulation and tests)."""

    def __init__(self, parts: dict[str, list[Part]] | None = None) -> None:
        self.by_commit = dict(parts or {})

    def parts(self, candidate: Candidate) -> list[Part]:
        return list(self.by_commit.get(candidate.commit, []))

    def reduce(self, candidate: Candidate, refused: Sequence[Part]) -> Candidate | None:
        return None


# ---- splitting a diff into hunks -------------------------------------------------------------------

_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s|^#")


@dataclass(frozen=True)
class Hunk:
    """A changed region of one file: base lines ``[a0, a1)`` replaced by candidate lines ``[b0, b1)``."""

    a0: int
    a1: int
    b0: int
    b1: int


def split_hunks(old: str, new: str, markdown: bool = False) -> list[Hunk]:
    """The independent changed regions turning ``old`` into ``new``.

    A region is a run of changed lines with no unchanged line inside it. In Markdown, a pure
    insertion is split further where a list item, a heading or a paragraph (after a blank line)
    begins: two lessons appended together are two hunks.
    """
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out: list[Hunk] = []
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if out and out[-1].a1 == a0 and out[-1].b1 == b0:  # adjacent opcodes: one region
            prev = out.pop()
            out.append(Hunk(prev.a0, a1, prev.b0, b1))
        else:
            out.append(Hunk(a0, a1, b0, b1))
    if not markdown:
        return out
    split: list[Hunk] = []
    for h in out:
        if h.a0 != h.a1:
            split.append(h)
            continue
        starts = [i for i in range(h.b0, h.b1)
                  if i == h.b0 or _ITEM.match(b[i]) or (not b[i - 1].strip() and b[i].strip())]
        bounds = [*starts, h.b1]
        split.extend(Hunk(h.a0, h.a0, s, e) for s, e in zip(bounds, bounds[1:], strict=False))
    return split


def without_hunk(old: str, new: str, hunks: Sequence[Hunk], drop: int) -> str:
    """``new`` with hunk ``drop`` reverted to ``old``'s lines (the other hunks kept)."""
    return without_hunks(old, new, hunks, {drop})


def without_hunks(old: str, new: str, hunks: Sequence[Hunk], drop: set[int]) -> str:
    """``new`` with every hunk in ``drop`` reverted to ``old``'s lines."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out, pos = [], 0
    for i, h in enumerate(hunks):
        if i in drop:
            out.extend(b[pos : h.b0])
            out.extend(a[h.a0 : h.a1])
            pos = h.b1
    out.extend(b[pos:])
    return "".join(out)


def only_hunk(old: str, new: str, hunks: Sequence[Hunk], keep: int) -> str:
    """``old`` with only hunk ``keep`` applied."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    h = hunks[keep]
    return "".join([*a[: h.a0], *b[h.b0 : h.b1], *a[h.a1 :]])


class GitParts:
    """Leave-one-out commits of a candidate in the harness repo, one per hunk of its diff over its base.

    A file added or deleted whole is one hunk; a binary or non-UTF-8 file is one hunk. Each commit's
    parent is the candidate's head, so ``git log`` shows what it was made from; no branch moves.
    """

    def __init__(self, repo: HarnessRepo) -> None:
        self.repo = repo
        self._memo: dict[str, list[Part]] = {}
        # candidate commit -> label -> (path, old text, new text, hunks, index); None for a whole file
        self._where: dict[str, dict[str, tuple[str, str, str, list[Hunk], int] | None]] = {}

    def parts(self, candidate: Candidate) -> list[Part]:
        if candidate.commit in self._memo:
            return list(self._memo[candidate.commit])
        from evoharness.harness_repo import gitops

        git_repo = self.repo.repo
        head = git_repo.commit(candidate.commit)
        base_sha = candidate.base if candidate.base and gitops.ref_sha(git_repo, candidate.base) else None
        base = git_repo.commit(base_sha) if base_sha else head.parents[0]
        # (label, the file's content without the hunk, the file's content with only the hunk)
        variants: list[tuple[str, dict[str, bytes | None], dict[str, bytes | None]]] = []
        where = self._where.setdefault(candidate.commit, {})
        for path in self.repo.changed_paths(base.hexsha, head.hexsha):
            old, new = _blob(base.tree, path), _blob(head.tree, path)
            text_old, text_new = _text(old), _text(new)
            if old is None or new is None or text_old is None or text_new is None:
                variants.append((f"{path}#1", {path: old}, {path: new}))
                where[f"{path}#1"] = None
                continue
            hunks = split_hunks(text_old, text_new, markdown=path.endswith(".md"))
            for i, h in enumerate(hunks):
                label = f"{path}#{i + 1} (line {h.b0 + 1})"
                where[label] = (path, text_old, text_new, hunks, i)
                variants.append((label, {path: without_hunk(text_old, text_new, hunks, i).encode()},
                                 {path: only_hunk(text_old, text_new, hunks, i).encode()}))
        out = []
        for label, without, alone in variants:
            w = gitops.rewrite_tree(git_repo, head.tree, without)
            a = gitops.rewrite_tree(git_repo, base.tree, alone)
            out.append(Part(label=label,
                            without=_commit(git_repo, w, f"{candidate.branch} without {label}\n", head),
                            alone=_commit(git_repo, a, f"{candidate.branch}: only {label}\n", base, head)))
        self._memo[candidate.commit] = out
        return list(out)

    def reduce(self, candidate: Candidate, refused: Sequence[Part]) -> Candidate | None:
        """A commit on the candidate's branch that reverts the ``refused`` hunks (all at once)."""
        from evoharness.harness_repo import gitops

        where = self._where.get(candidate.commit) or {}
        if not refused or any(p.label not in where for p in refused):
            return None
        git_repo = self.repo.repo
        head = git_repo.commit(candidate.commit)
        files: dict[str, bytes | None] = {}
        per_file: dict[str, tuple[str, str, list[Hunk], set[int]]] = {}
        for p in refused:
            spot = where[p.label]
            if spot is None:  # a whole file: back to the base
                files[p.label.rsplit("#", 1)[0]] = _blob(git_repo.commit(p.without).tree, p.label.rsplit("#", 1)[0])
                continue
            path, old, new, hunks, i = spot
            per_file.setdefault(path, (old, new, hunks, set()))[3].add(i)
        for path, (old, new, hunks, drop) in per_file.items():
            files[path] = without_hunks(old, new, hunks, drop).encode()
        tree = gitops.rewrite_tree(git_repo, head.tree, files)
        if tree == head.tree.hexsha:
            return None
        branch_head = self.repo.head_of(candidate.branch)
        if branch_head != candidate.commit:  # reduced before (a resumed run): the same change again?
            c = git_repo.commit(branch_head)
            if c.tree.hexsha == tree and [q.hexsha for q in c.parents] == [candidate.commit]:
                return candidate.model_copy(update={"commit": branch_head})
            return None
        labels = ", ".join(p.label for p in refused)
        msg = (f"Drop hunks with no attributable gain\n\nVerification left each hunk of {candidate.commit[:10]} "
               f"out in turn and ran it alone; these gained nothing attributable and are reverted: {labels}\n")
        sha = gitops.make_commit(git_repo, tree, msg, [candidate.commit])
        with gitops.repo_lock(git_repo, self.repo.config.lock_timeout_s):
            if not gitops.cas_ref(git_repo, f"refs/heads/{candidate.branch}", sha, candidate.commit):
                return None
        return candidate.model_copy(update={"commit": sha})


def _commit(git_repo, tree: str, message: str, parent, dated=None) -> str:
    """A commit dated like ``dated`` (default ``parent``) by the same people: the same variant of the
    same candidate gets the same sha in every run, so a resumed run reuses its rollouts and ids."""
    import git

    src = dated or parent
    return git.Commit.create_from_tree(
        git_repo, git.Tree(git_repo, bytes.fromhex(tree)), message, parent_commits=[parent], head=False,
        author=src.author, committer=src.committer,
        author_date=f"{src.authored_date} {_tz(src.author_tz_offset)}",
        commit_date=f"{src.committed_date} {_tz(src.committer_tz_offset)}").hexsha


def _tz(offset: int) -> str:
    """GitPython's ``*_tz_offset`` (seconds west of UTC) as git's +HHMM."""
    east = -offset
    sign = "+" if east >= 0 else "-"
    return f"{sign}{abs(east) // 3600:02d}{abs(east) % 3600 // 60:02d}"


def _blob(tree, path: str) -> bytes | None:
    try:
        return tree[path].data_stream.read()
    except KeyError:
        return None


def _text(data: bytes | None) -> str | None:
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---- the judgement -----------------------------------------------------------------------------------

def judge_parts(parts: Sequence[Part], ev: Evidence, candidate_requests: Sequence[RolloutRequest],
                measure: Measure, max_parts: int, min_share: float = 0.4,
                gain_gate: Gate | None = None, no_regression_alpha: float | None = None,
                gates: Sequence[Gate] | None = None) -> tuple[GateResult, list[Part]]:
    """The ``hunks`` gate: every part must pass the behaviour-aware gates left out, or else alone.

    ``ev`` is the candidate's evidence (its baseline is the base on the same seeds);
    ``candidate_requests`` are the candidate's own requests, whose tasks and seeds each variant
    reuses; ``measure`` runs requests and pays for them. ``gain_gate`` is the gain test each part must
    pass (default `GainGate`, the fixed design's; a sequential verification passes its paired test so
    that a part is judged by the same kind of test that accepted the whole candidate);
    ``no_regression_alpha`` is the no_regression gate's (`NoRegressionGate`). ``gates``: the gates each part
    must pass instead (a cost edit's, `cost.cost_gates`: each hunk must save cost left out or alone, with
    ``gain_gate`` its cost test). Returns the gate and the refused parts.
    """
    name = "hunks"
    if len(parts) > max_parts:
        return GateResult(gate=name, passed=False, numbers={"hunks": len(parts), "max_hunks": max_parts},
                          reason=f"{len(parts)} independent hunks (at most {max_parts} are judged one by one): "
                          "split the candidate"), []
    gain = gain_gate if gain_gate is not None else GainGate()
    gates = list(gates) if gates is not None else [BehaviourGate(), gain, NoRegressionGate(no_regression_alpha or None),
                                                   AttributionGate(min_share)]
    compared = set(ev.selection.targeted) | set(ev.selection.control)
    reqs = [r for r in candidate_requests if r.task_id in compared]

    def compare(baseline: list[Observation], candidate: list[Observation]) -> tuple[bool, str, float | None]:
        sub = Evidence(target=ev.target, k=ev.k, selection=ev.selection, anchor=ev.anchor, baseline=baseline,
                       candidate=candidate, z=ev.z, sigma_floor=ev.sigma_floor)
        results = [gate.check(sub) for gate in gates]
        failed = [r for r in results if not r.passed]
        numbers = next((r.numbers for r in results if r.gate == gain.name), {})
        return not failed, "; ".join(f"{r.gate}: {r.reason}" for r in failed), numbers.get(
            "gain", numbers.get("mean_diff", numbers.get("saved")))

    numbers: dict[str, float | int | str | None] = {"hunks": len(parts)}
    refused, reasons = [], []
    for n, part in enumerate(parts, 1):
        loo = measure([r.model_copy(update={"harness_commit": part.without}) for r in reqs])
        ok, why, numbers[f"h{n}_left_out"] = compare(loo, ev.candidate)
        if not ok and part.alone is not None:
            alone = measure([r.model_copy(update={"harness_commit": part.alone}) for r in reqs])
            ok, why_alone, numbers[f"h{n}_alone"] = compare(ev.baseline, alone)
            why = f"left out {why}; alone {why_alone}"
        if not ok:
            refused.append(part)
            reasons.append(f"{part.label} ({why})")
    numbers["refused"] = len(refused)
    numbers["resolvable"] = round(ev.resolvable(ev.selection.targeted), 6)
    what = "saving" if gain.name == "cost" else "gain"
    reason = (f"each of {len(parts)} hunks {'saves' if what == 'saving' else 'gains'}" if not refused
              else f"no attributable {what} from " + "; ".join(reasons))
    return GateResult(gate=name, passed=not refused, reason=reason, numbers=numbers), refused
