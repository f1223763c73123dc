"""Reviewing candidates: the listing behind `evoharness review`, `show` and the PR body."""

from __future__ import annotations

import contextlib
import signal
from typing import Literal

import git
from pydantic import BaseModel, Field

from evoharness.cli_support import shell_words
from evoharness.errors import InputError
from evoharness.harness_repo.models import SUPERSEDED_BY, Candidate, Verdict
from evoharness.harness_repo.repo import HarnessRepo
from evoharness.logging import get_logger

log = get_logger(__name__)

# superseded: accepted, not merged -- another candidate of its round was merged first (re-verify to merge it)
Status = Literal["pending", "verified", "merged", "rejected", "superseded"]


class CandidateInfo(BaseModel):
    """One row of `evoharness review`."""

    branch: str
    commit: str
    targets: str
    status: Status
    round: int = 0
    message: str = ""
    failure_class: str | None = None
    verdict: str = Field("", description="one-line verdict summary ('' when never verified)")
    needs_reverify: bool = Field(False, description="verified, but main has moved since: re-verify to merge")
    diffstat: dict[str, int | list[str]] = Field(default_factory=dict)


def superseded(verdict: Verdict | None) -> bool:
    """Whether the gate recorded this verdict on a candidate it accepted but did not merge for another one."""
    return verdict is not None and verdict.reason.startswith(SUPERSEDED_BY)


def summarise(verdict: Verdict) -> str:
    passed = sum(g.passed for g in verdict.gates)
    gates = f", gates {passed}/{len(verdict.gates)}" if verdict.gates else ""
    if superseded(verdict):  # the run summary's words: "Accepted, not merged"
        return f"accepted, not merged{gates}: {verdict.reason.removeprefix('accepted but ')}"
    word = "accepted" if verdict.accepted else "rejected"
    reason = f": {verdict.reason}" if verdict.reason else ""
    approval = f"; {verdict.approval}" if verdict.approval else ""
    return f"{word}{gates}{reason}{approval}"


def status_of(hr: HarnessRepo, branch: str, reachable_from_main: set[str],
              notes: dict[str, dict]) -> tuple[Status, Verdict | None, str]:
    """(status, the verdict on the head if any, summary) for one candidate branch."""
    head = hr.head_of(branch)
    note = notes.get(head)
    verdict = Verdict.model_validate(note["verdict"]) if note and "verdict" in note else None
    if head in reachable_from_main:
        return "merged", verdict, summarise(verdict) if verdict else "merged"
    if note and note.get("status") == "rejected":
        if superseded(verdict):
            return "superseded", verdict, summarise(verdict)
        return "rejected", verdict, summarise(verdict) if verdict else "rejected"
    if verdict is not None and verdict.accepted:
        from evoharness.harness_repo.signing import is_signed

        if not is_signed(hr.repo, verdict) or verdict.commit != head:
            return "pending", None, "a note claims a verdict that this repository's verifier did not sign: ignored"
    if verdict is not None:
        return ("verified" if verdict.accepted else "rejected"), verdict, summarise(verdict)
    stale = [c for c in hr.repo.git.rev_list(f"{hr.main_ref}..{head}").split() if c in notes]
    if stale:
        return "pending", None, f"stale: verdict on {stale[0][:10]}, branch moved since; re-verify"
    return "pending", None, ""


def list_candidates(hr: HarnessRepo) -> list[CandidateInfo]:
    reachable = set(hr.repo.git.rev_list(hr.main_ref).split())
    notes = hr.notes()
    main = hr.main_head()
    out = []
    for branch in hr.branches():
        try:
            cand = hr.candidate(branch)
        except InputError:
            continue  # a branch under candidate/ that evoharness did not make
        status, verdict, summary = status_of(hr, branch, reachable, notes)
        out.append(CandidateInfo(
            branch=branch, commit=cand.commit, targets=cand.targets, status=status, round=cand.round,
            message=cand.message, failure_class=cand.failure_class, verdict=summary,
            needs_reverify=status == "verified" and verdict is not None and verdict.base != main,
            diffstat=hr.diffstat(branch),
        ))
    return out


def candidate_info(hr: HarnessRepo, branch: str) -> CandidateInfo:
    """The `review` row of one candidate branch (``InputError`` for a branch evoharness did not make)."""
    hr.candidate(branch)  # a candidate/ branch without evoharness's trailers is no row: say why
    return next(i for i in list_candidates(hr) if i.branch == branch)


DO_NOT_MERGE = "do-not-merge/"  # the prefix `pr --allow-unverified` pushes an unverified candidate under


def unmergeable(info: CandidateInfo) -> str | None:
    """Why a reviewer must not merge this candidate (None: verified against main's current head).

    The same rule as `merge_verified`: a verdict that accepted the branch's head, measured against main as it
    is now; a rejected, superseded, unverified, stale or already merged candidate is not one to open a PR for.
    """
    if info.status == "verified" and not info.needs_reverify:
        return None
    if info.status == "verified":
        return "verified against an older main (main moved since): re-verify it"
    if info.status == "rejected":
        detail = info.verdict.removeprefix("rejected").lstrip(":, ")
        return "rejected by verification" + (f" ({detail})" if detail else "")
    if info.status == "merged":
        return "already merged into main"
    if info.status == "superseded":
        detail = info.verdict.split(": ", 1)[-1]
        return f"accepted, not merged ({detail})"
    return "not verified" + (f" ({info.verdict})" if info.verdict else "")


def _stat_line(stat: dict) -> str:
    files = stat.get("files") or []
    return f"{len(files)} file(s), +{stat.get('insertions', 0)} -{stat.get('deletions', 0)}"


def show_text(hr: HarnessRepo, branch: str) -> str:
    cand = hr.candidate(branch)
    info = candidate_info(hr, branch)
    found = hr.verdict_of(cand.commit)
    lines = [
        f"candidate  {cand.branch}",
        f"commit     {cand.commit}",
        f"base       {cand.base}",
        f"status     {info.status}" + (" (main moved: re-verify)" if info.needs_reverify else ""),
        f"targets    {cand.targets}" + (f" ({cand.failure_class})" if cand.failure_class else ""),
        f"message    {cand.message}",
        f"evidence   {', '.join(cand.evidence) or '-'}",
        f"flips      {', '.join(cand.predicted_flips) or '-'}",
        f"critic     {cand.critic or '-'}",
        f"verdict    {info.verdict or 'not verified'}",
        f"diffstat   {_stat_line(info.diffstat)}",
    ]
    if cand.rationale:
        lines += ["", cand.rationale]
    from evoharness.harness_repo.static_review import review_change

    findings = review_change(hr, hr.diff_base(branch), cand.commit)
    if findings:
        lines += ["", "static review (a merge needs a human's approval):", *(f"  {f}" for f in findings)]
    if found is not None and found[1].gates:
        lines += ["", found[1].table()]
    return "\n".join(lines) + "\n\n" + hr.diff(branch).rstrip("\n") + "\n"  # git's diff comes without its last newline


def pr_body(hr: HarnessRepo, cand: Candidate, refused: str | None = None) -> str:
    """The markdown PR body; ``refused`` (why it must not be merged) puts DO NOT MERGE on top."""
    found = hr.verdict_of(cand.commit)
    stat = hr.diffstat(cand.branch)
    title = cand.message or cand.branch
    out = [f"## {'DO NOT MERGE: ' if refused else ''}{title}", ""]
    if refused:
        out += [f"> **Do not merge.** This candidate is {refused}. It was pushed with `evoharness pr "
                "--allow-unverified` for discussion only; `evoharness` would refuse to merge it.", ""]
    out += [
        "### Hypothesis",
        f"Targets `{cand.targets}`" + (f" (failure class {cand.failure_class})" if cand.failure_class else "")
        + f", round {cand.round}.",
    ]
    if cand.rationale:
        out += ["", cand.rationale]
    if cand.critic:
        out += ["", f"Critic: {cand.critic}"]
    out += ["", "### Evidence"]
    out += [f"- `{e}`" for e in cand.evidence] or ["- (no trajectories cited)"]
    if cand.predicted_flips:
        out += ["", "Predicted flips: " + ", ".join(f"`{t}`" for t in cand.predicted_flips)]
    out += ["", "### Verification"]
    if found is None:
        out.append("Not verified yet: do not merge.")
    else:
        _, v = found
        out += [f"**{summarise(v)}** (strategy `{v.strategy}`, decided by {v.decided_by}; "
                f"commit `{v.commit[:10]}` against main `{v.base[:10]}`)", ""]
        out.append(v.table() if v.gates else "| gate | result | numbers | reason |\n|---|---|---|---|")
        if v.measurements:
            out += ["", "| measurement | value |", "|---|---|"]
            out += [f"| {k} | {val} |" for k, val in v.measurements.items()]
    out += ["", "### Diffstat", f"{_stat_line(stat)}", ""]
    out += [f"- `{f}`" for f in stat.get("files", [])]
    return "\n".join(out) + "\n"


def git_reason(e: git.GitCommandError) -> str:
    """git's own first ``fatal:``/``error:`` line, without GitPython's ``stderr: '...'`` wrapping; the signal that
    killed git when it said nothing (``SIGXFSZ``: a write past the file size limit)."""
    if isinstance(e.status, int) and e.status < 0 and not str(e.stderr or "").strip():
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-e.status).name}"
    text = (e.stderr or str(e)).strip()
    if text.startswith("stderr:"):
        text = text[len("stderr:"):].strip().strip("'")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal:", "error:"):
            if line.startswith(prefix):
                return line[len(prefix):].strip()
    return lines[0] if lines else "git failed"


def _looks_like_url(remote: str) -> bool:
    return "://" in remote or remote.startswith(("/", ".", "~")) or ":" in remote


def push_candidate(hr: HarnessRepo, branch: str, remote: str, remote_branch: str | None = None) -> None:
    """Push the candidate branch (as ``remote_branch``, default its own name) and the verdict notes, if any, to
    ``remote`` (a name or a URL)."""
    names = [r.name for r in hr.repo.remotes]
    if not _looks_like_url(remote) and remote not in names:
        configured = f"its remotes: {', '.join(names)}" if names else "it has no remote"
        raise InputError(remote, f"not a remote of {hr.path} ({configured}; add one with "
                         f"`{shell_words('git', '-C', hr.path, 'remote', 'add', remote, 'URL')}`, or pass a URL)")
    try:
        hr.repo.git.push(remote, f"refs/heads/{branch}:refs/heads/{remote_branch or branch}")
    except git.GitCommandError as e:
        raise InputError(remote, f"push failed: {git_reason(e)}") from None
    notes_ref = f"refs/notes/{hr.config.notes_ref}"
    if hr.repo.git.for_each_ref(notes_ref):
        try:
            hr.repo.git.push(remote, f"{notes_ref}:{notes_ref}")
        except git.GitCommandError as e:  # notes diverged on the remote; the PR body has the verdict
            log.warning("notes_not_pushed", remote=remote, reason=git_reason(e))
