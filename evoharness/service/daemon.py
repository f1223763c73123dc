"""The background loop of `evoharness serve`: runs rounds, answers reviews, queues ingested failures.

One worker thread does all graph work, so a run is never driven twice at once:

- it moves ingested content failures (F1/F4, lever weights) into the training queue;
- it applies review decisions posted to the API (the same ``Command(resume=...)`` that
  `evoharness approve|reject` sends);
- with ``service.loop`` on, it resumes the current run until it ends or waits for review, and
  starts a new run when the trigger fires: ``service.min_new_process_failures`` ingested
  trajectories labelled as process failures (F2/F3) since the previous run started (the first run
  may start at once; after a finished run at least one new process failure is needed). A run it
  starts gets those ingested process failures as analyst evidence (``<run dir>/evidence.jsonl``,
  written once before the run's settings; see `evoharness.graph.evidence`).

The current run id is kept in ``<home>/service/daemon.json`` so a restarted service resumes it. A run being
begun is recorded there first (``beginning``), so a service killed before the run was made current finds it on
restart (`Daemon.recover_begun`): resumed when its settings were saved, its partial directory removed otherwise.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import threading
from pathlib import Path
from typing import Any

from langgraph.types import Command

from evoharness.config import Settings
from evoharness.diagnosis.models import FailureClass, Lever
from evoharness.errors import EvoharnessError, InfraError, InputError
from evoharness.graph.checkpoint import CheckpointerLost, check_checkpointer
from evoharness.graph.evidence import evidence_path, import_evidence, write_evidence
from evoharness.graph.faults import fault_point
from evoharness.graph.locks import RunLocked
from evoharness.graph.runner import RUN_ID, load_run_settings, new_run_id, runs_dir, save_run_settings
from evoharness.graph.sqlite_damage import CheckpointDamaged
from evoharness.graph.summary import summary_readable
from evoharness.logging import get_logger
from evoharness.service.driver import TapProgress, drive, read_state
from evoharness.service.ingest import IngestStore

log = get_logger("evoharness.service")

# what the daemon knows about a run after driving it
RUNNING, WAITING, DONE, STOPPED, PAUSED = "running", "waiting_review", "done", "stopped", "paused"
LOCKED = "locked"  # another process (`evoharness run --resume`, approve) drives it: retried with the loop's back-off
STARTING = "starting"  # accepted by POST /runs, not yet recorded by the worker


def _unmake(run_dir: Path, made_dir: bool) -> None:
    """Remove what a begin that did not finish wrote: the run directory when the begin made it, else the files it
    writes there (the evidence snapshot, which a later begin of the id would keep, and the settings)."""
    if made_dir:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        evidence_path(run_dir).unlink(missing_ok=True)
        (run_dir / "settings.json").unlink(missing_ok=True)


class Daemon:
    def __init__(self, settings: Settings, ingest: IngestStore, *, quiet: bool = False) -> None:
        self.settings = settings
        self.cfg = settings.service
        self.ingest = ingest
        self.quiet = quiet
        self.state_path = Path(settings.home) / "service" / "daemon.json"
        self.stop_event = threading.Event()
        self._wake = threading.Event()
        # work the API asks for: ("begin", run id, None) starts a run, ("drive", run id, payload) drives one
        self._requests: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.phase: dict[str, str] = {}  # run id -> RUNNING | WAITING | DONE | STOPPED | PAUSED | LOCKED
        self.locked_by: dict[str, str] = {}  # run id -> why it is LOCKED (the holder's pid)
        self.paused_by: dict[str, str] = {}  # run id -> why it is PAUSED (the error), until it is driven again
        self.snapshots: dict[str, dict[str, Any]] = {}  # run id -> latest state values
        self._continuing: set[str] = set()  # runs with a review decision queued or being applied
        self._deciding: dict[str, tuple[str, str]] = {}  # run id -> (decision, branch) queued for it
        self.starting: set[str] = set()  # runs requested by the API that the worker has not begun yet
        self.progress = TapProgress(quiet=quiet)
        self._progress_of: str | None = None  # the run self.progress counts for
        self._driven: set[str] = set()  # runs this process has begun or driven
        self.last_error: str | None = None
        # why no new run is begun (one could not be for a reason no retry mends), until POST /runs or a restart
        self.new_runs_paused: str | None = None
        self.queue = None

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="evoharness-daemon", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the loop to stop after the running node; True when it stopped within ``timeout``."""
        self.stop_event.set()
        self._wake.set()
        if self._thread is None:
            return True
        self._thread.join(self.cfg.shutdown_timeout_s if timeout is None else timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        self._wake.set()

    # -- persisted service state ------------------------------------------------------------------
    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as e:  # ValueError: not JSON, not UTF-8
            data = e
        if not isinstance(data, dict):  # it was a 500 on /health and a loop crash at every poll
            why = (f"unreadable ({(str(data).splitlines() or [type(data).__name__])[0][:120]})"
                   if isinstance(data, BaseException) else "not a JSON object")
            raise InputError(str(self.state_path), f"{why}: the service's record of its current run; fix it, or "
                             "remove it (the service then forgets which run is current; the runs stay)")
        return data

    def _write(self, data: dict[str, Any]) -> None:
        """Replace daemon.json whole; a write the disk refuses (full, read-only, a file size limit) is an InfraError
        naming the file, and the record stays as it was. It was a bare `OSError: [Errno 28] No space left on device`
        (no file named) logged as a loop crash with a traceback, its cut .tmp left taking room."""
        tmp = self.state_path.with_suffix(".tmp")
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w") as fh:
                fh.write(json.dumps(data, indent=2))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.state_path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise InfraError(f"cannot write {self.state_path}: {e.strerror or e} (the service's record of its current "
                             "run: kept as it was; the loop tries again after its back-off)") from None

    @property
    def current_run(self) -> str | None:
        return self._read().get("run_id")

    def history(self) -> list[str]:
        """Every run this service started, oldest first."""
        return list(self._read().get("history", []))

    # -- requests from the API ------------------------------------------------------------------
    def pending(self, run_id: str) -> list[Any]:
        """The run's open review interrupts, read from its checkpoint: a decision is checked against what the run
        can apply it to (the interrupts kept in memory from the last drive answered 202 for a run whose database
        had since been damaged; the drive then paused the run and the decision was gone)."""
        saved, run_dir = load_run_settings(self.settings, run_id)
        return read_state(saved, run_id, run_dir)[1]

    def decide(self, run_id: str, branch: str, decision: str, reason: str | None) -> dict[str, str]:
        """Validate a review decision and hand it to the worker; returns the decisions it will resume with."""
        with self._lock:  # checked and claimed at once: two concurrent approves never both drive the run
            if run_id in self._continuing:
                raise InputError(run_id, "a review decision for this run is already being applied")
            self._continuing.add(run_id)
        try:
            return self._decide(run_id, branch, decision, reason)
        except BaseException:
            with self._lock:
                self._continuing.discard(run_id)
            raise

    def _decide(self, run_id: str, branch: str, decision: str, reason: str | None) -> dict[str, str]:
        try:
            pending = self.pending(run_id)
        except CheckpointDamaged as e:  # refused now, and the run paused with the reason: never accepted and dropped
            self._pause(run_id, e)
            raise InputError(run_id, f"{self.paused_by[run_id]}; {_not_applied(decision, branch)}") from None
        branches = {c["branch"] for p in pending for c in p.get("candidates", [])}
        if not branches:
            raise InputError(run_id, "the run is not waiting for a review")
        if branch not in branches:
            raise InputError(branch, f"not awaiting review in {run_id} (awaiting: {', '.join(sorted(branches))})")
        decisions = {b: "reject" for b in branches}  # as `evoharness approve`: the others are rejected
        decisions[branch] = decision
        if reason:
            decisions[f"{branch}#reason"] = reason
        with self._lock:
            self.phase[run_id] = RUNNING
            self._deciding[run_id] = (decision, branch)
        self._requests.put(("drive", run_id, Command(resume=decisions)))
        self._wake.set()
        return decisions

    def request_resume(self, run_id: str) -> None:
        """Drive a stopped or paused run again (e.g. after fixing an infrastructure failure)."""
        load_run_settings(self.settings, run_id)
        if self._finished(run_id):
            raise InputError(run_id, "the run is done")
        # a person has mended something (a copy of the damaged database put back): new runs are tried again too (they
        # stayed held after the resumed run went on, until POST /runs or a restart); still refused, held again
        self.new_runs_paused = None
        self._requests.put(("drive", run_id, None))
        self._wake.set()

    def request_run(self, run_id: str | None = None) -> str:
        """Start a new run now (when no run is active); returns its id."""
        run_id = run_id or new_run_id()
        with self._lock:  # checked and claimed at once (requests run on a thread pool)
            if (runs_dir(self.settings) / run_id / "settings.json").exists() or run_id in self.starting:
                raise InputError(run_id, "run already exists")
            if self.starting:  # both were 202; the worker then dropped the second, said only in last_error
                other = sorted(self.starting)[0]
                raise InputError(run_id, f"not started: run {other} is starting (asked for, not begun yet): one "
                                 "run at a time")
            # after the starting check: the worker records a run as current before it stops counting it as
            # starting, so a run begun meanwhile is seen here (read before the lock, it was missed)
            current = self.current_run
            if current and self._active(current):
                raise InputError(run_id, f"not started: run {current} is still active "
                                 f"({self.phase.get(current) or 'not resumed'})")
            self.starting.add(run_id)
            self.new_runs_paused = None  # a person asks again: begun, it is tried once more
        self._requests.put(("begin", run_id, None))
        self._wake.set()
        return run_id

    # -- the loop ---------------------------------------------------------------------------------
    def _main(self) -> None:
        backoff = self.cfg.poll_interval_s
        try:
            self.recover_begun()
        except (EvoharnessError, OSError) as e:
            self.last_error = f"recovering a run being begun: {e}"
            log.error("service.recover_failed", error=str(e))
        while not self.stop_event.is_set():
            try:
                # a paused run waits for a person: its reason stays said (it was cleared by the next idle poll)
                if (pause := self._current_pause()) is not None:
                    self.last_error = pause
                did = self._step()
                if did and self._current_pause() is None:  # an error stays said until the loop next does work: a
                    self.last_error = None  # run start refused after its 202 was gone from /health one poll later
                backoff = self.cfg.poll_interval_s
            except EvoharnessError as e:
                self.last_error = str(e)
                log.error("service.loop_error", error=str(e))
                did, backoff = False, min(backoff * 2, 300.0)
            except Exception as e:  # a bug must not kill the API; it is logged with its traceback
                self.last_error = f"{type(e).__name__}: {e}"
                log.exception("service.loop_crash", error=self.last_error)
                did, backoff = False, min(backoff * 2, 300.0)
            if not did and not self.stop_event.is_set():
                self._wake.wait(backoff)
                self._wake.clear()
        log.info("service.loop_stopped")

    def _current_pause(self) -> str | None:
        """Why the current run is paused, else why new runs are (``new_runs_paused``), None when neither is: a run
        paused before a new one was started says so in its own view only (said in /health, it hid every error of the
        run after it)."""
        return (self.paused_by.get(self.current_run) if self.paused_by else None) or self.new_runs_paused

    def _step(self) -> bool:
        try:
            self.sweep_ingested()
        except EvoharnessError as e:  # the queue being down must not stop the runs
            self.last_error = f"training queue: {e}"
            log.error("service.sweep_failed", error=str(e))
        try:
            kind, run_id, payload = self._requests.get_nowait()
        except queue.Empty:
            pass
        else:
            if kind == "begin":
                try:
                    current = self.current_run
                    if current and self._active(current):
                        raise InputError(run_id, f"not started: run {current} is still active")
                    if not self._begin(run_id):
                        return True
                finally:
                    self.starting.discard(run_id)
            self._drive(run_id, payload)
            return True
        if not self.cfg.loop or self.stop_event.is_set():
            return False
        data = self._read()
        run_id = data.get("run_id")
        if run_id is None and self.cfg.run_id and self.new_runs_paused is None:
            run_id = self.cfg.run_id
            if (runs_dir(self.settings) / run_id / "settings.json").exists():
                history = [*data.get("history", []), run_id]
                self._write({**data, "run_id": run_id, "started_seq": self.ingest.last_seq(), "history": history})
            else:
                self._begin(run_id)
            return True
        if run_id is not None and not self._finished(run_id):
            if self.phase.get(run_id) in (WAITING, PAUSED):
                return False
            self._drive(run_id, None)
            return True
        if self.new_runs_paused is not None:  # a person fixes the cause, then POST /runs (or restarts)
            return False
        need = self.cfg.min_new_process_failures
        if run_id is not None:
            need = max(1, need)
        new = self.ingest.count_lever("harness", after_seq=data.get("started_seq", 0)) if need else 0
        if new >= need:
            log.info("service.trigger", new_process_failures=new, needed=need)
            self._begin(new_run_id())
            return True
        return False

    def _active(self, run_id: str) -> bool:
        """Whether the run keeps a new one from starting: not done, and not paused -- a paused run waits for a person,
        who may start another run instead (one whose checkpoints are lost cannot go on: it kept the service from every
        new run for good). The paused run stays paused; `POST /runs/{id}/resume` still drives it."""
        return not self._finished(run_id) and self.phase.get(run_id) != PAUSED

    def _finished(self, run_id: str) -> bool:
        # a summary.json cut by a full disk (before it was written atomically) is none: driving the run rewrites it
        return self.phase.get(run_id) == DONE or summary_readable(runs_dir(self.settings) / run_id)

    def _begin(self, run_id: str) -> bool:
        """Record a new run (evidence snapshot and settings saved, made current); the next step drives it. False when
        it could not be for a reason no retry mends (an InputError: a damaged checkpoint database, an evidence file
        that cannot be read): nothing of it stays, and new runs are paused with the reason (``new_runs_paused``).
        Before, the loop's trigger began another run after its back-off, refused the same way, for as long as the
        service ran.

        The run's analyst evidence: the ingested process failures that arrived since the previous run
        started (the ones that triggered this run; at most ``service.max_evidence``, the most recent) and
        the files in ``run.evidence``. The snapshot is written before the settings, so a run that exists
        always has it.
        """
        run_dir = runs_dir(self.settings) / run_id
        data = {k: v for k, v in self._read().items() if k != "beginning"}
        upto = self.ingest.last_seq()
        # the intent first: a service killed before the run is recorded below finds it again (recover_begun)
        made_dir = not run_dir.exists()
        try:
            self._write({**data, "beginning": {"run_id": run_id, "started_seq": upto, "made_dir": made_dir}})
        except InfraError as e:
            raise InfraError(f"run {run_id} not started: {e}") from None
        try:
            check_checkpointer(self.settings.run.checkpointer, run_dir)  # one that cannot be opened makes no run
            ingested = self.ingest.process_failures(data.get("started_seq", 0), upto, self.cfg.max_evidence)
            n = write_evidence(run_dir, [*import_evidence(self.settings.run.evidence), *ingested])
            fault_point("service:begin:evidence")
            save_run_settings(run_dir, self.settings)
            fault_point("service:begin:settings")
        except Exception as e:
            _unmake(run_dir, made_dir)  # no run was made (the error says why): nothing of it stays
            self._write(data)
            if not isinstance(e, InputError):  # a full disk, a bug: retried with the loop's back-off
                raise
            self.new_runs_paused = (f"new runs paused: run {run_id} not started: {e}; then POST /runs (or restart "
                                    "the service)")
            self.last_error = self.new_runs_paused
            log.error("service.new_runs_paused", run_id=run_id, error=self.new_runs_paused)
            return False
        history = [*data.get("history", []), run_id]
        self._write({"run_id": run_id, "started_seq": upto, "history": history})
        with self._lock:
            self.phase[run_id] = RUNNING
        self._progress_for(run_id)
        self._driven.add(run_id)
        log.info("service.run_started", run_id=run_id, evidence=n, ingested_evidence=len(ingested))
        self.progress.note(f"service: run {run_id} started" + (f" with {n} evidence trajectories" if n else ""))
        return True

    def recover_begun(self) -> str | None:
        """Finish or undo the begin of a run this service was killed in (SIGKILL, power cut); returns what it
        said, None when no run was being begun. A run whose settings were saved is made the current run (the
        loop resumes it); one killed before is no run: its partial directory (evidence snapshot, checkpoint
        file) is removed and the trigger starts a run again. Before, the first was left as a run no one drove
        (the trigger began another one with the same evidence) and the second's stale snapshot was kept for a
        later run of the same id."""
        data = self._read()
        begun = data.pop("beginning", None)
        if not isinstance(begun, dict):
            return None
        run_id = begun.get("run_id")
        if not isinstance(run_id, str) or re.fullmatch(RUN_ID, run_id) is None:
            self._write(data)
            return None
        run_dir = runs_dir(self.settings) / run_id
        if (run_dir / "settings.json").is_file():
            history = [*data.get("history", []), run_id]
            self._write({**data, "run_id": run_id, "started_seq": begun.get("started_seq", 0), "history": history})
            said = (f"service: run {run_id} was being started when the service stopped; it is the current run "
                    "and resumes from its start")
        else:
            _unmake(run_dir, bool(begun.get("made_dir")))
            self._write(data)
            said = (f"service: run {run_id} was being started when the service stopped, before its settings were "
                    "saved: it was not made; its partial directory is removed")
        log.warning("service.begin_recovered", run_id=run_id, said=said)
        self.progress.note(said)
        return said

    def _drive(self, run_id: str, payload: Any) -> None:
        decided = self._deciding.pop(run_id, None) if payload is not None else None
        seen: list[bool] = []  # a state streamed: the graph has taken the decision in

        def dropped() -> str:
            """'; the approve of B was not applied: ...' for a review decision the drive failed before the graph took
            in, else ''. It had been answered 202 and was dropped unsaid: the resumed run waited for the same
            review again."""
            return "; " + _not_applied(*decided) if decided is not None and not seen else ""

        try:
            saved, run_dir = load_run_settings(self.settings, run_id)
        except InputError as e:  # its settings.json unreadable: retried with back-off for good, its phase `running`
            self._pause(run_id, e, dropped())
            return
        with self._lock:
            if self.phase.get(run_id) != LOCKED:  # LOCKED until the lock is taken (the first state seen)
                self.phase[run_id] = RUNNING
            if (why := self.paused_by.pop(run_id, None)) is not None and self.last_error == why:
                self.last_error = None  # driven again: the pause is over (it was said until the next step)
        self._progress_for(run_id)
        if payload is None and run_id not in self._driven:  # a restart, or a run of the CLI's: it went on unsaid
            self.progress.note(f"service: resuming run {run_id} from its last checkpoint")
        self._driven.add(run_id)

        def on_state(values: dict[str, Any]) -> None:
            seen.append(True)
            self.snapshots[run_id] = values
            if self.locked_by.pop(run_id, None) is not None:  # the lock is this process's now
                with self._lock:
                    self.phase[run_id] = RUNNING

        try:
            outcome = drive(saved, run_id, run_dir, payload, self.progress, self.stop_event, on_state)
        except CheckpointerLost:  # the database is back after a restart: the loop's back-off retries the run
            raise
        except RunLocked as e:  # it said `running` while the loop retried it, locked out, with back-off
            with self._lock:
                self.phase[run_id] = LOCKED
                self.locked_by[run_id] = e.reason
            raise RunLocked(run_id, e.reason + dropped()) from None
        except InfraError as e:
            with self._lock:
                self.phase[run_id] = PAUSED
                self.paused_by[run_id] = str(e) + dropped()
            raise
        except InputError as e:  # a damaged checkpoint database, a run that cannot resume: no retry mends it
            self._pause(run_id, e, dropped())
            return
        finally:
            self._continuing.discard(run_id)
        with self._lock:
            self.locked_by.pop(run_id, None)
            if outcome.done:
                self.phase[run_id] = DONE
            elif outcome.interrupted:
                self.phase[run_id] = WAITING
            else:
                self.phase[run_id] = STOPPED
        log.info("service.run_driven", run_id=run_id, phase=self.phase[run_id])

    def _pause(self, run_id: str, e: InputError, dropped: str = "") -> None:
        """Pause the run for ``e``, which no retry mends (it was retried with back-off for as long as the service ran,
        its phase `running`); the loop says why from its next step on (``paused_by``) until the run is driven
        again. ``dropped``: what the reason adds about a review decision the drive could not apply."""
        why = f"run {run_id} paused: {e}; then POST /runs/{run_id}/resume (or restart the service){dropped}"
        with self._lock:
            self.phase[run_id] = PAUSED
            self.paused_by[run_id] = why
        self._continuing.discard(run_id)
        log.error("service.run_paused", run_id=run_id, error=why)

    def _progress_for(self, run_id: str) -> None:
        """The progress counts this run's rollouts and budget: a second run began at the first one's counts."""
        if self._progress_of != run_id:
            self.progress.reset()
            self._progress_of = run_id

    def sweep_ingested(self, limit: int = 500) -> int:
        """Move ingested content failures into the training queue (idempotent by trajectory id); returns how many
        were queued. A row's stored label is used when it is provably this body's label and the store's labeller's
        (its body's digest and the labeller's fingerprint, ``datasets.export.reusable``, as an export of the store
        reuses it); any other row is labelled again by the store's labeller. The lever is the labeller's router's for
        the class, not the row's column: a row stored as a content failure under other settings that this labeller
        sends to the harness (or calls healthy) is not queued, and is marked swept with the rest -- before, the queue
        refused it on every poll, the sweep failed as a whole and nothing stored after it was ever queued."""
        from evoharness.datasets.export import reusable
        from evoharness.datasets.queue import queue_from_settings

        todo = self.ingest.unqueued_labelled(limit)
        if not todo:
            return 0
        if self.queue is None:
            self.queue = queue_from_settings(self.settings)
        labeller = self.ingest.labeller
        own = labeller.fingerprint  # None for a labeller of custom detectors: every row is labelled again
        entries, reused = [], 0
        for t, body, stored in todo:
            cls = _stored_class(stored) if own is not None and reusable(stored, own, body.encode()) is None else None
            if cls is not None:
                first, kept = stored.signal("id"), body  # the body the label was checked against, queued as it is
                reused += 1
            else:
                cls, signal = labeller.first_signal(t)  # ``label``'s class and first signal
                first, kept = (signal.id if signal else None), None
            lever = labeller.router.lever(cls)
            if lever != Lever.weights:
                log.info("service.sweep_not_content", trajectory=t.id, failure_class=cls.value, lever=lever.value)
                continue
            entries.append((t, cls, first, lever, kept))
        # one transaction for the batch (a commit a row was ~26 ms of fsync here, most of a sweep's time)
        queued = self.queue.enqueue_many(entries, run_id="ingest", round=None, labeller_fingerprint=own)
        self.ingest.mark_queued([t.id for t, _, _ in todo])
        log.info("service.swept", queued=queued, labels_reused=reused, labelled=len(todo) - reused)
        return queued

    def set_aside(self, run_id: str, current: str | None) -> str | None:
        """Why a run is not driven though unfinished: it is not the current run (``current``), and a restart resumes
        only that one -- a run the service started and set aside (paused when the next run began), or one paused
        beside the current run. None for the current run, a finished one, one this process drives or waits on, and
        one the service never started (a CLI run in the same home). A paused run set aside stays paused over a
        restart by design: starting a new run beside it was a person's choice, and a restart (a deploy, systemd's
        restart after a crash) must not spend budget on runs set aside; `POST /runs/{id}/resume` drives it."""
        if run_id == current or run_id in self.starting or self.phase.get(run_id) not in (None, PAUSED):
            return None
        if self.phase.get(run_id) is None and (run_id not in self.history() or self._finished(run_id)):
            return None
        now = (f"run {current} is the current run: a restart resumes only that one" if current else
               "the service has no current run: a restart resumes none")
        return f"{now}; POST /runs/{run_id}/resume drives this one"

    def run_phase(self, run_id: str) -> str | None:
        if run_id in self.starting:
            return STARTING
        if self._finished(run_id):
            return DONE
        return self.phase.get(run_id)


def _not_applied(decision: str, branch: str) -> str:
    return f"the {decision} of {branch} was not applied: send it again once the run waits for review again"




def _stored_class(stored) -> FailureClass | None:
    """The class of a stored label (``LabelHead``), None when the column holds no class (an edited row: labelled
    again, not a sweep that fails on every poll)."""
    try:
        return FailureClass(stored.failure_class)
    except ValueError:
        return None
