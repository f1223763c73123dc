"""Helpers for the harness repo tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from evoharness.harness_repo.models import Edit, GateResult, Verdict
from evoharness.harness_repo.repo import HarnessRepo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def lesson_edit(text: str = "- Stop after two identical tool calls.\n", message: str = "Add a loop lesson",
                **kw) -> Edit:
    return Edit(message=message, targets="F3.repeated_action",
                changes=[{"path": "lessons.md", "content": text}], **kw)


def verdict_for(hr: HarnessRepo, branch: str, accepted: bool = True, **kw) -> Verdict:
    """A verdict on the branch's current head, measured against main's current head."""
    gates = [GateResult(gate="behaviour", passed=accepted, numbers={"before": 0.6, "after": 0.2}),
             GateResult(gate="gain", passed=accepted, numbers={"delta": 0.12, "resolvable": 0.05})]
    fields = dict(candidate=branch, commit=hr.head_of(branch), base=hr.main_head(), accepted=accepted,
                  reason="targeted gain beyond noise" if accepted else "no gain", gates=gates,
                  measurements={"targeted_mean": 0.42})
    fields.update(kw)
    from evoharness.harness_repo.signing import sign

    return sign(hr.repo, Verdict(**fields))  # as the verifier does
