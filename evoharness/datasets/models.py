"""Data of the datasets area: queue items, export requests and what an export wrote."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, PrivateAttr, field_validator
from pydantic_core import PydanticCustomError

from evoharness.diagnosis.models import LABEL_SCHEMA_VERSION, FailureClass, LabelHead, _SignalHead
from evoharness.traces.models import Split, Trajectory

from .export_formats import EXPORT_FORMATS


class QueueItem(BaseModel):
    """One content failure waiting for weight training, with its provenance."""

    trajectory_id: str
    task_id: str
    split: Split = Split.unknown
    failure_class: FailureClass
    first_signal: str | None = Field(None, description="first signal id, e.g. F1.unbacked_claim")
    harness_commit: str | None = None
    model: str | None = None
    run_id: str | None = None
    round: int | None = None
    score: float | None = None
    trajectory: Trajectory
    enqueued_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    trajectory_sha256: str | None = Field(None, description="SHA-256 of the trajectory's JSON as enqueued")
    labeller_fingerprint: str | None = Field(None, description="the labeller that gave the class (None: unknown)")
    _body: str | None = PrivateAttr(None)  # the trajectory's JSON as stored (``TrainingQueue.items``), to check

    def label_head(self) -> LabelHead:
        """The class it was enqueued with, with what made it, as ``export.reusable`` checks a label."""
        return LabelHead.model_construct(
            schema_version=LABEL_SCHEMA_VERSION, trajectory_id=self.trajectory_id,
            failure_class=self.failure_class.value,
            first_signal=None if self.first_signal is None else _SignalHead.model_construct(id=self.first_signal),
            trajectory_sha256=self.trajectory_sha256, labeller_fingerprint=self.labeller_fingerprint)

    def body(self) -> bytes | None:
        """The trajectory's JSON as the queue holds it (None: the item came from no queue row)."""
        return None if self._body is None else self._body.encode()


# The names of `export_formats.EXPORT_FORMATS`, as an enum for pydantic fields and typer choices.
ExportFormat = StrEnum("ExportFormat", [(n, n) for n in EXPORT_FORMATS.names()])  # type: ignore[misc]


class SourceKind(StrEnum):
    healthy = "healthy"  # trajectories from a file that the labeller calls Healthy
    queue = "queue"  # content failures from the training queue
    all = "all"  # every trajectory from the file, plus the queue (deduplicated by id)


def _utf8_task(task: str) -> str:
    """A task id an export may be asked for: one UTF-8 can hold. Half a UTF-16 surrogate pair (``--task $'\\xff'``,
    which Python reads as ``'\\udcff'``; ``"\\udc80"`` in a JSON body) was a traceback as the manifest was written
    (a 500 from the service)."""
    if re.search("[\ud800-\udfff]", task):
        raise PydanticCustomError("task_id_not_utf8", f"{task!r} holds half a UTF-16 surrogate pair, which no task id "
                                  "in UTF-8 can hold")
    return task


TaskId = Annotated[str, AfterValidator(_utf8_task)]


class ExportFilters(BaseModel):
    """Which trajectories an export admits. Held-out tasks are never admitted, whatever the filters."""

    min_score: float | None = Field(None, ge=0.0, le=1.0, description="drop unscored and lower-scored")

    @field_validator("min_score", mode="before")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        """NaN or infinity is no score to compare with: 'less than or equal to 1 (got nan)' said NaN was over 1."""
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isfinite(v):
            raise PydanticCustomError("finite_number", "Input should be a finite number from 0 to 1")
        return v
    max_per_task: int | None = Field(None, ge=1, description="at most this many records per task")
    splits: list[Split] | None = Field(None, description="admit only these splits (never heldout)")
    tasks: list[TaskId] | None = Field(None, description="admit only these task ids")
    classes: list[FailureClass] | None = Field(None, description="admit only these failure classes")
    skip_text_with_calls: bool = Field(False, description="skip a record with an assistant reply that holds text and "
                                       "tool calls (for chat templates that cannot read one: docs/datasets.md)")
    max_tokens: int | None = Field(None, ge=1, description="skip a record longer than this many tokens (the "
                                   "trainer's max_seq_length), whole: a record is never cut")


class RenderedPrompt(BaseModel):
    """The system prompt an export renders its records under."""

    under: str = Field(description="seed | evolved | explicit rev | trajectory (own system message)")
    repo: str | None = None
    rev: str | None = None
    commit: str | None = None
    template: str | None = None
    lessons: str = ""
    policies: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class RequestNames:
    """How the caller of an export spells the parts of its request, for the errors that name one: the CLI's options
    (``CLI_NAMES``) or the service's JSON fields (``SERVICE_NAMES``). An HTTP client told "--task" or "--out" was
    told of options it never sent."""

    tasks: str = "--task"
    split: str = "--split"
    source: str = "--source"
    val_fraction: str = "--val-fraction"
    out: str = "--out"
    format: str = "--format"
    elsewhere: str = "export into a new or empty directory"  # what to do about an --out that holds other files


CLI_NAMES = RequestNames()
SERVICE_NAMES = RequestNames(tasks="tasks", split="split", source="source", val_fraction="val_fraction", out="name",
                             format="format", elsewhere="export under another name")


class ValidationSplit(BaseModel):
    """A train/validation split by task (``--val-fraction``): no task has records in both."""

    fraction: float = Field(description="the fraction of the sources' tasks asked for validation")
    seed: int = Field(description="the split seed: which tasks, for the same task set")
    tasks: list[str] = Field(description="the validation tasks (sorted)")
    tasks_considered: int = Field(description="the tasks the split chose from: those with a record to write (held-out "
                                              "tasks never)")
    files: dict[str, str] = Field(description="split -> its data file")
    records: dict[str, int] = Field(default_factory=dict, description="split -> records written")
    tasks_written: dict[str, int] = Field(default_factory=dict, description="split -> tasks with a record written")
    linked_tasks: list[list[str]] = Field(default_factory=list, description=(
        "groups of tasks kept on one side because a run of each is one task with a run of another task id of its "
        "group: the same conversation (system message and user turns) or simulated-user instruction (TaskLinks)"))


class TokenLengths(BaseModel):
    """How long the records written are in tokens (``datasets.tokens``), per split."""

    method: str = Field(description="how they were counted: a tokenizer's chat template, or the approximation")
    exact: bool = Field(description="counted with a tokenizer (--tokenizer), not approximated")
    max_tokens: int | None = Field(None, description="--max-tokens: longer records were skipped as over_max_tokens")
    splits: dict[str, dict[str, float | int]] = Field(default_factory=dict, description=(
        "split (train, validation) -> records, min, median, p95, max, mean, total (and over_max_tokens: records "
        "written over max_tokens, which only a placebo's permuted turns can make)"))
    unmeasured: dict[str, int] = Field(default_factory=dict, description="split -> placebo records the chat "
                                       "template cannot render (not in the lengths)")
    template_error: str | None = Field(None, description="the first record's chat template error (the records "
                                       "skipped as chat_template_error)")


class ExportSummary(BaseModel):
    """What an export wrote; the dataset card and manifest.json are made from it."""

    format: ExportFormat
    source: SourceKind
    placebo: bool = False
    placebo_seed: int | None = None
    placebo_units_kept_in_place: int = 0
    filters: ExportFilters
    prompt: RenderedPrompt
    files: list[str] = Field(default_factory=list)
    records: int = 0
    tasks: dict[str, int] = Field(default_factory=dict)
    classes: dict[str, int] = Field(default_factory=dict)
    splits: dict[str, int] = Field(default_factory=dict)
    harness_commits: dict[str, int] = Field(default_factory=dict)
    models: dict[str, int] = Field(default_factory=dict)
    envs: dict[str, int] = Field(default_factory=dict)
    skipped: dict[str, int] = Field(default_factory=dict, description="reason -> count")
    heldout_tasks_excluded: int = Field(0, description="trajectories dropped because their task is held out")
    heldout_linked_tasks: list[str] = Field(default_factory=list, description=(
        "tasks held out only because a run of theirs is a held-out task's under another id: the same conversation "
        "(system message and user turns) or the same simulated-user instruction (datasets.export.TaskLinks)"))
    prompt_fallbacks: int = Field(0, description="records whose prompt fell back to raw text + lessons")
    prompt_limit_hits: int = Field(0, description="renders of the harness template that hit the render "
                                   "process's memory, CPU or wall limit (each such record fell back)")
    prompt_render_unjailed: str | None = Field(None, description="why the template render process ran "
                                               "without its bubblewrap jail (memory, CPU and wall limits only, "
                                               "as the service's user); null when it ran jailed or not at all")
    sharegpt_text_with_calls: int = Field(0, description="sharegpt: records with an assistant turn of text and tool "
                                          "calls, written TEXT<tool_call>CALLS</tool_call> (until 2026-12-06 "
                                          "{content, calls}, which LLaMA-Factory cannot read)")
    sharegpt_calls_unreadable: int = Field(0, description="sharegpt: records with a function_call turn that "
                                           "LLaMA-Factory cannot read back as written (its text holds <tool_call> "
                                           "or its calls </tool_call>)")
    env_tools_past_limit: int = Field(0, description="records whose environment (meta.env) was not built for its "
                                      "tool declarations, the export having built its limit of distinct envs "
                                      "(datasets.env_tools.MAX_ENVS): their undeclared tools are inferred "
                                      "from the calls")
    validation: ValidationSplit | None = Field(None, description="the train/validation split by task, if asked")
    token_lengths: TokenLengths | None = Field(None, description="the records' lengths in tokens, per split")
    duplicate_records: int = Field(0, description="records identical to an earlier one of the export (messages and "
                                   "tools, system message included): skipped as duplicate_record unless kept")
    duplicates_kept: bool = Field(False, description="duplicate records were written (--keep-duplicates)")
    labels_reused: int = Field(0, description="records written whose class came from --labels (or the label the "
                                             "service's ingest store keeps with the run, the labels.jsonl a run "
                                             "keeps beside its trajectories.jsonl), not relabelled "
                                             "(trajectories the filters or held-out tasks drop are not counted)")
    labels_relabelled: dict[str, int] = Field(default_factory=dict, description=(
        "records written whose --labels line (or stored label) was not reused, so their trajectory was labelled "
        "again, by reason: no_fingerprint (an older `label` or ingest store, or the LLM judge's verdict), "
        "other_labeller (another evoharness or other diagnosis settings), no_digest (labelled from a file of "
        "another format), trajectory_changed (the line is not the one labelled), no_line (a trajectory source "
        "that is not a file), no_label (a source that keeps labels has none for it: a run's labels.jsonl lacks "
        "its line), not_a_class (a store's class column holds no failure class)"))
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
