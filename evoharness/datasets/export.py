"""Export trajectories as a training set: select, render, (placebo), write, card.

Sources are *re-iterable* trajectory sources (a ``JsonlSource``, a ``TrainingQueue``, a list):
iterating one twice yields the same trajectories. A task is held out if any trajectory of it says
``split = heldout``, if the config lists it, or if a run of it is one task with a held-out task's run under
another id (``TaskLinks``: the same conversation or simulated-user instruction); they are learnt while writing, and
when one turns out held out after a trajectory of it went by, the export starts again with every
held-out task learnt in a first pass (``export_dataset``). Held-out tasks are never written, whatever
the filters; a request that names one, asks for the heldout split, or admits nothing but held-out
trajectories is an ``InputError`` and leaves no data files behind.

One row per trajectory id: a file holding an id twice (``import`` writes two runs of the same id, and warns)
gives the first trajectory of that id and skips the later ones (``skipped["duplicate_id"]``), whatever the
source and filters, as the training queue and the service's ingest store keep the first of an id.

One row per record: a record identical to an earlier one (``formats.fingerprint`` of the record, after rendering)
is skipped as ``duplicate_record`` unless ``keep_duplicates``; ``duplicate_records`` counts them either way.

Memory is bounded: records stream from source to writer; only the held-out task ids, the ids of the
tasks seen, per-task counts, the file's trajectory ids (to keep one of each, and to skip a queue item the
file gave), one fingerprint (an int) per record written, one content key (an int) per distinct conversation and
simulated-user instruction read (``TaskLinks``), and for a placebo one window of records
(``datasets.placebo_window``) are held.

Labelling is the larger part of exporting a file's unhealthy trajectories. ``labels`` (a file
``evoharness label`` wrote for the same trajectory file) gives their class and first signal
instead: it is read in step with the trajectories, one line at a time (``label`` writes one line
per trajectory, in order); a labels file that does not line up with the trajectory file, line for
line, is an ``InputError`` (see ``LabelFile``). A line is reused only when it provably belongs to the
trajectory and to the export's labeller: its ``trajectory_sha256`` is the digest of the very line the
trajectory was read from, and its ``labeller_fingerprint`` is the export's rule labeller's (this code, these
diagnosis settings); any other line's trajectory is labelled again, counted by reason
(``ExportSummary.labels_relabelled``). A source that keeps a label with each trajectory (the service's ingest store:
``KeptLine.label_of``, its body's digest and the labeller's fingerprint in the row) is read the same way, with no
``labels`` file: the stored label is reused under the same checks, and counted the same.
"""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from hashlib import blake2b
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from evoharness.cli_support import shell_words
from evoharness.diagnosis.models import LABEL_SCHEMA_VERSION, FailureClass, LabelHead
from evoharness.errors import HeldOutRequested, InputError, not_a_file_reason
from evoharness.logging import get_logger
from evoharness.traces.models import Split, Trajectory
from evoharness.traces.store import LABELS_NAME, KeptLine, keeping_lines, line_digest, naming_output

from . import placebo as placebo_mod
from .card import write_card
from .chat import RecordSkipped, record_and_arguments, text_with_calls, with_system
from .env_tools import EnvTools
from .export_formats import EXPORT_FORMATS, open_writer
from .formats import WRITE_BUFFER, fingerprint, line_key, record_line
from .llamafactory import foreign_datasets, write_dataset_info
from .models import (
    CLI_NAMES,
    ExportFilters,
    ExportFormat,
    ExportSummary,
    RenderedPrompt,
    RequestNames,
    SourceKind,
    TokenLengths,
    ValidationSplit,
)
from .prompts import SystemRenderer
from .tokens import ApproxTokens, Lengths, TemplateFailed, TokenCounter
from .validate import openai_errors

if TYPE_CHECKING:
    from evoharness.diagnosis.config import DiagnosisConfig
    from evoharness.diagnosis.labeller import Labeller

log = get_logger(__name__)


def _other_format(path: Path) -> str | None:
    """What `evoharness import` reads ``path`` as, when it is not canonical JSON lines: "a trace file in the otlp
    format", "a JSON document of canonical trajectories" (a JSON list `import` and `diagnose` read; None: canonical
    lines, or nothing `import` reads). JSON lines or a document by the file's content, as every command tells them
    (``layout.json_lines``): OTLP lines in spans.otel were 'not a canonical trajectory: id: Field required'."""
    from evoharness.traces.importers import detect_format
    from evoharness.traces.layout import json_lines

    try:
        fmt = detect_format(path)
        lines = json_lines(path)
    except (InputError, OSError):
        return None
    if fmt != "canonical":
        return f"a trace file in the {fmt} format"
    return None if lines else "a JSON document of canonical trajectories"


class JsonlSource:
    """Trajectories from a canonical JSONL file; each iteration re-reads the file.

    A file named ``trajectories.jsonl`` with a ``labels.jsonl`` beside it (a run's trajectory store and the labels the
    run kept, ``TrajectoryStore.add``; or `import --out DIR` and `label --out DIR`) offers those labels
    (``labels_beside``): inside ``keeping_lines()`` each trajectory's label, when the file beside has one for it, is
    noted with its line (``KeptLine.label``), for the export to reuse under ``reusable``'s checks."""

    def __init__(self, path: Path | str) -> None:
        from evoharness.run_dirs import trajectory_file

        # a run or demo directory is its run's trajectories.jsonl, as `dataset export -t DIR` reads it (until
        # 2026-12-07 the API said 'is a directory, not a trajectory file' of a directory the CLI read)
        self.path = trajectory_file(Path(path), str(path))
        if not self.path.is_file():  # a directory, FIFO or device said "not found" too
            raise InputError(str(self.path), not_a_file_reason(self.path, "trajectory file"))
        beside = self.path.with_name(LABELS_NAME)
        self.labels_beside = beside if self.path.name == "trajectories.jsonl" and beside.is_file() else None

    def __iter__(self) -> Iterator[Trajectory]:
        from evoharness.traces.store import current_kept, read_trajectories

        kept = current_kept()
        beside = LabelsBeside(self.labels_beside) if kept is not None and self.labels_beside is not None else None
        first = True
        try:
            for t in read_trajectories(self.path):
                first = False
                if beside is not None:  # read_trajectories noted the line; the label beside goes with it
                    kept.label, kept.offers = beside.of(t.id), True
                yield t
        except InputError:
            if first and (fmt := _other_format(self.path)):
                raise InputError(str(self.path), f"{fmt}, not canonical trajectory JSON "
                                 "lines (what the dataset commands read): convert it first, `evoharness "
                                 f"{shell_words('import', self.path, '--out', 'FILE.jsonl')}`") from None
            raise

    def heldout_task_ids(self) -> set[str]:
        """Tasks some line marks held out, reading only ``task_id`` and ``split`` of each line
        (a line that is not a trajectory is reported by the full pass that follows)."""
        return self.tasks_and_heldout()[1]

    def tasks_and_heldout(self) -> tuple[set[str], set[str]]:
        """(every task of the file, the tasks some line marks held out), reading ``task_id`` and ``split`` only."""
        from evoharness.traces.store import jsonl_lines

        tasks, held = set(), set()
        for _, raw in jsonl_lines(self.path):
            try:
                head = _TaskSplit.model_validate_json(raw)
            except ValidationError:
                continue
            tasks.add(head.task_id)
            if head.split == Split.heldout:
                held.add(head.task_id)
        return tasks, held


_CLASS = TypeAdapter(FailureClass)


class LabelFile:
    """The labels ``evoharness label`` wrote for a trajectory file, read in step with it.

    ``take(id)`` returns the head of the next label, which must be that trajectory's:
    ``label`` writes one line per trajectory, in the file's order, so any other line means the labels were
    written for another file (or an edited one) and is an ``InputError`` naming the line, as are a line
    that is not a label, a line without this evoharness's ``schema_version`` (a stale or foreign file),
    and a labels file shorter or longer than the trajectory file (``finish()`` checks the end). Nothing is
    guessed: a class is never read from a line that might belong to another trajectory. Whether a line's
    class may be used for its trajectory is ``reusable``'s to say (same id is not enough: the trajectory may
    have been edited, the labeller changed).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.is_file():  # a directory, FIFO or device said "not found" too
            raise InputError(str(self.path), not_a_file_reason(self.path, "labels file"))
        from evoharness.traces.store import jsonl_lines

        self._lines: Iterator[tuple[int, bytes]] = jsonl_lines(self.path)  # opened on the first read
        self._lineno = 0

    def take(self, trajectory_id: str) -> LabelHead:
        head = self._next()
        if head is None:
            raise self._mismatch(f"ends at line {self._lineno}, before trajectory {trajectory_id!r}")
        if head.trajectory_id != trajectory_id:
            raise self._mismatch(f"line {self._lineno} labels trajectory {head.trajectory_id!r} where the "
                                 f"trajectory file has {trajectory_id!r}")
        return head

    def finish(self) -> None:
        """The trajectory file is done: the labels file must be too."""
        if (head := self._next()) is not None:
            raise self._mismatch(f"line {self._lineno} labels trajectory {head.trajectory_id!r}, past the "
                                 "trajectory file's end")

    def _mismatch(self, what: str) -> InputError:
        return InputError(str(self.path), f"{what}: these labels were not written for this trajectory file "
                                          "(run `evoharness label FILE --out LABELS` on it)")

    def _next(self) -> LabelHead | None:
        for lineno, raw in self._lines:
            self._lineno = lineno
            try:
                head = LabelHead.read(raw)
                _CLASS.validate_python(head.failure_class)  # the classes `label` writes, as written
                head.signal("id")
            except ValidationError as e:
                raise InputError(str(self.path), "not a label (written by `evoharness label`): failure_class: "
                                                 f"{e.errors()[0]['msg']}", where=f"line {lineno}") from None
            except ValueError as e:
                raise InputError(str(self.path), f"not a label (written by `evoharness label`): {e}",
                                 where=f"line {lineno}") from None
            if head.schema_version != LABEL_SCHEMA_VERSION:
                found = ("has no schema_version (written by an older `evoharness label`, or not a labels file)"
                         if head.schema_version is None else f"has schema_version {head.schema_version}, this "
                         f"evoharness reads {LABEL_SCHEMA_VERSION}")
                raise InputError(str(self.path), f"{found}: run `evoharness label FILE --out LABELS` again",
                                 where=f"line {lineno}")
            return head
        return None


class LabelsBeside:
    """The labels file beside a trajectory file (``JsonlSource.labels_beside``), read in step with it and forgiving:
    its lines are taken as an ordered subsequence of the trajectories (a run appends a batch's label lines after the
    batch, so a crash between the two leaves trajectories without a label, never the reverse). ``of(id)`` is the next
    line's head when that line labels ``id``, else None and the line waits for a later trajectory. A line that is no
    label of this layout is passed over; a file that cannot be read gives no labels. Nothing here is an error: a
    trajectory without its label is labelled (``no_label``), and a label is used only when ``reusable`` says it is the
    trajectory's and the export labeller's."""

    def __init__(self, path: Path) -> None:
        from evoharness.traces.store import jsonl_lines

        self.path = path
        self._lines: Iterator[tuple[int, bytes]] | None = jsonl_lines(path)  # opened on the first read
        self._head: LabelHead | None = None

    def of(self, trajectory_id: str) -> LabelHead | None:
        head = self._peek()
        if head is None or head.trajectory_id != trajectory_id:
            return None
        self._head = None
        return head

    def _peek(self) -> LabelHead | None:
        while self._head is None and self._lines is not None:
            try:
                _, raw = next(self._lines)
            except StopIteration:
                self._lines = None
                break
            except (InputError, OSError):  # unreadable: no labels from here on (each run is labelled)
                self._lines = None
                break
            try:
                head = LabelHead.read(raw)
                _CLASS.validate_python(head.failure_class)
                head.signal("id")
            except (ValidationError, ValueError):
                continue
            if head.schema_version == LABEL_SCHEMA_VERSION:
                self._head = head
        return self._head


def reusable(head: LabelHead, labeller: str | None, line: bytes | None) -> str | None:
    """None when the label ``head`` provably belongs to the trajectory read from ``line`` and to the labeller whose
    fingerprint is ``labeller``; else why its trajectory is labelled again (a key of
    ``ExportSummary.labels_relabelled``). The fingerprint is compared first (a string compare); the line is hashed
    only for a label of this labeller."""
    if head.labeller_fingerprint is None:
        return "no_fingerprint"  # an older `label`, or the LLM judge's own verdict
    if head.labeller_fingerprint != labeller:
        return "other_labeller"  # another evoharness or other diagnosis settings
    if head.trajectory_sha256 is None:
        return "no_digest"  # labelled from a file of another format: no canonical line to compare
    if line is None:
        return "no_line"  # the trajectory came from no file line (a source that is a list)
    if line_digest(line) != head.trajectory_sha256:
        return "trajectory_changed"  # the line is not the one labelled (edited since, same id)
    if head.failure_class not in _CLASSES:
        return "not_a_class"  # a store's class column edited (its digest covers the body only): the export wrote it
    return None


_CLASSES = frozenset(c.value for c in FailureClass)


class _TaskSplit(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task_id: str
    split: str = Split.unknown.value


@dataclass
class Candidate:
    """A trajectory on its way into an export, with what is known about it. A failed run of the file (no
    ``--labels``) comes with ``labeller`` set and no class yet: ``classify()`` labels it when its class is first
    needed (a ``--class`` filter, or its record is to be written), so a run the export drops for its split,
    task, score or count (a held-out task's, say) is never labelled."""

    traj: Trajectory
    failure_class: str | None
    first_signal: str | None
    origin: str  # "file" | "queue"
    run_id: str | None = None
    round: int | None = None
    from_labels: bool = False  # its class was read from ``--labels``, not labelled here
    relabelled: str | None = None  # its ``--labels`` line was not reusable (``reusable``'s reason): labelled here
    labeller: _LabellerWhenNeeded | None = None  # set while the class is still to be found
    duplicate: bool = False  # a later trajectory of an id the file already gave: skipped, never written

    def classify(self) -> Candidate:
        """Label the trajectory if its class is still to be found (what ``label`` gives as class and first
        signal); returns the candidate."""
        if self.labeller is not None:
            found, signal = self.labeller.first_signal(self.traj)
            self.failure_class, self.first_signal = found.value, signal.id if signal else None
            self.labeller = None
        return self


class _LabellerWhenNeeded:
    """The export's rule labeller, ``Labeller(cfg)``, made when a run is first labelled (``first_signal``): its module
    imports every detector (~0.16 s of CPU in a fresh process, ~240 regular expressions compiled), which an export that
    labels nothing never used -- `dataset export`'s default ``--source healthy``, or a run's or a store's export whose
    failed runs all come with a reusable label. ``cfg`` and ``fingerprint`` are the labeller's without it (its settings,
    ``labeller_fingerprint`` of them: what ``Labeller.fingerprint`` gives)."""

    def __init__(self, cfg: DiagnosisConfig | None) -> None:
        from evoharness.diagnosis.config import DiagnosisConfig

        self.cfg = cfg or DiagnosisConfig()
        self._labeller: Labeller | None = None

    @property
    def fingerprint(self) -> str:
        from evoharness.diagnosis.fingerprint import labeller_fingerprint

        return labeller_fingerprint(self.cfg)

    def first_signal(self, traj: Trajectory):
        if self._labeller is None:
            from evoharness.diagnosis.labeller import Labeller

            self._labeller = Labeller(self.cfg)
        return self._labeller.first_signal(traj)


def candidates(source: SourceKind, trajectories: Iterable[Trajectory] | None, queue, diagnosis_cfg=None,
               labels: LabelFile | None = None, kept: KeptLine | None = None,
               see: Callable[[Trajectory], None] | None = None) -> Iterator[Candidate]:
    """The stream an export draws from (file first, then queue).

    The file's first trajectory of an id is the one exported: a later one of the same id comes as a
    ``duplicate`` candidate (before its class is looked at, so which run of an id is exported does not
    depend on the source or the filters), and a queue item whose trajectory the file gave is skipped. With ``labels``,
    an unhealthy trajectory's class is read from its line, not labelled again (``from_labels``), when the line is
    ``reusable`` for it (``kept``: the lines the trajectories were read from); so is the label a store keeps with each
    trajectory (``kept.label_of``: the service's ingest store, its body in place of the line); otherwise it is
    labelled when its class is needed (``Candidate.classify``), and ``--source healthy`` labels nothing: a run below
    the threshold is dropped unlabelled. ``see`` is called on every run drawn, file and queue, before anything else
    (``_learning``: the held-out tasks learnt as the export goes).
    """
    seen: set[str] = set()
    if source in (SourceKind.healthy, SourceKind.all):
        if trajectories is None:
            raise InputError("--trajectories", f"--source {source.value} needs a trajectory file")
        labeller = _LabellerWhenNeeded(diagnosis_cfg)
        threshold = labeller.cfg.healthy_threshold
        own = None  # which labeller this is (its fingerprint): made at the first label to check, so never cold
        for t in trajectories:
            if see is not None:
                see(t)
            # the label of its line in --labels (a mismatch is an error), or the one its store keeps with it
            known = labels.take(t.id) if labels is not None else kept.label_of(t) if kept is not None else None
            if t.id in seen:
                yield Candidate(t, None, None, "file", duplicate=True)
                continue
            seen.add(t.id)
            from_labels, pending, relabelled = False, None, None
            if t.score is not None and t.score >= threshold:
                # the labeller's first rule: healthy whatever fired, no first signal; an export
                # needs only the class, so the detectors are not run
                cls, first = FailureClass.healthy.value, None
            elif known is not None and (relabelled := reusable(
                    known, own or (own := labeller.fingerprint),
                    kept.line_of(t) if kept is not None else None)) is None:
                cls, first, from_labels = known.failure_class, known.signal("id"), True
            elif source == SourceKind.healthy:
                # below the threshold the labeller never says Healthy (its first rule is the only one that does;
                # every other class is a failure signal's or a fallback's): labelling the run only to drop it
                # was most of the cost of a healthy export of a file with failures
                continue
            else:
                cls = first = None
                pending = labeller  # labelled when its class is needed (``Candidate.classify``)
                if known is None and kept is not None and kept.offers:
                    relabelled = "no_label"  # a source that keeps labels has none for it (a run's crash, say)
            if source == SourceKind.healthy and cls != FailureClass.healthy:
                continue
            yield Candidate(t, cls, first, "file", from_labels=from_labels, labeller=pending, relabelled=relabelled)
        if labels is not None:
            labels.finish()
    if source == SourceKind.queue and queue is None:
        raise InputError("--source", "--source queue needs the training queue")
    if source in (SourceKind.queue, SourceKind.all) and queue is not None:
        labeller = _LabellerWhenNeeded(diagnosis_cfg)
        own = None
        for item in queue.items():
            if see is not None:
                see(item.trajectory)
            if item.trajectory_id in seen:
                continue
            # the class it was enqueued with, when that is provably this labeller's label of this body (the queue
            # keeps the labeller's fingerprint and the body's digest); otherwise labelled again when needed, as a
            # file's failed run is: an upgrade or other diagnosis settings since, or an item edited in the database
            why = reusable(item.label_head(), own or (own := labeller.fingerprint), item.body())
            if why is None:
                yield Candidate(item.trajectory, item.failure_class.value, item.first_signal, "queue",
                                item.run_id, item.round, from_labels=True)
            else:
                yield Candidate(item.trajectory, None, None, "queue", item.run_id, item.round, relabelled=why,
                                labeller=labeller)


def heldout_tasks(sources: Iterable[Iterable[Trajectory] | None], declared: Iterable[str] = ()) -> set[str]:
    """Every task that a declaration or any trajectory of the sources marks as held out."""
    out = set(declared)
    for src in sources:
        if src is None:
            continue
        if hasattr(src, "heldout_task_ids"):  # the queue answers with one query
            out.update(src.heldout_task_ids())
            continue
        if iter(src) is src:
            raise InputError("export", "a trajectory source must be re-iterable (JsonlSource(path), the "
                             "queue or a list): held-out tasks are learnt in a first pass")
        out.update(t.task_id for t in src if t.split == Split.heldout)
    return out


def validation_tasks(tasks: Iterable[str], fraction: float, seed: int = 0, names: RequestNames = CLI_NAMES,
                     linked: Iterable[tuple[str, str]] = ()) -> set[str]:
    """The tasks of a validation split: round(fraction x groups), at least one group and at least one left to train
    on, taken in the order of a keyed hash of (seed, the group's first task id). A group is one task, or the tasks
    ``linked`` joins (pairs of task ids whose runs are one task under two ids: ``TaskLinks``), which go
    to one side together. The same tasks, links and seed give the same split whatever the order of the records; a
    task keeps its side while the task set grows, unless the count moves past it. Without links this is the split by
    task of before links (2026-12-06). ``names``: how the caller spells the request's parts, for the error."""
    groups = _groups(set(tasks), linked)
    ranked = sorted(groups, key=lambda group: (blake2b(group[0].encode(), key=str(seed).encode()[:64],
                                                       digest_size=8).digest(), group[0]))
    if len(ranked) < 2:
        raise InputError(names.val_fraction, f"a split by task needs at least 2 tasks; the sources hold "
                         f"{sum(map(len, ranked))} with a record to export (after {names.source} and the filters; "
                         "held-out tasks never are)" + (f", in {len(ranked)} group of tasks whose runs are one "
                                                        "conversation" if len(groups) < len(set(tasks)) else ""))
    k = min(len(ranked) - 1, max(1, round(fraction * len(ranked))))
    return {task for group in ranked[:k] for task in group}


def _groups(tasks: set[str], linked: Iterable[tuple[str, str]]) -> list[tuple[str, ...]]:
    """``tasks`` in groups: the connected parts of the ``linked`` pairs, each sorted; a task linked to none alone."""
    parent = {task: task for task in tasks}

    def root(task: str) -> str:
        while parent[task] != task:
            parent[task] = parent[parent[task]]
            task = parent[task]
        return task

    for a, b in linked:
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    members: dict[str, list[str]] = {}
    for task in tasks:
        members.setdefault(root(task), []).append(task)
    return [tuple(sorted(group)) for group in members.values()]


def content_keys(t: Trajectory) -> tuple[int, ...]:
    """What makes two runs one task whatever their task ids (``TaskLinks``): the run's conversation -- its own system
    message and user turns, in order, the task as asked and the replies it got -- and, where the trace holds it, the
    simulated user's instruction (``meta.user_instruction``: tau-bench's ``info.task.instruction``, tau2's
    ``user_scenario.instructions``; whitespace collapsed), which stays the same when the simulated user words the task
    anew each run. Each is one int (Python's keyed hash; two different texts meet ~once in 2**64 pairs). A run with no
    system or user text has no conversation key: every such run would be one task."""
    # a list, the common str content taken as it is (no call): the same texts as ``_text`` of each
    given = [c if type(c := m.get("content")) is str else _text(c) for m in t.messages
             if m.get("role") in ("system", "user")]
    keys = (hash(("conversation", *given)),) if any(x.strip() for x in given) else ()
    instruction = t.meta.get("user_instruction") if isinstance(t.meta, dict) else None
    if isinstance(instruction, str) and (words := " ".join(instruction.split())):
        keys += (hash(("instruction", words)),)
    return keys


class TaskLinks:
    """Tasks that are one task under two ids, found by content (``content_keys``): the same run imported or queued
    under another task id, one task named by two sources (a file's ``7``, a rollout's ``tau2:airline/7``), two runs
    that differ only in the assistant's turns, or two runs of one simulated-user instruction. Linked tasks form groups
    (the links chain: a-b and b-c make one group), and

    - a group is held out whole when any of its tasks is (``held``: a run marked ``split = heldout``, or a task the
      config or the queue holds out): a held-out task's run under another id is never exported;
    - a split by task puts each group on one side (``groups``): a conversation trained on is never validated on.

    ``add(t)`` returns the tasks that run put into ``held`` (``_learning`` restarts the export when one of them had a
    run go by already). One int per distinct key and a few references per task are held."""

    def __init__(self, held: set[str] | None = None) -> None:
        self.held = held if held is not None else set()
        self._given = set(self.held)  # held out before any run was read (the config, the queue)
        self.marked: set[str] = set()  # tasks with a run marked held out
        self._owner: dict[int, str] = {}  # content key -> the first task with a run of it
        self._parent: dict[str, str] = {}
        self._members: dict[str, list[str]] = {}  # a group's root -> its tasks
        self._held_roots: set[str] = set()

    def add(self, t: Trajectory) -> list[str]:
        task = t.task_id
        if task not in self._parent:
            self._parent[task], self._members[task] = task, [task]
            if task in self.held:
                self._held_roots.add(task)
        newly = []
        if t.split == Split.heldout:
            self.marked.add(task)
            newly += self._hold(self._root(task))
        for key in content_keys(t):
            owner = self._owner.setdefault(key, task)
            if owner != task:
                newly += self._union(task, owner)
        return newly

    def groups(self, tasks: Iterable[str]) -> list[tuple[str, ...]]:
        """``tasks`` in their groups (each sorted), a task linked to none of them alone."""
        members: dict[str, list[str]] = {}
        for task in tasks:
            members.setdefault(self._root(task) if task in self._parent else task, []).append(task)
        return [tuple(sorted(group)) for group in members.values()]

    def pairs(self, tasks: Iterable[str]) -> list[tuple[str, str]]:
        """Links that join ``tasks`` into their groups (``validation_tasks``'s ``linked``)."""
        return [(g[0], x) for g in self.groups(tasks) for x in g[1:]]

    def linked_held(self) -> list[str]:
        """Tasks held out only through a link to a held-out task's run (no run of theirs marked, not given)."""
        return sorted(t for t in self.held if t in self._parent and t not in self.marked and t not in self._given)

    def _root(self, task: str) -> str:
        parent = self._parent
        while parent[task] != task:
            parent[task] = parent[parent[task]]
            task = parent[task]
        return task

    def _hold(self, root: str) -> list[str]:
        if root in self._held_roots:
            return []
        self._held_roots.add(root)
        newly = [m for m in self._members[root] if m not in self.held]
        self.held.update(newly)
        return newly

    def _union(self, a: str, b: str) -> list[str]:
        ra, rb = self._root(a), self._root(b)
        if ra == rb:
            return []
        if len(self._members[ra]) < len(self._members[rb]):
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._members[ra] += self._members.pop(rb)
        held = ra in self._held_roots or rb in self._held_roots
        self._held_roots.discard(ra)
        self._held_roots.discard(rb)
        return self._hold(ra) if held else []


def _text(content) -> str:
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)


def _meta(c: Candidate, placebo: bool) -> dict:
    t = c.traj
    env = t.meta.get("env") or t.meta.get("source_format") if isinstance(t.meta, dict) else None
    return {"id": t.id, "task_id": t.task_id, "split": t.split.value, "failure_class": c.failure_class,
            "first_signal": c.first_signal, "harness_commit": t.harness_commit, "model": t.model,
            "score": t.score, "source": c.origin, "run_id": c.run_id, "round": c.round,
            "env": str(env) if env is not None else None, "placebo": placebo}


def _selected(c: Candidate, f: ExportFilters) -> bool | str | None:
    """True when the filters admit ``c``; else None (not asked for) or a skip reason."""
    t = c.traj
    if f.splits and t.split not in f.splits:
        return None
    if f.tasks and t.task_id not in f.tasks:
        return None
    if f.classes and c.classify().failure_class not in {x.value for x in f.classes}:
        return None
    if f.min_score is not None and (t.score is None or t.score < f.min_score):
        return "below_min_score"
    return True


def _check_request(filters: ExportFilters, held: set[str], names: RequestNames) -> None:
    if filters.splits and Split.heldout in filters.splits:
        raise HeldOutRequested(names.split, "held-out tasks are never exported (asked for split heldout)")
    asked = sorted(set(filters.tasks or []) & held)
    if asked:
        raise HeldOutRequested(names.tasks, f"held-out tasks are never exported: {', '.join(asked[:5])}")


class _HeldOutLate(Exception):  # noqa: N818 (a signal to export_dataset, never seen by a caller)
    """A task turned out held out after trajectories of it were already taken (or it was asked for)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.task_id = task_id


def _learning(links: TaskLinks, asked: set[str]):
    """What the export's first try calls on each run it draws, file and queue (``candidates``' ``see``): the run goes
    into ``links``, which adds its task to ``links.held`` when the run is marked held out or is a held-out task's run
    under another id; a task that turns out held out after one of its runs has gone by (or that the request names)
    raises ``_HeldOutLate``: that run was treated as not held out, which the export must redo."""
    seen: set[str] = set()

    def see(t: Trajectory) -> None:
        for task in links.add(t):
            if task in seen or task in asked:
                raise _HeldOutLate(task)
        seen.add(t.task_id)

    return see


def _all_runs(trajectories: Iterable[Trajectory] | None, queue, declared: Iterable[str]) -> TaskLinks:
    """The links of every run of the file and the queue (all its items), with every held-out task: the export's
    second try, once a task turned out held out late, knows them all before it writes."""
    links = TaskLinks(heldout_tasks([queue], declared))
    for t in trajectories if trajectories is not None else ():
        links.add(t)
    for item in queue.items() if queue is not None else ():
        links.add(item.trajectory)
    return links


def export_dataset(
    out: Path,
    *,
    fmt: ExportFormat = ExportFormat.openai,
    source: SourceKind = SourceKind.healthy,
    trajectories: Iterable[Trajectory] | None = None,
    queue=None,
    filters: ExportFilters | None = None,
    prompt: RenderedPrompt | None = None,
    placebo: bool = False,
    placebo_seed: int = 0,
    placebo_window: int = 5_000,
    declared_heldout: Iterable[str] = (),
    diagnosis_cfg=None,
    labels: Path | str | None = None,
    keep_duplicates: bool = False,
    val_fraction: float | None = None,
    split_seed: int = 0,
    names: RequestNames = CLI_NAMES,
    tokens: TokenCounter | None = None,
) -> ExportSummary:
    """Write one dataset into ``out`` (data files, README.md card, manifest.json).

    ``labels``: the labels file ``evoharness label`` wrote for ``trajectories`` (see the module doc).
    ``keep_duplicates``: write a record identical to an earlier one (messages and tools, the system message
    included) instead of skipping it as ``duplicate_record``; either way ``duplicate_records`` counts them.
    ``val_fraction``: write a train and a validation split by task (``validation_tasks``, with ``split_seed``, of the
    tasks with a record to write: the first of its id, of a task not held out, kept by ``source``, admitted by the
    filters and not skipped: over ``max_tokens``, a duplicate, a record that cannot be made), in the same single
    pass: the records wait in a file of the staging directory until every task is known (``_Spill``).
    ``names``: how the caller spells the parts of its request, for the errors that name one (the CLI's options, the
    service's JSON fields). ``tokens``: what counts a record's tokens (``datasets.tokens``; default ``ApproxTokens``):
    each split's lengths go to ``summary.token_lengths``, and ``filters.max_tokens`` skips a longer record whole
    (``over_max_tokens``), before ``max_per_task`` counts it; a record the counter's chat template cannot render is
    skipped as ``chat_template_error``.

    The held-out tasks of the trajectory file are learnt in the same pass that writes: a file usually
    marks a task held out at its first trajectory (or every one), and a trajectory of a task known to be
    held out is dropped as it comes. Only when a task turns out held out after a trajectory of it went by
    (or it is one the request names) does the export start again, with every held-out task learnt first
    in a pass of its own (the records are the same either way; the second way reads the file twice)."""
    filters = filters or ExportFilters()
    _check_out(Path(out), names)
    uses_file = source in (SourceKind.healthy, SourceKind.all)
    uses_queue = source in (SourceKind.queue, SourceKind.all)
    file_src = trajectories if uses_file else None
    if file_src is not None and iter(file_src) is file_src:
        raise InputError("export", "a trajectory source must be re-iterable (JsonlSource(path), the "
                         "queue or a list): held-out tasks are learnt in a first pass")
    declared_heldout = list(declared_heldout)
    kwargs = dict(fmt=fmt, source=source, queue=queue, filters=filters, prompt=prompt, placebo=placebo,
                  placebo_seed=placebo_seed, placebo_window=placebo_window, diagnosis_cfg=diagnosis_cfg,
                  labels=labels, keep_duplicates=keep_duplicates, names=names, tokens=tokens)
    if val_fraction is not None and not 0 < val_fraction < 1:
        raise InputError(names.val_fraction, f"must lie between 0 and 1 (exclusive), got {val_fraction}")

    def split() -> ValidationSplit | None:  # its tasks are chosen once the pass has seen every task
        return None if val_fraction is None else ValidationSplit(
            fraction=val_fraction, seed=split_seed, tasks=[], tasks_considered=0, files={})

    queue_src = queue if uses_queue else None
    links = TaskLinks(heldout_tasks([queue_src], declared_heldout))
    try:
        return _export(out, trajectories=file_src, links=links, see=_learning(links, set(filters.tasks or ())),
                       split=split(), **kwargs)
    except _HeldOutLate as late:
        log.info("dataset.export_restarted", task=late.task_id,
                 why="a task turned out held out after runs of it were read")
    return _export(out, trajectories=file_src, links=_all_runs(file_src, queue_src, declared_heldout), see=None,
                   split=split(), **kwargs)


def _export(out: Path, *, fmt: ExportFormat, source: SourceKind, trajectories: Iterable[Trajectory] | None,
            queue, filters: ExportFilters, prompt: RenderedPrompt | None, placebo: bool, placebo_seed: int,
            placebo_window: int, diagnosis_cfg, labels: Path | str | None, links: TaskLinks, see,
            keep_duplicates: bool, split: ValidationSplit | None, names: RequestNames,
            tokens: TokenCounter | None) -> ExportSummary:
    """``export_dataset`` with the held-out tasks known (or, with ``_learning`` trajectories, learnt). With a ``split``
    (its tasks still to be chosen), each record made is spilled to the staging directory until the pass has seen
    every task the export takes (``validation_tasks`` of them), then read back into its split's writer, in order."""
    prompt = prompt or RenderedPrompt(under="trajectory")
    uses_file = source in (SourceKind.healthy, SourceKind.all)
    held = links.held  # (grows while ``see`` learns it, on the first try)
    _check_request(filters, held, names)
    label_file = LabelFile(labels) if labels is not None and uses_file else None
    renderer = SystemRenderer(prompt)
    env_tools = EnvTools()
    summary = ExportSummary(format=fmt, source=source, placebo=placebo,
                            placebo_seed=placebo_seed if placebo else None, filters=filters, prompt=prompt)
    counts = {k: Counter() for k in ("tasks", "classes", "splits", "harness_commits", "models", "envs")}
    skipped: Counter = Counter()
    relabelled: Counter = Counter()  # records written whose --labels line was not reusable, by reason
    per_task: Counter = Counter()
    admitted = heldout_matched = duplicate_records = 0
    records_seen: set[int] = set()  # fingerprints of the records taken (~70 bytes each in memory)
    # records written, and of them those with a class from --labels; the summary's fields are set at the end
    # (a pydantic model's ``__setattr__`` is a Python call per row)
    written = [0, 0]
    out = Path(out)
    made = _make_dirs(out, out / "data")  # removed again (when still empty) if the export fails
    # written into a staging directory inside ``out`` and moved into place only when the export succeeds:
    # a failed export (bad labels, a bad record, ^C) leaves an earlier export in ``out`` as it was
    stage = Path(tempfile.mkdtemp(prefix=".export-", dir=out))
    (stage / "data").mkdir()
    # one writer, or with a validation split one per split (a record goes to its task's split)
    parts: tuple[str | None, ...] = ("train", "validation") if split is not None else (None,)
    validation: set[str] = set()  # the validation tasks, chosen when the pass is done
    exportable: set[str] = set()  # with a split: the tasks it chooses from, those with a record to write
    spill = _Spill(stage / "records.pickle") if split is not None else None
    writers = {}
    for part in parts:
        writers[part] = open_writer(fmt, stage, part, names)
    # the placebo permutes within a split: a validation task's turns never reach a training record
    windows: dict[str | None, list[tuple[dict, dict]]] = {part: [] for part in parts}
    # the parsed arguments of a window's records (a turn may move to another record)
    windows_arguments: dict[str | None, dict] = {part: {} for part in parts}
    part_written: Counter = Counter()
    part_tasks: dict[str | None, set[str]] = {part: set() for part in parts}
    # records (in order) waiting for a system message
    unrendered: list[tuple[dict, dict, Trajectory, Mapping, Candidate]] = []
    counter: TokenCounter = tokens or ApproxTokens()
    one_at_a_time = filters.max_tokens is not None and filters.max_per_task is not None
    lengths = {part or "train": Lengths() for part in parts}  # the token length of each record written, by split
    unmeasured: Counter = Counter()  # placebo records its chat template cannot render, by split
    template_error: str | None = None  # the first record's chat template error (the card names it; one, not a list)
    # an OpenAI record written as it was made (no system message rendered, no placebo): its line is made once, for
    # the duplicate check (``line_key``, the same rule as ``fingerprint``) and for the writer
    one_line = fmt == ExportFormat.openai and not renderer.active and not placebo

    def emit(record: dict, meta: dict, arguments: Mapping, line: bytes | None = None) -> None:
        # never write an invalid record; a bug here must be loud in tests. Each call's arguments
        # were parsed as a JSON object by chat.record_and_arguments (once, on the trajectory), and are not
        # parsed again here nor by the writer (``arguments``: their values)
        errs = openai_errors(record, check_arguments=False)
        if errs:
            raise AssertionError(f"{meta['id']}: exporter produced an invalid record: {errs[:3]}")
        part = ("validation" if meta["task_id"] in validation else "train") if split is not None else None
        measured = meta.pop(_TOKENS, None)  # counted as the record was made; a placebo record is another record
        if measured is None or placebo:
            try:
                measured = counter.count(record, line)
            except TemplateFailed:
                measured = None
        if measured is None:
            unmeasured[part or "train"] += 1
        else:
            lengths[part or "train"].add(measured)
        if line is None:
            writers[part].write(record, meta, arguments)
        else:  # the record's line, made for its duplicate check (``one_line``)
            writers[part].write_line(line, meta)
        written[0] += 1
        part_written[part] += 1
        if split is not None:
            part_tasks[part].add(meta["task_id"])
        for key, value in (("tasks", meta["task_id"]), ("classes", meta["failure_class"]),
                           ("splits", meta["split"]), ("harness_commits", meta["harness_commit"]),
                           ("models", meta["model"]), ("envs", meta["env"])):
            counts[key][value if value is not None else "-"] += 1

    def settle() -> None:  # the system messages of the records waiting for them, rendered in one batch
        systems = renderer.render_many([(t, record["tools"]) for record, _, t, _, _ in unrendered])
        for (record, meta, t, arguments, c), system in zip(unrendered, systems, strict=True):
            record["messages"] = with_system(record["messages"], system)
            if (n := measure(record, None)) is None:  # too long (or unrenderable) with its system message
                per_task[t.task_id] -= 1  # taken before its length was known: no longer counts for the task
                continue
            meta[_TOKENS] = n
            counted(c)
            take(record, meta, arguments)
        unrendered.clear()

    def measure(record: dict, line: bytes | None) -> int | None:
        # its length in tokens, or None when it is skipped for it: over --max-tokens, or the chat template of
        # --tokenizer cannot render it (a trainer using that template cannot tokenize it either)
        try:
            n = counter.count(record, line)
        except TemplateFailed as e:
            nonlocal template_error
            skipped["chat_template_error"] += 1
            if template_error is None:  # every record's was kept until 2026-12-06: memory grew with the rows
                template_error = str(e)
            return None
        if filters.max_tokens is not None and n > filters.max_tokens:
            skipped["over_max_tokens"] += 1
            return None
        return n

    def counted(c: Candidate) -> None:  # a record that will be written (a placebo window is written whole)
        written[1] += c.from_labels
        if c.relabelled:
            relabelled[c.relabelled] += 1

    def take(record: dict, meta: dict, arguments: Mapping, line: bytes | None = None) -> None:
        # a record made: placed now, or once the split is chosen (among the tasks with a record made)
        if spill is not None:
            exportable.add(meta["task_id"])
            spill.add((record, meta, arguments, line))
        elif line is not None:
            emit(record, meta, arguments, line)
        else:
            place(record, meta, arguments)

    def place(record: dict, meta: dict, arguments: Mapping) -> None:
        if placebo:
            part = ("validation" if meta["task_id"] in validation else "train") if split is not None else None
            windows[part].append((record, meta))
            windows_arguments[part].update(arguments)  # a text's value is the same whichever record it came from
            if len(windows[part]) >= placebo_window:
                flush(part)
        else:
            emit(record, meta, arguments)

    def flush(part: str | None) -> None:
        window, window_arguments = windows[part], windows_arguments[part]
        if not window:
            return
        recs, kept = placebo_mod.permute([r for r, _ in window], seed=placebo_seed + part_written[part])
        summary.placebo_units_kept_in_place += kept
        for rec, (_, meta) in zip(recs, window, strict=True):
            if rec is None:  # its placebo holds more calls than nine-character ids number (``placebo.permute``)
                skipped["too_many_tool_calls"] += 1
                continue
            emit(rec, meta, window_arguments)
        window.clear()
        window_arguments.clear()

    # the line (or stored body) each trajectory was read from, to prove a label is its own (``reusable``), and the label
    # a store keeps with it (the service's ingest store)
    lines = keeping_lines() if uses_file else nullcontext(None)
    try:
        with lines as kept:
            for c in candidates(source, trajectories, queue, diagnosis_cfg, label_file, kept, see):
                t = c.traj
                if c.duplicate:
                    skipped["duplicate_id"] += 1
                    continue
                selected = _selected(c, filters)
                if t.split == Split.heldout or t.task_id in held:
                    summary.heldout_tasks_excluded += 1
                    heldout_matched += selected is True
                    continue
                if selected is not True:
                    if selected:
                        skipped[selected] += 1
                    continue
                admitted += 1
                if filters.max_per_task is not None and per_task[t.task_id] >= filters.max_per_task:
                    skipped["over_max_per_task"] += 1
                    continue
                # labelled (if it is to be) before its record is made: cleaning then reads labelling's parse of the
                # calls' arguments instead of parsing them again
                c.classify()
                try:
                    # its system message is rendered below, in a batch; a called tool it does not declare, as its
                    # environment declares it (a rollout of tau2 records the env, not the tools' docstrings)
                    record, arguments = record_and_arguments(t, known_tools=env_tools.of(t))
                except RecordSkipped as e:
                    skipped[e.reason] += 1
                    continue
                if filters.skip_text_with_calls and text_with_calls(record):
                    skipped["text_with_calls"] += 1
                    continue
                # a record identical to an earlier one (the same run imported twice, or two runs alike): its system
                # message is still to be rendered from the trajectory's task and the record's tools, so the task counts
                if one_line:
                    line = record_line(record)
                    key = line_key(line)
                else:
                    line, key = None, fingerprint((record, t.task) if renderer.active else record)
                if key in records_seen:
                    duplicate_records += 1
                    if not keep_duplicates:
                        skipped["duplicate_record"] += 1
                        continue
                else:
                    records_seen.add(key)
                n = None
                if not renderer.active:  # a rendered record is measured once its system message is in (settle)
                    if (n := measure(record, line)) is None:
                        continue
                per_task[t.task_id] += 1
                meta = _meta(c, placebo)
                if renderer.active:
                    unrendered.append((record, meta, t, arguments, c))
                    # with --max-tokens and --max-per-task, each rendered before the next run of its task is looked
                    # at: a run skipped for its length (known once rendered) leaves its task's place to the next
                    if len(unrendered) >= (1 if one_at_a_time else renderer.batch):
                        settle()
                else:  # its line, when made for the duplicate check (``one_line``), is the one written
                    meta[_TOKENS] = n
                    counted(c)
                    take(record, meta, arguments, line)
        settle()
        if spill is not None:  # every task is known: choose the validation tasks and write the records spilled
            validation.update(validation_tasks(exportable, split.fraction, split.seed, names, links.pairs(exportable)))
            split.tasks, split.tasks_considered = sorted(validation), len(exportable)
            split.linked_tasks = sorted(list(g) for g in links.groups(exportable) if len(g) > 1)
            for record, meta, arguments, line in spill.records():
                if line is not None:
                    emit(record, meta, arguments, line)
                else:
                    place(record, meta, arguments)
        for part in parts:
            flush(part)
        files: list[str] = []
        for part in parts:
            summary.sharegpt_text_with_calls += getattr(writers[part], "text_with_calls", 0)
            summary.sharegpt_calls_unreadable += getattr(writers[part], "calls_unreadable", 0)
            files += writers[part].close()
            del writers[part]
        summary.files = files
        entry = EXPORT_FORMATS.get(fmt.value)
        data_files = ({part: entry.split_file.format(split=part) for part in parts} if split is not None
                      else {"train": entry.data_file})
        if entry.dataset_info is not None:  # LLaMA-Factory's description of the data (ShareGPT)
            summary.files.append(write_dataset_info(stage, entry.dataset_info(data_files)))
    except OSError as e:
        if spill is not None:
            spill.close()
        for w in writers.values():
            w.abort()  # not close(): on a full disk its flush raised again, and the staging directory stayed
        _discard(stage, made)
        raise naming_output(e, out) from None
    except BaseException:
        if spill is not None:
            spill.close()
        for w in writers.values():
            w.abort()
        _discard(stage, made)
        raise
    finally:
        renderer.close()
    if admitted == 0 and heldout_matched:
        _discard(stage, made)
        raise HeldOutRequested("export", f"only held-out tasks matched the request ({heldout_matched} "
                         "trajectories); held-out tasks are never exported")
    summary.records, summary.labels_reused = written
    summary.duplicate_records, summary.duplicates_kept = duplicate_records, keep_duplicates
    if split is not None:
        split.files = data_files
        split.records = {part: part_written[part] for part in parts}
        split.tasks_written = {part: len(part_tasks[part]) for part in parts}
        summary.validation = split
    summary.labels_relabelled = dict(sorted(relabelled.items()))
    summary.heldout_linked_tasks = links.linked_held()
    summary.token_lengths = TokenLengths(method=counter.method, exact=counter.exact, max_tokens=filters.max_tokens,
                                         splits={p: lengths[p].stats(filters.max_tokens) for p in lengths},
                                         unmeasured=dict(unmeasured),
                                         template_error=template_error)
    for key, c in counts.items():
        setattr(summary, key, dict(sorted(c.items())))
    summary.skipped = dict(sorted(skipped.items()))
    summary.prompt_fallbacks = renderer.fallbacks
    summary.prompt_limit_hits = renderer.limit_hits
    summary.prompt_render_unjailed = renderer.unjailed
    summary.env_tools_past_limit = env_tools.past_limit
    try:  # after the records, still before anything moves in: a full disk here leaves ``out`` as it was
        write_card(stage, summary)
    except OSError as e:
        _discard(stage, made)
        raise naming_output(e, out) from None
    except BaseException:
        _discard(stage, made)
        raise
    with _moving_in(out):  # two exports into one directory (two requests of one name) must not mix their files
        _remove_outputs(out)  # an earlier export's files (maybe another format) must not linger
        for name in dict.fromkeys((*summary.files, "README.md", "manifest.json")):
            (out / name).parent.mkdir(exist_ok=True)
            os.replace(stage / name, out / name)
    shutil.rmtree(stage, ignore_errors=True)
    log.info("dataset.exported", out=str(out), records=summary.records, format=fmt.value,
             placebo=placebo, heldout_excluded=summary.heldout_tasks_excluded)
    return summary


_TOKENS = "_tokens"  # a record's token length, carried in its provenance row until it is written (never written)


class _Spill:
    """Records (with their provenance and parsed arguments) written to a file one by one and read back in the same
    order, once: a split by task holds its records here until its tasks are chosen, so memory stays flat and the
    sources are read once. Pickled, so every value comes back as it went in (an integer past 64 bits, a NaN in a
    declared tool's schema). The file lies in the export's staging directory and goes with it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("wb", buffering=WRITE_BUFFER)

    def add(self, item: tuple) -> None:
        pickle.dump(item, self._file, protocol=pickle.HIGHEST_PROTOCOL)

    def records(self) -> Iterator[tuple]:
        self._file.close()
        with self.path.open("rb", buffering=WRITE_BUFFER) as f:
            while True:
                try:
                    yield pickle.load(f)
                except EOFError:
                    break
        self.path.unlink()

    def close(self) -> None:
        self._file.close()


@contextmanager
def _moving_in(out: Path) -> Iterator[None]:
    """Hold ``out`` while an export's files replace the ones there: an exclusive ``flock`` on the directory
    itself (no lock file left behind), so a second export into it, from this process or another, moves its
    files in after the first has moved all of its own, never between them. A directory that cannot be locked (NFS
    emulates flock with a byte-range write lock, which a directory opened read-only cannot take: EBADF; ENOLCK where
    no lock manager runs) still gets the export, unlocked as before the lock, with a warning."""
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            os.close(fd)
            raise
    except OSError as e:
        log.warning("dataset.export_unlocked", out=str(out), reason=str(e))
        yield
        return
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _make_dirs(out: Path, sub: Path) -> list[Path]:
    """Create ``out`` (with its missing parents); returns the directories that did not exist before,
    ``out``'s and ``sub``'s (a directory a writer may create inside ``out``), deepest first."""
    made = [sub] if not sub.exists() else []
    p = out
    while not p.exists() and p != p.parent:
        made.append(p)
        p = p.parent
    out.mkdir(parents=True, exist_ok=True)
    return made


def _discard(stage: Path, made: list[Path]) -> None:
    """A failed export: its staging directory goes, and the directories it created if left empty."""
    shutil.rmtree(stage, ignore_errors=True)
    for d in made:
        try:
            d.rmdir()
        except OSError:  # not empty (someone else's files) or already gone
            pass


def _check_out(out: Path, names: RequestNames) -> None:
    """``out`` may be new, empty, or an earlier export (its manifest.json reads as one): an export replaces
    its own files there. A directory holding a README.md (or another file an export writes) that no export
    wrote -- a project, a harness repo -- is refused, not overwritten."""
    if not out.is_dir():
        return
    if (out / "manifest.json").is_file() and _is_manifest(out / "manifest.json"):
        if added := foreign_datasets(out):  # the earlier export's dataset_info.json, added to by hand
            raise InputError(names.out, f"{out} holds dataset_info.json with datasets no export wrote ({added}): "
                             f"a new export would remove it; move them to a dataset_info.json of their own, or "
                             f"{names.elsewhere}")
        return
    theirs = [name for name in OUTPUT_FILES if (out / name).exists()]
    if theirs:
        raise InputError(names.out, f"{out} holds {', '.join(theirs)}, which no earlier export wrote (no export "
                         f"manifest.json): {names.elsewhere}")


def _is_manifest(path: Path) -> bool:
    try:
        read_manifest(path.parent)
    except (OSError, ValueError):
        return False
    return True


# The files an export writes into its --out (and an earlier export's that a new one replaces).
OUTPUT_FILES = ("data.jsonl", "metadata.jsonl", "README.md", "manifest.json", "data/train-00000-of-00001.parquet",
                "dataset_info.json", "train.jsonl", "train.metadata.jsonl", "validation.jsonl",
                "validation.metadata.jsonl", "data/validation-00000-of-00001.parquet")


def _remove_outputs(out: Path) -> None:
    """Delete the files an export writes into ``out`` (an earlier export's, before this one's move in);
    nothing else that is there is touched."""
    for name in OUTPUT_FILES:
        (out / name).unlink(missing_ok=True)
    staging = out / "hfstage"
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)


def read_manifest(out: Path) -> ExportSummary:
    return ExportSummary.model_validate(json.loads((Path(out) / "manifest.json").read_text()))
