"""The roles' data: `Pattern` (analyst), `Review` (critic) and `HarnessView` (what every role reads).

The engineer's output is the shared `evoharness.harness_repo.models.Edit`.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from evoharness.harness_repo.manifest import DEFAULT_PROTECTED, DEFAULT_SURFACES, glob_match
from evoharness.harness_repo.models import FileChange

MAX_VIEW_FILE_BYTES = 200_000


class Evidence(BaseModel):
    """One place a pattern shows: a trajectory, its task, the step and the quoted text there."""

    trajectory_id: str
    task_id: str
    step: int = Field(0, ge=0)
    quote: str = ""


class Pattern(BaseModel):
    """A recurring process-failure pattern, attributed to a harness surface.

    ``id`` is stable for a given signal (``p-<signal>``), so a re-run after a crash, or a pattern
    sent back by the critic and re-attributed, keeps its id. ``count`` trajectories showed it,
    ``share`` of those analysed.
    ``task_ids`` are all tasks where it was the first signal; ``evidence`` is a sample of them.
    """

    id: str
    signal: str = Field(description="the targeted signal id, e.g. 'F3.repeated_action'")
    failure_class: str = Field(description="F2 or F3")
    evidence: list[Evidence] = Field(default_factory=list)
    count: int = Field(0, ge=0)
    share: float = Field(0.0, ge=0.0, le=1.0)
    task_ids: list[str] = Field(default_factory=list)
    root_cause: str = Field("", description="the root-cause hypothesis")
    surface: str = Field(description="the harness file (or surface glob) the fix should edit")
    fix: str = Field("", description="the playbook fix key, when the playbook analyst wrote the pattern")

    def trajectory_ids(self) -> list[str]:
        return [e.trajectory_id for e in self.evidence]


class Review(BaseModel):
    """The critic's verdict on a pattern, before the engineer writes an edit.

    ``accommodation``: the fix would merely accommodate the current model (e.g. only more steps)
    instead of repairing a harness defect. ``send_back``: return the pattern to the analyst for
    re-attribution (the graph allows it at most once per pattern; ``was_sent_back`` records that).
    """

    model_config = ConfigDict(extra="ignore")

    pattern_id: str
    approved: bool
    accommodation: bool = False
    attribution_ok: bool = True
    predicted_flips: list[str] = Field(default_factory=list)
    notes: str = ""
    send_back: bool = False
    was_sent_back: bool = False

    def line(self) -> str:
        """A one-line verdict (the ``Critic:`` trailer)."""
        word = "approved" if self.approved else "not approved"
        bits = [word, f"attribution {'ok' if self.attribution_ok else 'doubtful'}"]
        if self.accommodation:
            bits.append("accommodation")
        return "; ".join(bits) + (f": {self.notes}" if self.notes else "")


class Finding(BaseModel):
    """A harness-linter finding (`evoharness.roles.lint`): what is wrong where, the signals it would
    produce, and how often they fired in the anchor (``support``, with ``evidence`` and ``target``:
    the one of ``signals`` that fired most, the signal a repair is verified on)."""

    rule: str = Field(description="e.g. 'middleware.rewrites_results'")
    path: str = Field(description="the harness file it is in")
    detail: str
    quote: str = Field("", description="the offending text (a sentence, a hook's source line)")
    signals: list[str] = Field(default_factory=list, description="signal ids this defect would produce")
    tools: list[str] = Field(default_factory=list, description="tools involved (hidden, blocked, forbidden)")
    support: int = Field(0, description="anchor trajectories in which one of the signals fired")
    target: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    task_ids: list[str] = Field(default_factory=list)

    def line(self) -> str:
        return f"{self.rule} in {self.path}: {self.detail}" + (f" (support {self.support})" if self.support else "")


class Culprit(BaseModel):
    """Harness history as evidence: ``signal`` rose from ``before`` to ``after`` (incidence on ``task_ids``,
    same seeds) at ``commit`` on main; reverting it is the candidate repair."""

    commit: str
    subject: str = ""
    signal: str
    before: float
    after: float
    paths: list[str] = Field(default_factory=list, description="files the commit changed")
    measured: list[str] = Field(default_factory=list, description="commits measured by the bisect")
    task_ids: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    changes: list[FileChange] = Field(default_factory=list, description="the revert on top of main's head")

    def line(self) -> str:
        return (f"{self.signal} rose {self.before:.2f} -> {self.after:.2f} at {self.commit[:10]} "
                f"({self.subject}); revert it")


class HarnessView(BaseModel):
    """A read-only view of the harness at one commit: path -> text, plus what may be edited.

    Binary files and files over 200 kB are left out of ``files``. ``surfaces`` and ``protected``
    are the manifest's globs; protected wins over surfaces. ``findings`` (the harness linter's) and
    ``culprits`` (commits on main after which a signal rose) are evidence every role may read.
    """

    model_config = ConfigDict(frozen=True)

    files: dict[str, str] = Field(default_factory=dict)
    surfaces: list[str] = Field(default_factory=lambda: list(DEFAULT_SURFACES))
    protected: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTECTED))
    commit: str | None = None
    findings: list[Finding] = Field(default_factory=list)
    culprits: list[Culprit] = Field(default_factory=list)

    def text(self, path: str, default: str = "") -> str:
        return self.files.get(path, default)

    def code_review(self, path: str | None = None) -> list[str]:
        """The static review's findings (``harness_repo.static_review``: exit/signal handlers, subprocesses,
        ``/proc``, reaching the environment's package ...) in this harness's middleware and tools, one line
        each; only ``path``'s when given. Evidence for the critic: a merge touching such code needs a human."""
        from evoharness.harness_repo.static_review import review_files

        files = self.files if path is None else {path: self.files[path]} if path in self.files else {}
        return [str(f) for f in review_files(files)]

    def is_protected(self, path: str) -> bool:
        return any(glob_match(g, path) for g in self.protected)

    def editable(self, path: str) -> bool:
        return any(glob_match(g, path) for g in self.surfaces) and not self.is_protected(path)

    def editable_files(self) -> list[str]:
        return sorted(p for p in self.files if self.editable(p))

    def policies(self) -> dict[str, Any]:
        """``policies.yaml`` parsed ({} when absent, unparseable or not a mapping)."""
        try:
            data = yaml.safe_load(self.text("policies.yaml")) if self.text("policies.yaml").strip() else None
        except yaml.YAMLError:
            return {}
        return data if isinstance(data, dict) else {}

    @classmethod
    def from_repo(cls, repo: Any, commit: str | None = None) -> HarnessView:
        """The view of a `HarnessRepo` at ``commit`` (default: main's head)."""
        sha = commit or repo.main_head()
        files: dict[str, str] = {}
        for obj in repo.repo.commit(sha).tree.traverse():
            if obj.type != "blob" or obj.size > MAX_VIEW_FILE_BYTES:
                continue
            try:
                files[obj.path] = obj.data_stream.read().decode("utf-8")
            except UnicodeDecodeError:
                continue
        m = repo.manifest
        return cls(files=files, surfaces=list(m.surfaces), protected=list(m.protected), commit=sha)

    @classmethod
    def from_files(cls, files: dict[str, str], **kw: Any) -> HarnessView:
        return cls(files=dict(files), **kw)
