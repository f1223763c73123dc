"""The HTTP endpoints. Mutating endpoints need the bearer token; reads are open unless
`service.protect_reads` is set. Bad input answers 4xx with ``{"error": "..."}``."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path as FsPath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter, ValidationError, field_validator

from evoharness import __version__
from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind, TaskId
from evoharness.diagnosis.models import FailureClass
from evoharness.diagnosis.routing import Router
from evoharness.errors import HeldOutRequested, InputError
from evoharness.graph.runner import RUN_ID, runs_dir
from evoharness.harness_repo.review import Status as CandidateStatus
from evoharness.logging import get_logger
from evoharness.service.auth import require_token, require_token_for_reads
from evoharness.service.bad_request import not_json
from evoharness.traces import jsontext
from evoharness.traces.models import Trajectory
from evoharness.untrusted import control_character, some_keys

log = get_logger("evoharness.service")

RunId = Annotated[str, Path(pattern=RUN_ID)]
# the longest trajectory id POST /trajectories stores: the id is read back through GET /trajectories/{id}'s URL, and
# 512 characters percent-encoded (12 bytes each at most) stay under the 8 KiB request line of common proxies (nginx)
MAX_ID_CHARS = 512
# what ``untrusted.control_character`` finds (Cc, Zl, Zp, the bidi controls), as one pattern: the fast path checks
# every id of a batch with it (tests/service/test_service_bad_bodies.py holds the two to the same characters)
_ID_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

async def _limited_body(request: Request) -> bytes:
    """The request's body, read in chunks: 413 once over ``service.max_body_mb``, by its content-length or by what
    arrived (never more than the limit in memory, with or without a content-length)."""
    cfg = request.app.state.settings.service
    limit = int(cfg.max_body_mb * 1024 * 1024)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body over service.max_body_mb ({cfg.max_body_mb:g} MiB)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"body over service.max_body_mb ({cfg.max_body_mb:g} MiB)")
        chunks.append(chunk)
    return b"".join(chunks)


class _UniqueKeysRequest(Request):
    """A request whose body (read by FastAPI for a body model) is bounded as POST /trajectories' is (413 over
    ``service.max_body_mb``: these routes read whatever came, a 2 MiB body under a 1 MiB limit was read whole, then
    422) and whose JSON refuses an object that holds a key twice (``jsontext.unique_keys``): FastAPI's ``json.loads``
    kept the last, so `{"reason": "a", "reason": "b"}` was taken as "b" whatever a proxy or an audit log in front of
    the service had read. Parsed by ``jsontext.loads``, as every body of the service is. The ``DuplicateKey``
    becomes FastAPI's 400 'error parsing the body', which the app answers as a 422 naming the key
    (``bad_request.not_json``); the 413 is an HTTPException, which FastAPI passes on."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            self._body = await _limited_body(self)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            # read as POST /trajectories reads its body: half a UTF-16 surrogate pair is U+FFFD (a task id cut so
            # is stored so, and an export asks for it by the id it was sent under), a key twice is refused, and the
            # collector is held (``jsontext.loads``); until 2026-12-06 a json.loads of its own kept the half pair
            self._json = jsontext.loads(await self.body(), unique=True)
        return self._json


class _UniqueKeysRoute(APIRoute):
    def get_route_handler(self):
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(_UniqueKeysRequest(request.scope, request.receive))

        return route_handler


public = APIRouter()
reads = APIRouter(dependencies=[Depends(require_token_for_reads)])
writes = APIRouter(dependencies=[Depends(require_token)], route_class=_UniqueKeysRoute)


def _state(request: Request):
    return request.app.state


def _known_run(request: Request, run_id: str) -> None:
    if not (runs_dir(request.app.state.settings) / run_id / "settings.json").is_file():
        raise HTTPException(404, f"no such run: {run_id}")


# -- health and metrics -------------------------------------------------------------------------
@public.get("/health")
def health(request: Request) -> dict[str, Any]:
    s = _state(request)
    # auto_runs: the loop starts and resumes runs by itself (off under --no-loop); worker_alive: the one
    # worker thread, which also applies review decisions, POST /runs and the training-queue sweep
    return {"status": "ok", "version": __version__, "auto_runs": s.settings.service.loop,
            "worker_alive": s.daemon.alive, "current_run": s.daemon.current_run,
            "last_error": s.daemon.last_error, "auth": s.token is not None}


@reads.get("/metrics")
def metrics(request: Request) -> Response:
    return Response(generate_latest(_state(request).registry), media_type=CONTENT_TYPE_LATEST)


# -- runs ---------------------------------------------------------------------------------------
@reads.get("/runs")
def list_runs(request: Request) -> dict[str, Any]:
    from evoharness.service.runs import list_runs as runs

    s = _state(request)
    return {"current": s.daemon.current_run, "runs": runs(s.settings, s.daemon)}


@reads.get("/runs/{run_id}")
def get_run(request: Request, run_id: RunId) -> dict[str, Any]:
    from evoharness.service.daemon import STARTING
    from evoharness.service.runs import run_view

    s = _state(request)
    if s.daemon.run_phase(run_id) == STARTING:  # accepted by POST /runs; the loop has not recorded it yet
        return {"run_id": run_id, "phase": STARTING, "status": None}
    _known_run(request, run_id)
    return run_view(s.settings, s.daemon, run_id)


@reads.get("/runs/{run_id}/rounds")
def get_rounds(request: Request, run_id: RunId) -> dict[str, Any]:
    from evoharness.service.runs import run_state

    _known_run(request, run_id)
    s = _state(request)
    state, _ = run_state(s.settings, s.daemon, run_id)
    return {"run_id": run_id, "rounds": state.get("rounds", [])}


@reads.get("/runs/{run_id}/report", response_class=HTMLResponse)
def run_report(request: Request, run_id: RunId) -> HTMLResponse:
    """The run's report (as `evoharness report`), rendered now; its PNGs are under /runs/{id}/report/."""
    _known_run(request, run_id)
    try:
        html = _state(request).reports.render(run_id)
    except InputError as e:  # a run that has measured nothing yet
        raise HTTPException(409, str(e)) from None
    return HTMLResponse(html)


@reads.get("/runs/{run_id}/report/{name}")
def run_report_file(request: Request, run_id: RunId, name: str) -> Response:
    """A file (PNG, report.md, report.html) of the run's last rendered report."""
    _known_run(request, run_id)
    found = _state(request).reports.file(run_id, name)
    if found is None:
        raise HTTPException(404, f"no report file {name!r} for {run_id} (GET /runs/{run_id}/report renders it)")
    content, media_type = found
    return Response(content, media_type=media_type)


class NewRun(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str | None = Field(None, pattern=RUN_ID, description="id of the new run (default: generated)")


@writes.post("/runs", status_code=202)
def start_run(request: Request, body: NewRun = None) -> dict[str, Any]:  # type: ignore[assignment]
    # None only without a body: FastAPI validates a body it read, and `null` is not a NewRun (422, as a list is)
    try:
        run_id = _state(request).daemon.request_run(body.run_id if body else None)
    except InputError as e:  # the id exists, or another run is active: the service's state, not the body
        raise HTTPException(409, str(e)) from None
    return {"run_id": run_id, "status": "starting"}


@writes.post("/runs/{run_id}/resume", status_code=202)
def resume_run(request: Request, run_id: RunId) -> dict[str, Any]:
    _known_run(request, run_id)
    try:
        _state(request).daemon.request_resume(run_id)
    except InputError as e:  # the run is done, or its saved settings cannot be read: its state, not the request
        raise HTTPException(409, str(e)) from None
    return {"run_id": run_id, "status": "resuming"}


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    candidate: str = Field(min_length=1, description="the candidate branch awaiting review")
    reason: str | None = Field(None, max_length=2000)

    @field_validator("reason")
    @classmethod
    def _one_line(cls, reason: str | None) -> str | None:
        if reason is not None and (ch := control_character(reason)) is not None:
            raise ValueError(f"a control character ({ch}) in it: a reason is one line of text")
        return reason

    @field_validator("candidate")
    @classmethod
    def _branch_name(cls, candidate: str) -> str:
        # a candidate not awaiting review is named in the 409: one holding a newline made that error two lines
        # (scripts/fuzz_service.py, once its decisions went to a run waiting for review); no branch holds one
        if (ch := control_character(candidate)) is not None:
            raise ValueError(f"a control character ({ch}) in it: a candidate is a branch name")
        return candidate


def _decide(request: Request, run_id: str, body: Decision, decision: str) -> dict[str, Any]:
    _known_run(request, run_id)
    try:
        decisions = _state(request).daemon.decide(run_id, body.candidate, decision, body.reason)
    except InputError as e:
        raise HTTPException(409, str(e)) from None
    return {"run_id": run_id, "candidate": body.candidate, "decision": decision, "decisions": decisions,
            "status": "continuing"}


@writes.post("/runs/{run_id}/approve", status_code=202)
def approve(request: Request, run_id: RunId, body: Decision) -> dict[str, Any]:
    return _decide(request, run_id, body, "approve")


@writes.post("/runs/{run_id}/reject", status_code=202)
def reject(request: Request, run_id: RunId, body: Decision) -> dict[str, Any]:
    return _decide(request, run_id, body, "reject")


# -- candidates -------------------------------------------------------------------------------------
def _repo(request: Request):
    from evoharness.harness_repo.repo import HarnessRepo

    settings = _state(request).settings
    path = FsPath(settings.run.harness)
    if not (path / ".git").exists():
        return None
    return HarnessRepo(path, settings.harness_repo)


def _verdict(hr, commit: str) -> dict[str, Any] | None:
    found = hr.verdict_of(commit)
    return None if found is None else {"note_status": found[0], **found[1].model_dump(mode="json")}


@reads.get("/candidates")
def candidates(request: Request, status: CandidateStatus | None = None, diff: bool = True) -> dict[str, Any]:
    from evoharness.harness_repo.review import list_candidates

    hr = _repo(request)
    if hr is None:
        return {"harness": str(_state(request).settings.run.harness), "main": None, "candidates": []}
    out = []
    for info in list_candidates(hr):
        if status and info.status != status:
            continue
        row = info.model_dump(mode="json")
        row["verdict_detail"] = _verdict(hr, info.commit)
        if diff:
            row["diff"] = hr.diff(info.branch)
        out.append(row)
    return {"harness": str(hr.path), "main": hr.main_head(), "candidates": out}


def _as_sent(request: Request, value: str) -> str:
    """A ``{name:path}`` parameter as the URL sent it: the route's pattern ends in ``$``, which matches before a final
    newline, so ``/trajectories/abc%0A`` came as ``abc`` and ``/candidates/candidate/r1-x%0A`` as that candidate."""
    return value + "\n" if request.scope["path"].endswith("\n") else value


@reads.get("/candidates/{branch:path}")
def candidate(request: Request, branch: str) -> dict[str, Any]:
    from evoharness.harness_repo.review import list_candidates

    branch = _as_sent(request, branch)
    hr = _repo(request)
    info = next((i for i in list_candidates(hr) if i.branch == branch), None) if hr else None
    if info is None:
        raise HTTPException(404, f"no such candidate: {branch!r}" if control_character(branch) else
                            f"no such candidate: {branch}")
    cand = hr.candidate(branch)
    return {**info.model_dump(mode="json"), **cand.model_dump(mode="json"),
            "verdict_detail": _verdict(hr, info.commit), "diff": hr.diff(branch)}


# -- ingestion ---------------------------------------------------------------------------------------
def _field(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "record"


def _validate(records: list[Any]) -> tuple[list[Trajectory], list[dict[str, Any]]]:
    good, errors = [], []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            errors.append({"index": i, "field": "record", "error": "not a JSON object"})
            continue
        try:
            t = Trajectory.model_validate(rec)
        except ValidationError as e:
            first = e.errors()[0]
            tid = rec.get("id") if isinstance(rec.get("id"), str) else None
            errors.append({"index": i, "field": _field(first["loc"]), "error": first["msg"],
                           "id": tid if tid is None or len(tid) <= MAX_ID_CHARS else tid[:60] + "..."})
            continue
        if (e := _id_error(i, t)) is not None:
            errors.append(e)
        else:
            good.append(t)
    return good, errors


def _id_error(i: int, t: Trajectory) -> dict[str, Any] | None:
    """Record ``i``'s error when its id is longer than ``MAX_ID_CHARS`` (the id in it cut to 60 characters) or holds
    a control character (``untrusted.control_character``: a newline, NUL, escape, line break or bidi control). An id
    holding a newline could not be read back: GET /trajectories/{id}'s pattern stops at a newline."""
    if len(t.id) > MAX_ID_CHARS:
        return {"index": i, "field": "id", "id": t.id[:60] + "...",
                "error": f"{len(t.id):,} characters; at most {MAX_ID_CHARS} (the id is read back in the URL of "
                         "GET /trajectories/{id})"}
    if (ch := control_character(t.id)) is not None:
        return {"index": i, "field": "id", "id": t.id,
                "error": f"a control character ({ch}) in it: an id is read back in the URL of GET /trajectories/{{id}}"}
    return None


def _record_errors(request: Request, errors: list[dict[str, Any]], records: list[Any] | None = None, *,
                   where: str = "record {}") -> JSONResponse:
    """422 naming the first invalid record (``where``, formatted with its index), with every one's error (nothing
    stored)."""
    e = errors[0]
    return _invalid(request, f"{where.format(e['index'])}: {e['field']}: {e['error']}"
                    + (f" ({len(errors)} invalid records; nothing stored)" if len(errors) > 1 else " (nothing stored)")
                    + (_format_hint(records) if records is not None else ""), errors)


@functools.cache
def _batch_adapter() -> TypeAdapter:
    return TypeAdapter(list[Trajectory])


def _parse_fast(body: bytes) -> list[Trajectory] | None:
    """The whole batch parsed and validated in one go; None when anything is wrong, an object that holds a key twice
    included (the slow path names the key). Parsed by ``jsontext.loads(unique=True)`` (pydantic-core's own JSON
    parser keeps the last of a key given twice and cannot be told otherwise), then validated as Python
    objects, as the slow path validates: the two together cost what ``validate_json`` alone did (1,000 trajectories,
    3 MB: 131 vs 128 ms CPU)."""
    try:
        good = _batch_adapter().validate_python(jsontext.loads(body, unique=True))
    except (ValidationError, ValueError, RecursionError):
        return None
    return None if any(len(t.id) > MAX_ID_CHARS or _ID_CONTROL.search(t.id) for t in good) else good


def _invalid(request: Request, message: str, errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    """422 for a batch: ``errors`` per record, else the body's one problem (as every endpoint answers a body)."""
    _state(request).metrics.ingest_requests.labels("invalid").inc()
    errors = errors or [{"field": "body", "error": message}]
    return JSONResponse({"error": message, "errors": errors[:50]}, status_code=422)


@writes.post("/trajectories")
async def ingest(request: Request, format: Annotated[str, Query(
        description="canonical (default: a JSON list of canonical trajectories), auto (detected), or any "
                    "format `evoharness import` reads, e.g. openai for tau-bench records")] = "canonical",
        source: Annotated[str | None, Query(
            pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
            description="with a format other than canonical: the name imported ids derive from, as a "
                        "file's name does for `evoharness import` (default: a hash of the body)")] = None) -> Any:
    s = _state(request)
    t0 = time.perf_counter()
    cfg = s.settings.service
    limit = int(cfg.max_body_mb * 1024 * 1024)
    body = await _limited_body(request)  # never more than the limit in memory, even without a content-length
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        body = await run_in_threadpool(_inflated, body, encoding, limit, cfg.max_body_mb)  # not on the event loop
        if isinstance(body, str):
            return _invalid(request, body)
    if format != "canonical":
        return await _ingest_imported(request, body, format, source, t0)
    if s.ingest_pool is not None:  # service.workers > 1: parsed, labelled and committed in a worker process
        done = await s.ingest_pool.ingest(body, cfg.max_batch)
        if done is not None:
            received, stored, conflicts = done
            return _stored(request, received, stored, t0, conflicts)
    else:
        good = await run_in_threadpool(_parse_fast, body)
        if good is not None and len(good) <= cfg.max_batch:
            return await _store(request, good, t0, body)
    try:  # the slow path finds and names what is wrong; half a surrogate pair read as U+FFFD, as `import` reads it
        records = jsontext.loads(body, unique=True)
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, a >4,300-digit integer, nested too deeply
        if isinstance(e, json.JSONDecodeError | UnicodeDecodeError) and (n := _json_lines(body)) is not None:
            # a run's trajectories.jsonl, what `evoharness import` writes
            return _invalid(request, f"body is JSON Lines ({n} records, one a line), not a JSON list: send the "
                            "list, or these lines with ?format=auto")
        return _invalid(request, not_json(e, "a JSON list of canonical trajectories")
                        or f"body is not usable JSON: {(str(e).splitlines() or [type(e).__name__])[0][:200]}")
    if isinstance(records, dict):  # a trajectory: wrap it; one of another format (ATIF's one object a file): import it
        from evoharness.traces.importers import record_format

        fmt = record_format(records)
        said = (": send it as a list of one, [{...}]" if fmt == "canonical" else _format_hint([records]) if fmt
                else f" (keys: {some_keys(records)})")
        return _invalid(request, "body must be a JSON list of canonical trajectories; it is one object" + said)
    if not isinstance(records, list):
        return _invalid(request, "body must be a JSON list of canonical trajectories")
    if len(records) > cfg.max_batch:
        return _invalid(request, f"{len(records)} trajectories in one request; at most {cfg.max_batch} "
                        "(service.max_batch)")
    good, errors = await run_in_threadpool(_validate, records)
    if errors:
        return _record_errors(request, errors, records)
    return await _store(request, good, t0, body)


def _inflated(body: bytes, encoding: str, limit: int, limit_mb: float) -> bytes | str:
    """A ``Content-Encoding: gzip`` body inflated, never past ``limit`` bytes (a small body must not inflate into
    gigabytes: 413); a body that is not gzip, or another encoding, is what is wrong with it (str). Zero bytes after
    the last member are padding (a block-padded write), ignored as ``gzip -d`` and Python's gzip module do.
    Called in a worker thread: inflating up to max_body_mb is CPU work that would hold up every other request."""
    import zlib

    if encoding not in ("gzip", "x-gzip"):
        return (f"body is sent with Content-Encoding: {encoding[:40]}, which this service does not read: send it "
                "uncompressed or as gzip")
    out, rest = bytearray(), body
    while True:  # one gzip member after another (`cat a.gz b.gz` is gzip too)
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as e:
            return f"body is not gzip data (Content-Encoding: {encoding}): {e}"
        if len(out) > limit:
            raise HTTPException(413, f"body over service.max_body_mb ({limit_mb:g} MiB) once inflated "
                                     f"(Content-Encoding: {encoding})")
        if not inflater.eof:
            return (f"body is not gzip data (Content-Encoding: {encoding}): it ends before its gzip stream does "
                    "(cut short?)")
        rest = inflater.unused_data
        if not rest.strip(b"\0"):  # the end, or zero padding after the last member
            return bytes(out)


def _json_lines(body: bytes) -> int | None:
    """How many records, when ``body`` is JSON Lines of objects (blank lines allowed); else None. Lines end at a
    newline only, as the store's reader splits them (str.splitlines broke a string holding U+2028 or U+0085)."""
    try:
        lines = [jsontext.loads(x) for x in body.split(b"\n") if x.strip()]
    except (ValueError, RecursionError):
        return None
    return len(lines) if len(lines) > 1 and all(isinstance(x, dict) for x in lines) else None


def _format_hint(records: list[Any]) -> str:
    from evoharness.traces.importers import record_format

    fmt = record_format(records[0]) if records else None
    if fmt is None or fmt == "canonical":
        return ""
    return f"; these look like {fmt} records: POST /trajectories?format={fmt} (or format=auto) imports them"


async def _ingest_imported(request: Request, body: bytes, fmt: str, source: str | None, t0: float) -> Any:
    """A body in another format: converted by the importer `evoharness import` uses, then stored."""
    from evoharness.traces.importers import load_bytes

    max_batch = _state(request).settings.service.max_batch
    source = source or f"body-{hashlib.sha256(body).hexdigest()[:12]}"
    try:
        good = await run_in_threadpool(load_bytes, body, None if fmt == "auto" else fmt, source=source,
                                       limit=max_batch)
    except InputError as e:
        return _invalid(request, f"{e} (nothing stored)")
    if errors := [e for i, t in enumerate(good) if (e := _id_error(i, t)) is not None]:
        # the importer's trajectories, not the body's records: LangSmith runs and OTLP spans are grouped into
        # trajectories, so trajectory 1 came from run 15 (it was told as 'record 1', a record that is fine)
        return _record_errors(request, errors, where=f"imported trajectory {{}} of {len(good)}")
    return await _store(request, good, t0)


async def _store(request: Request, good: list[Trajectory], t0: float, body: bytes | None = None) -> dict[str, Any]:
    """Store ``good``; ``body``: the canonical JSON list they were read from (its lossily read records are told
    apart by what was sent, ``sent_digests``), None for a body an importer converted."""
    ingest = _state(request).ingest
    stored, conflicts = await run_in_threadpool(
        lambda: ingest.add(good, sent=None if body is None else sent_digests(body, len(good))))
    return _stored(request, len(good), stored, t0, conflicts)


def sent_digests(body: bytes, n: int) -> dict[int, str] | None:
    """For the records of a canonical JSON list read lossily (a lone surrogate escape read as U+FFFD: ``jsontext``),
    index -> the SHA-256 of the record as sent (``json.dumps`` of it with its lone surrogates, keys sorted, ASCII);
    None when none was (the usual body: one regex search). Two records that differ only in a lone surrogate read
    alike; with this digest the second is a conflict, not a duplicate, and a record sent again is a duplicate."""
    if not jsontext.may_hold_lone_surrogate(body):
        return None  # none, or only pairs (an emoji as json.dumps' ensure_ascii writes it): nothing read lossily
    try:
        with jsontext.collection_held:
            sent = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(sent, list) or len(sent) != n:
        return None
    out = {}
    for i, record in enumerate(sent):
        text = json.dumps(record, ensure_ascii=True, sort_keys=True)
        if jsontext.lone_surrogates_replaced(text) != text:
            out[i] = hashlib.sha256(text.encode()).hexdigest()
    return out or None


def _stored(request: Request, received: int, stored: int, t0: float,
            conflicts: list[tuple[int, str]] = ()) -> dict[str, Any]:
    """The answer for a committed batch (acknowledged only now: it is durable). 200 even with conflicts: the rest of
    the batch is stored and durable, and a retry of the whole batch would store nothing more; the conflicts (a record
    whose id is stored with other content, not stored) are listed by index and id, counted and logged."""
    s = _state(request)
    dup = received - stored - len(conflicts)
    s.metrics.ingest_requests.labels("ok").inc()
    s.metrics.ingest_duplicates.inc(dup)
    s.metrics.ingest_seconds.observe(time.perf_counter() - t0)
    if conflicts:
        s.metrics.ingest_conflicts.inc(len(conflicts))
        log.warning("service.ingest_conflicts", conflicts=len(conflicts), received=received, stored=stored,
                    ids=[tid for _, tid in conflicts[:10]])
    if stored:
        s.daemon.wake()
    return {"received": received, "stored": stored, "duplicates": dup,
            "conflicts": [{"index": i, "id": tid, "error": "id stored already with other content; not stored"}
                          for i, tid in conflicts]}


@reads.get("/trajectories/{trajectory_id:path}")
def get_trajectory(request: Request, trajectory_id: str) -> dict[str, Any]:
    trajectory_id = _as_sent(request, trajectory_id)
    t = _state(request).ingest.get(trajectory_id)
    if t is None:
        raise HTTPException(404, f"no ingested trajectory {trajectory_id!r}")
    return t.model_dump(mode="json")


@reads.get("/composition")
def composition(request: Request, last: Annotated[int | None, Query(ge=1)] = None) -> dict[str, Any]:
    s = _state(request)
    comp = s.ingest.composition(last=last)
    rec = Router.from_config(s.settings.diagnosis).recommend(comp)  # the lever and ceiling `diagnose` gives
    return {**comp.to_dict(), "table": comp.table(), "recommendation": rec.model_dump(), **s.ingest.stats()}


# -- dataset export ----------------------------------------------------------------------------------
class ExportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: ExportFormat = ExportFormat.openai
    source: SourceKind = Field(SourceKind.queue, description="queue | healthy (ingested) | all (ingested + queue)")
    name: str | None = Field(None, pattern=RUN_ID, description="directory name under <home>/exports")
    render_under: Literal["seed", "evolved", "trajectory"] = "evolved"
    placebo: StrictBool = False  # "yes" wrote a placebo set
    # numbers as numbers: `"max_per_task": true` exported one record a task and `"min_score": true` only runs scoring 1
    # (pydantic's lax mode reads a boolean, or a string such as "0.5", as the number)
    min_score: float | None = Field(None, ge=0, le=1, strict=True)
    max_per_task: StrictInt | None = Field(None, ge=1)
    tasks: list[TaskId] | None = None
    classes: list[FailureClass] | None = None
    keep_duplicates: StrictBool = Field(False, description="write records identical to an earlier one (default: "
                                        "skipped)")
    skip_text_with_calls: StrictBool = Field(False, description="skip a record with an assistant reply that holds "
                                             "text and tool calls (`dataset export --skip-text-with-calls`)")
    val_fraction: float | None = Field(None, gt=0, lt=1, strict=True, description="write a train and a validation "
                                       "split by task, this fraction of the tasks in validation (`dataset export "
                                       "--val-fraction`)")
    split_seed: StrictInt | None = Field(None, description="which tasks val_fraction takes (default 0); only with "
                                         "val_fraction")
    max_tokens: StrictInt | None = Field(None, ge=1, description="skip a record longer than this many tokens, "
                                         "counted with the datasets.tokenizer setting's tokenizer, else approximately "
                                         "(`dataset export --max-tokens`)")


def _tokenizer(path: str):
    """``datasets.tokenizer``'s counter (``ChatTemplateTokens``), kept while the directory's files are the ones it was
    loaded from (loading one takes about a second): a tokenizer replaced in place, or a link re-pointed to another
    snapshot, is loaded again at the next export, and one removed or broken is that export's 409, as at the first;
    until the twenty-second session the first load was kept for the process's life, and the service counted with a
    tokenizer that was no longer there."""
    from evoharness.datasets.tokens import tokenizer_files

    return _loaded_tokenizer(path, tokenizer_files(path))


@functools.lru_cache(maxsize=2)
def _loaded_tokenizer(path: str, files: object):
    from evoharness.datasets.tokens import ChatTemplateTokens

    return ChatTemplateTokens(path, option="datasets.tokenizer")  # a load that raises is not kept: tried again


@writes.post("/datasets/export")
def export(request: Request, body: ExportRequest) -> dict[str, Any]:
    from evoharness.datasets.export import export_dataset
    from evoharness.datasets.models import SERVICE_NAMES, RenderedPrompt
    from evoharness.datasets.prompts import resolve_prompt
    from evoharness.datasets.queue import queue_from_settings

    if body.split_seed is not None and body.val_fraction is None:  # as `dataset export --split-seed` alone
        raise HTTPException(422, f"split_seed {body.split_seed}: it chooses the tasks of val_fraction, which was "
                            "not given")
    s = _state(request)
    settings = s.settings
    name = body.name or f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{body.format.value}{'-placebo' if body.placebo else ''}"
    out = FsPath(settings.home) / "exports" / name
    harness = FsPath(settings.run.harness)
    prompt = RenderedPrompt(under="trajectory")
    if body.render_under != "trajectory" and (harness / ".git").exists():
        try:
            prompt = resolve_prompt(str(harness), body.render_under)
        except InputError as e:  # no commit, no prompt file, one over the size limit: the harness's state, not the body
            raise HTTPException(409, str(e)) from None
    try:
        filters = ExportFilters(min_score=body.min_score, max_per_task=body.max_per_task, tasks=body.tasks,
                                classes=body.classes, skip_text_with_calls=body.skip_text_with_calls,
                                max_tokens=body.max_tokens)
    except ValidationError as e:
        raise HTTPException(422, str(e).splitlines()[0]) from None
    cfg = settings.datasets
    try:  # the operator's tokenizer (a body names no path on the server), kept while its files stay the same
        tokens = _tokenizer(cfg.tokenizer) if cfg.tokenizer is not None else None
    except InputError as e:  # missing, no tokenizer, no chat template, no transformers: the server's setting
        raise HTTPException(409, str(e)) from None
    try:
        summary = export_dataset(
            out, fmt=body.format, source=body.source,
            trajectories=s.ingest if body.source != SourceKind.queue else None,
            queue=queue_from_settings(settings) if body.source != SourceKind.healthy else None,
            filters=filters, prompt=prompt, placebo=body.placebo, placebo_seed=cfg.placebo_seed,
            placebo_window=cfg.placebo_window, declared_heldout=cfg.heldout_tasks, diagnosis_cfg=settings.diagnosis,
            keep_duplicates=body.keep_duplicates, val_fraction=body.val_fraction, split_seed=body.split_seed or 0,
            names=SERVICE_NAMES, tokens=tokens)  # errors name the body's fields ("tasks"), not the CLI's ("--task")
    except InputError as e:
        if isinstance(e, HeldOutRequested):
            raise HTTPException(422, str(e)) from None  # the request asked for held-out tasks
        if e.source == SERVICE_NAMES.val_fraction:  # fewer than two tasks to split: the request cannot be met
            raise HTTPException(422, str(e)) from None
        raise  # an export directory holding other files, a queue that cannot be opened: 409
    return {"path": str(out.resolve()), "records": summary.records, "files": summary.files,
            "format": summary.format.value, "source": summary.source.value, "placebo": summary.placebo,
            "tasks": len(summary.tasks), "classes": summary.classes,
            "heldout_tasks_excluded": summary.heldout_tasks_excluded, "skipped": summary.skipped,
            # tasks held out only because a run of theirs is a held-out task's under another id (TaskLinks)
            "heldout_linked_tasks": summary.heldout_linked_tasks,
            "duplicate_records": summary.duplicate_records,
            # the ingest store's labels reused (digest and fingerprint matched) and the runs labelled again, by reason
            "labels_reused": summary.labels_reused, "labels_relabelled": summary.labels_relabelled,
            "prompt_fallbacks": summary.prompt_fallbacks, "prompt_limit_hits": summary.prompt_limit_hits,
            "prompt_render_unjailed": summary.prompt_render_unjailed,
            "env_tools_past_limit": summary.env_tools_past_limit,
            # a typo in `tasks` wrote an empty export with nothing to say why (`dataset export --task` warns)
            "tasks_without_records": [t for t in dict.fromkeys(body.tasks or ()) if not summary.tasks.get(t)],
            "validation": summary.validation.model_dump(mode="json") if summary.validation is not None else None,
            "token_lengths": summary.token_lengths.model_dump(mode="json")}
