"""Types shared by the harness repo, the roles, verification and the graph."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator


class FileChange(BaseModel):
    """One file change: either full new ``content``, a unified ``diff``, or ``delete``.

    A key it does not have is refused, and ``delete`` is ``true`` or ``false`` only: ``"delete": "yes"`` (or ``1``)
    was read as true and deleted the file, ``"no"`` as false, and a misspelt key was dropped without a word."""

    model_config = ConfigDict(extra="forbid")

    path: str
    content: str | None = None
    diff: str | None = None
    delete: StrictBool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> FileChange:
        given = sum([self.content is not None, self.diff is not None, self.delete])
        if given != 1:
            raise ValueError(f"{self.path}: give exactly one of 'content', 'diff' or 'delete'")
        return self


class Edit(BaseModel):
    """A proposed harness edit (what the engineer writes; EDIT.json on the CLI). A key it does not have is refused
    (a misspelt ``rationale`` was committed without it)."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, description="commit subject (and body)")
    targets: str = Field(min_length=1, description="the targeted signal id, e.g. 'F3.repeated_action'")
    changes: list[FileChange] = Field(min_length=1)
    failure_class: str | None = None
    evidence: list[str] = Field(default_factory=list, description="trajectory ids (optionally id@step)")
    predicted_flips: list[str] = Field(default_factory=list, description="task ids expected to flip")
    critic: str | None = Field(None, description="the critic's verdict line")
    rationale: str = ""


class Candidate(BaseModel):
    branch: str
    commit: str
    base: str = Field(description="main's commit the branch was cut from")
    round: int = 0
    targets: str
    message: str = Field("", description="the commit subject line (the hypothesis, in short)")
    failure_class: str | None = None
    rationale: str = ""
    evidence: list[str] = Field(default_factory=list)
    predicted_flips: list[str] = Field(default_factory=list)
    critic: str | None = None


class GateResult(BaseModel):
    gate: str
    passed: bool
    reason: str = ""
    numbers: dict[str, float | int | str | None] = Field(default_factory=dict)


# The reason the gate records on an accepted candidate another candidate of its round beat to main: not
# merged, not refused (`review` lists it as superseded, the run summary under "Accepted, not merged").
SUPERSEDED_BY = "accepted but superseded by"


class Verdict(BaseModel):
    """The outcome of verifying one candidate commit against one anchor."""

    candidate: str = Field(description="branch name")
    commit: str = Field(description="the exact commit that was verified")
    base: str = Field(description="main's head the anchor was measured on")
    accepted: bool
    reason: str = ""
    strategy: str = "behaviour_aware"
    gates: list[GateResult] = Field(default_factory=list)
    measurements: dict[str, float | int | None] = Field(default_factory=dict)
    decided_by: Literal["gates", "human"] = "gates"
    approval: str = Field("", description="a person's approval of an accepted candidate (`approve`): 'approved by "
                          "reviewer' and the reason given, '' when none; not signed (the gates decided the verdict)")
    signature: str = Field("", description="the verifier's HMAC over the fields a merge relies on "
                           "(harness_repo/signing.py); a merge refuses a verdict without a valid one")

    def table(self) -> str:
        """A markdown table of the gates and their numbers."""
        rows = ["| gate | result | numbers | reason |", "|---|---|---|---|"]
        for g in self.gates:
            nums = ", ".join(f"{k}={_fmt(v)}" for k, v in g.numbers.items())
            rows.append(f"| {g.gate} | {'pass' if g.passed else 'FAIL'} | {nums} | {g.reason} |")
        return "\n".join(rows)


def _fmt(v: float | int | str | None) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)
