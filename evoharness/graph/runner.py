"""Start, resume and steer runs: the glue between settings, services, the graph and its checkpointer."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.types import Command

from evoharness.agent.models import resolve_model_spec
from evoharness.config import Settings
from evoharness.errors import InfraError, InputError
from evoharness.graph.checkpoint import check_checkpointer, open_checkpointer, start_over
from evoharness.graph.evidence import import_evidence, write_evidence
from evoharness.graph.graph import build_graph
from evoharness.graph.locks import decision_lock, run_lock
from evoharness.graph.moved import moved_harness, recorded_harness
from evoharness.graph.outcome import RunOutcome
from evoharness.graph.progress import Progress
from evoharness.graph.resumed import not_applied, saved_settings
from evoharness.graph.run_ids import RUN_ID, check_run_id, new_run_id  # noqa: F401 (RUN_ID re-exported)
from evoharness.graph.storage import paused
from evoharness.graph.summary import summary_readable, write_summary
from evoharness.graph.threads import claim_thread
from evoharness.graph.wiring import build_services, check_harness
from evoharness.model_specs import agent_scheme, role_scheme, with_temperature
from evoharness.run_dirs import known_runs
from evoharness.traces.store import replacing


def runs_dir(settings: Settings) -> Path:
    return Path(settings.home) / "runs"


def save_run_settings(run_dir: Path, settings: Settings) -> Settings:
    """Write (and return) the run's settings with ``home`` and ``run.harness`` absolute: a relative harness was
    read against the cwd of a later `run --resume|approve|reject` (another repository from another cwd)."""
    settings = settings.model_copy(update={"home": Path(settings.home).absolute(), "run": settings.run.model_copy(
        update={"harness": Path(settings.run.harness).absolute()})})
    run_dir.mkdir(parents=True, exist_ok=True)
    with replacing(run_dir / "settings.json", "w") as fh:  # whole or not at all: a cut one made the run id dead
        fh.write(settings.model_dump_json(indent=2))
    return settings


def load_run_settings(settings: Settings, run_id: str, option: str = "run id") -> tuple[Settings, Path]:
    """A run's saved settings, as seen from where its run directory is now: a run under ``<home>/runs`` of a
    copied or moved directory (a demo's ``DEMO/state``) works in that home and in the copy's harness
    (``moved_harness``). Before, `--set home=COPY/state approve|reject|run --resume` merged into the original's
    harness repository and wrote the original's caches."""
    run_dir = runs_dir(settings) / check_run_id(run_id, option)
    path = run_dir / "settings.json"
    if not path.is_file():
        raise InputError(run_id, f"no such run under {runs_dir(settings)}{known_runs(runs_dir(settings))}")
    saved = saved_settings(path, run_id)
    harness, home = recorded_harness(run_dir, saved.home, saved.run.harness), Path(saved.home)
    recorded = home / "runs" / run_id
    if recorded.is_absolute() and recorded.resolve() != run_dir.resolve():
        harness, home = moved_harness(run_dir, recorded, harness), run_dir.parent.parent
    return saved.model_copy(update={"home": home, "run": saved.run.model_copy(update={"harness": harness})}), run_dir


def drive(settings: Settings, run_id: str, run_dir: Path, payload: Any, progress: Progress, *,
          stop: threading.Event | None = None, on_state: Callable[[dict[str, Any]], None] | None = None,
          resume_hint: str | None = None) -> RunOutcome:
    """Run the graph from ``payload`` (None: resume) until it ends, interrupts, or ``stop`` is set.

    The graph is streamed step by step with ``durability="sync"``: each node's result is on disk
    before the next node starts (a SIGKILL loses at most the running node). ``stop`` is checked
    after every step (the service sets it on SIGTERM); ``on_state`` sees the state after each step.
    One driver at a time: another process driving the run is an InputError (``locks.run_lock``).
    """
    with run_lock(run_dir, run_id):
        return _drive(settings, run_id, run_dir, payload, progress, stop, on_state, resume_hint)


def _drive(settings: Settings, run_id: str, run_dir: Path, payload: Any, progress: Progress,
           stop: threading.Event | None = None, on_state: Callable[[dict[str, Any]], None] | None = None,
           resume_hint: str | None = None, announce: str | None = None) -> RunOutcome:
    services = build_services(settings, run_dir, progress)
    stopped = False
    try:
        with open_checkpointer(settings.run.checkpointer, run_dir) as saver:
            claim_thread(saver, settings.run.checkpointer, run_id, run_dir)  # a copy never writes the original's
            graph = build_graph(services, saver, review=settings.run.review)
            config = {"configurable": {"thread_id": run_id}, "recursion_limit": 10_000}
            if payload is None and not graph.get_state(config).values:
                payload = start_over(settings.run.checkpointer, run_id, run_dir)  # killed before the first checkpoint
            if announce is not None:  # once the checkpoint is read: "resuming" before a refusal was a 2nd stderr line
                progress.note(announce)
            for values in graph.stream(payload, config, durability="sync", stream_mode="values"):
                if on_state is not None:
                    on_state(dict(values))
                if stop is not None and stop.is_set():
                    stopped = True
                    break
            snapshot = graph.get_state(config)
            state = dict(snapshot.values)
            interrupts = [] if stopped else [i.value for t in snapshot.tasks for i in t.interrupts]
    except (InfraError, OSError, sqlite3.Error) as e:  # infrastructure, the checkpointer's database, the disk
        if (error := paused(e, run_id, Path(settings.home), resume_hint)) is None:
            raise
        raise error from e
    finally:
        services.close()
    outcome = RunOutcome(run_id, run_dir, state, interrupts)
    outcome.stopped = stopped and not outcome.done
    outcome.harness = Path(settings.run.harness)
    if outcome.done and not summary_readable(run_dir):  # none yet, or one cut by a full disk before it was atomic
        write_summary(outcome, services)
    if on_state is not None:
        on_state(state)
    return outcome


def _resume_hint(command: str | None, run_id: str) -> str | None:
    """The paused run's way back, typed as this run was started (``command``: the CLI's own name and its --config /
    --set words: a run under ``--set home=DIR`` told to `evoharness run --resume ID` was looked for under the default
    home); None: ``paused``'s own."""
    return None if command is None else f"`{command} run --resume {run_id}`"


def start_run(settings: Settings, run_id: str | None = None, progress: Progress | None = None, *,
              command: str | None = None) -> RunOutcome:
    run_id = check_run_id(run_id or new_run_id(), "--run-id")
    run_dir = runs_dir(settings) / run_id
    if (run_dir / "settings.json").exists():
        raise InputError(run_id, "run already exists: use --resume")
    evidence = import_evidence(settings.run.evidence)  # a bad file stops the run before anything is written
    # openai:URL -> its one model, fixed for the whole run; run.temperature into the spec (the rollouts' identity)
    model = with_temperature(resolve_model_spec(settings.run.model), settings.run.temperature, "run.temperature")
    # a spec no scheme builds: one error line now, not a run whose every rollout fails or whose roles never build
    agent_scheme(model, "run.model")
    if settings.roles.kind == "llm":
        role_scheme(settings.roles.model)
    if model != settings.run.model:
        settings = settings.model_copy(update={"run": settings.run.model_copy(update={"model": model})})
    check_checkpointer(settings.run.checkpointer, run_dir)  # before the lock makes run_dir: a refusal leaves none
    check_harness(settings)  # a repo git cannot open, likewise
    with run_lock(run_dir, run_id):  # two `run --run-id X` at once: one runs, the other is refused
        if (run_dir / "settings.json").exists():
            raise InputError(run_id, "run already exists: use --resume")
        settings = save_run_settings(run_dir, settings)
        write_evidence(run_dir, evidence)  # the snapshot a resumed run reads
        progress = progress or Progress()
        progress.note(f"run {run_id}: harness {settings.run.harness}, env {settings.run.env}, "
                      f"model {settings.run.model}, budget {settings.run.budget:g}"
                      + (f", {len(evidence)} evidence trajectories" if evidence else ""))
        return _drive(settings, run_id, run_dir, {"run_id": run_id}, progress,
                      resume_hint=_resume_hint(command, run_id))


def resume_run(settings: Settings, run_id: str, progress: Progress | None = None, *,
               command: str | None = None) -> RunOutcome:
    saved, run_dir = load_run_settings(settings, run_id, "--resume")
    with run_lock(run_dir, run_id):
        said = f"resuming {run_id}" + ("; it keeps the settings it started with, not applied: " + ", ".join(
            diff) if (diff := not_applied(settings, saved)) else "")
        return _drive(saved, run_id, run_dir, None, progress or Progress(), resume_hint=_resume_hint(command, run_id),
                      announce=said)


def decide(settings: Settings, run_id: str, branch: str, decision: str, reason: str | None,
           progress: Progress | None = None, *, command: str | None = None) -> RunOutcome:
    """Answer a review interrupt (approve | reject) and let the run continue.

    One decision at a time per run: a second ``approve`` while one is being applied (another process)
    is refused, and the interrupt is re-read under the lock, so two approves never both drive the run.
    """
    saved, run_dir = load_run_settings(settings, run_id)
    with decision_lock(run_dir, run_id), run_lock(run_dir, run_id):  # the interrupt is re-read under both
        return _decide(saved, run_id, run_dir, branch, decision, reason, progress, command)


def _decide(saved: Settings, run_id: str, run_dir: Path, branch: str, decision: str, reason: str | None,
            progress: Progress | None, command: str | None = None) -> RunOutcome:
    pending = pending_reviews(saved, run_id, run_dir)
    branches = {c["branch"] for p in pending for c in p.get("candidates", [])}
    if not branches:
        raise InputError(run_id, "the run is not waiting for a review")
    if branch not in branches:
        raise InputError(branch, f"not awaiting review in {run_id} (awaiting: {', '.join(sorted(branches))})")
    decisions = {**{b: "reject" for b in branches}, branch: decision}
    if reason:
        decisions[f"{branch}#reason"] = reason
    return _drive(saved, run_id, run_dir, Command(resume=decisions), progress or Progress(),
                  resume_hint=_resume_hint(command, run_id))


def pending_reviews(settings: Settings, run_id: str, run_dir: Path) -> list[Any]:
    services = build_services(settings, run_dir, Progress(quiet=True), lazy=True)
    with open_checkpointer(settings.run.checkpointer, run_dir) as saver:
        graph = build_graph(services, saver, review=settings.run.review)
        snapshot = graph.get_state({"configurable": {"thread_id": run_id}})
        return [i.value for t in snapshot.tasks for i in t.interrupts]

