"""Fuzz every service endpoint that takes a JSON body with mutated values: 4xx with one JSON error line, never a 500.

    PYTHONPATH=. .venv/bin/python scripts/fuzz_service.py                    # 60 s, every endpoint in turn
    PYTHONPATH=. .venv/bin/python scripts/fuzz_service.py --budget 300 --seed 3 --path /datasets/export

The endpoints and their body models come from the app itself (``create_app``: every POST route, with the pydantic
model FastAPI validates its body by), never a hand list, so an endpoint added later is fuzzed the day it is added;
``POST /trajectories``, which reads its body itself, gets a list of canonical trajectories. Each case starts from a
working body (``WORKING``, by field name; a field not named there keeps its default) and keeps its keys: one or two
values, at any depth (an item of a list field, a trajectory's message or usage count), are replaced by a hostile one
(``VALUES``: another JSON type, huge, negative, NaN and Infinity, a 5,000-digit integer, 1e999, nested 1,000 and
100,000 deep, a lone surrogate escape, a NUL, a 100,000-item list, a string past ``service.max_body_mb``), or a
key is added twice. A fifth of the cases send the working body as it is. ``FORMAT_SHARE`` of the ``POST
/trajectories`` cases send another format's file instead (``?format=`` its format, auto, or another's name; one of
``fuzz_importers``' samples, none of a held-out set, mutated as that fuzz mutates it: a field at any depth, bytes
flipped, the file cut short).

The service runs in-process (``TestClient``, no loop: runs start only when ``POST /runs`` asks) on a fresh home
with a harness repo, rollouts ingested and enqueued, and a run it was asked to start. Its runs end at once (no round
fits their budget), so ``POST /runs/{run_id}/approve`` and ``reject`` go to a second service (``Reviews``: its own
home and harness) whose run waits for review with candidates: a working decision names one of them, and once a
decision is taken the next case starts (and waits for) another such run, from the harness as it was (an approved
candidate merged into main would leave the next run nothing to fix). Before, every decision the fuzz sent was
refused, 409 'not waiting for a review' (868 of 871 in 40 s; 3 were 404): the decision itself was never reached.
A failure is: a status of 500 or more; a 4xx whose body is not ``{"error": "one line"}`` (``errors``: a list, on
422); a 2xx for a value the body model's JSON schema does not allow (a string where it says integer, NaN where it
says number); a 2xx ingest whose trajectory ``GET /trajectories/{id}`` does not give back, or gives back with a
score outside 0..1, or whose id is over ``MAX_ID_CHARS`` or holds a control character; a 2xx decision for a
candidate that was not awaiting review, or whose ``decisions`` do not say it and reject the others; a refused
request that changed what the service holds (the ingested count, the export directories, the runs, the candidates a
waiting run awaits); a request over ``--slow`` seconds (a wedged service: the script stops there); ``GET /health``
not 200 after a case. Every failure is printed with its body (cut to 300 characters); exit 1 if any.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import copy
import json
import math
import os
import random
import re
import sys
import tempfile
import time
import traceback
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel

from evoharness.cli import main as cli_main
from evoharness.config import Settings
from evoharness.service.app import create_app
from evoharness.service.routes import MAX_ID_CHARS
from evoharness.untrusted import control_character

TOKEN = "fuzz-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
MAX_BODY_MB = 1
SLOW_S = 30.0
WORKING_SHARE = 0.2  # cases that send the working body unchanged
FORMAT_SHARE = 0.4  # POST /trajectories cases that send another format's file (?format=NAME or auto)
# the importer fuzz's samples a ?format= body is made from: none of a held-out set (AgentRx's Magentic-One runs,
# Who&When's Hand-Crafted logs), none over the body limit
HELD_OUT = ("agentrx_magentic_one", "Hand-Crafted")

# Hostile values as JSON text (NaN, Infinity, a long integer and deep nesting cannot be made by json.dumps), each with
# its JSON kind for the schema check: None when no JSON schema allows it (not JSON at all, as Python reads it).
VALUES: list[tuple[str, str | None]] = [
    ("null", "null"), ("true", "boolean"), ("false", "boolean"), ("0", "integer"), ("-1", "integer"),
    ("-0", "integer"), ("1.5", "number"), ("-1.5", "number"), ("1e308", "number"), ("-1e308", "number"),
    ("1e-400", "number"), ("1e999", None), ("-1e999", None), ("NaN", None), ("Infinity", None), ("-Infinity", None),
    ("9" * 30, "integer"), ("-" + "9" * 30, "integer"), ("9" * 5000, "integer"), ("2.0", "number"),
    ('""', "string"), ('" "', "string"), ('"x"', "string"), ('"\\u0000"', "string"), ('"\\ud800"', "string"),
    ('"a\\nb"', "string"), ('"0.5"', "string"), ('"1"', "string"), ('"true"', "string"), ('"null"', "string"),
    ('"' + "x" * 100_000 + '"', "string"), ('"' + "x" * (MAX_BODY_MB << 20) + '"', "string"),
    ('"../../etc"', "string"), ('"\\u202e"', "string"), ('"F9"', "string"),
    ("[]", "array"), ("{}", "object"), ("[null]", "array"), ("[[]]", "array"), ('{"a": {}}', "object"),
    ('["x", 1, null]', "array"), ("[" * 1000 + "]" * 1000, "array"), ("[" * 100_000 + "]" * 100_000, "array"),
    ('{"a":' * 10_000 + "1" + "}" * 10_000, "object"), ("[" + ",".join(["0"] * 100_000) + "]", "array"),
    ("[" + ",".join(['"a"'] * 100_000) + "]", "array"),
]

# Working values by body field name (a field not here keeps its default); RUN is the run the case may answer.
WORKING = {"run_id": None, "candidate": "candidate/r0-fuzz", "reason": "fuzzed", "format": "openai",
           "source": "all", "name": None, "render_under": "trajectory", "placebo": False, "min_score": 0.0,
           "max_per_task": 2, "tasks": ["contact_0", "contact_1"], "classes": ["F4", "F1"], "keep_duplicates": False,
           "skip_text_with_calls": False, "val_fraction": 0.5, "split_seed": 1, "max_tokens": 100_000}


@dataclass
class Endpoint:
    path: str  # with {run_id} filled in
    model: type | None  # the body model; None: /trajectories (a list of canonical trajectories)


@dataclass
class Case:
    endpoint: str
    body: bytes
    changed: list[str] = field(default_factory=list)  # "field: value" of what was changed
    kinds: list[tuple[str, str | None]] = field(default_factory=list)  # (field, JSON kind of the value put there)
    status: int | None = None
    answer: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def endpoints(app, run_id: str) -> list[Endpoint]:
    """Every POST route of the app that takes a body: its body model, or None for /trajectories."""
    found = []
    for route in _routes(app.routes):
        if "POST" not in route.methods:
            continue
        path = route.path.replace("{run_id}", run_id)
        if route.body_field is not None:
            found.append(Endpoint(path, _model(route.body_field.field_info.annotation)))
        elif route.path == "/trajectories":
            found.append(Endpoint(path, None))
    return found


def _model(annotation) -> type:
    """The pydantic model of a body annotation (``NewRun | None`` is ``NewRun``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel))


@dataclass
class _Raised:
    """What a request that raised in the app is answered: a 500 whose text is the traceback."""

    trace: str
    status_code: int = 500

    @property
    def text(self) -> str:
        return self.trace.strip().splitlines()[-1] + "\n" + self.trace


def _routes(routes) -> list[APIRoute]:
    """The API routes, those of included routers too (FastAPI 0.165 lists an included router as one entry)."""
    out = []
    for route in routes:
        if isinstance(route, APIRoute):
            out.append(route)
        elif (router := getattr(route, "original_router", None)) is not None:
            out += _routes(router.routes)
    return out


# ---------------------------------------------------------------- the service and its workspace


# a run that waits for review with candidates (as tests/service/test_service_loop.py's): about 14 s to get there on
# two loaded cores
REVIEW_RUN = {"rollouts": 8, "max_rounds": 1, "review": True, "dev_limit": 8, "heldout_limit": 4}


def build_workspace(root: Path, review: bool = False) -> Settings:
    """A harness repo, rollouts (ingested later) and a queue of their content failures; the service's settings (with
    ``review``: runs that reach a review, ``REVIEW_RUN``, instead of runs that end at once)."""
    root.mkdir(parents=True, exist_ok=True)
    home = root / "home"
    old, os.environ["EVOHARNESS_HOME"] = os.environ.get("EVOHARNESS_HOME"), str(home)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            for argv in (["init", "h"],
                         ["rollout", "--harness", "h", "--env", "synthetic", "--tasks", "6", "--rollouts", "2",
                          "--out", "t.jsonl", "--sandbox", "inprocess"],
                         ["dataset", "enqueue", "t.jsonl"]):
                if cli_main(argv) != 0:
                    raise SystemExit(f"fuzz_service: building the workspace failed at {argv}")
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop("EVOHARNESS_HOME", None)
        else:
            os.environ["EVOHARNESS_HOME"] = old
    return Settings.model_validate({
        "home": str(home), "log_level": "error",
        "run": {"harness": str(root / "h"), "env": "synthetic", "model": "scripted:weak",
                **(REVIEW_RUN if review else {"rollouts": 1, "max_rounds": 1, "budget": 40, "review": True})},
        "service": {"loop": False, "max_body_mb": MAX_BODY_MB}, "sandbox": {"backend": "inprocess", "workers": 1},
        "roles": {"kind": "playbook"}})


def trajectories(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "t.jsonl").read_text().splitlines() if line.strip()]


class Service:
    """The app in-process; every request in one worker thread, so one that never ends is seen (``SLOW_S``)."""

    def __init__(self, settings: Settings, slow: float) -> None:
        self.settings = settings
        self.slow = slow
        # the app's exceptions reach request(), which answers them as a 500 carrying the traceback (the fuzz's
        # report says where it broke); a real server answers "Internal Server Error"
        self.client = TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=True)
        self.pool = concurrent.futures.ThreadPoolExecutor(1)
        self.asked: set[str] = set()  # the runs POST /runs accepted

    def __enter__(self) -> Service:
        self.client.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.client.__exit__(*exc)
        self.pool.shutdown(wait=False)

    def request(self, method: str, path: str, body: bytes | None = None):
        future = self.pool.submit(self.client.request, method, path, content=body, headers=AUTH)
        try:
            return future.result(self.slow)
        except concurrent.futures.TimeoutError:
            return None
        except Exception:  # noqa: BLE001 -- the app's own exception: a 500, with where it came from
            return _Raised(traceback.format_exc())

    def held(self) -> dict[str, Any]:
        """What a refused request must leave as it was: the ingested count, the export directories, the runs."""
        home = Path(self.settings.home)
        r = self.request("GET", "/composition")
        # the runs asked for earlier (202) are left out: the worker makes their directories when it begins them
        return {"ingested": r.json().get("total") if r is not None and r.status_code == 200 else None,
                "exports": sorted(p.name for p in (home / "exports").glob("*")),
                "runs": sorted(p.name for p in (home / "runs").glob("*") if p.is_dir() and p.name not in self.asked)}


class Reviews(Service):
    """The second service: its current run waits for review, and approve/reject cases are sent to it."""

    def __init__(self, settings: Settings, slow: float) -> None:
        super().__init__(settings, slow)
        self.n, self.run_id = 0, ""
        self.harness = Path(settings.run.harness)
        self.seed = self._git("rev-parse", "main")

    def __enter__(self) -> Reviews:
        super().__enter__()
        self.ready()
        return self

    def view(self) -> dict[str, Any]:
        r = self.request("GET", f"/runs/{self.run_id}") if self.run_id else None
        return r.json() if r is not None and r.status_code == 200 else {}

    def pending(self) -> list[str]:
        return sorted(p["branch"] for p in self.view().get("waiting_review") or [])

    def ready(self, timeout: float = 600.0) -> None:
        """A run waiting for review: the current one, or (once it ended, or at the start) a new one, waited for."""
        if self.run_id and self.view().get("phase") not in ("done", "stopped"):
            return
        self._git("reset", "--quiet", "--hard", self.seed)  # main as it was: the run finds the same flaws
        self.n += 1
        self.run_id = f"review-{self.n}"
        r = self.request("POST", "/runs", json.dumps({"run_id": self.run_id}).encode())
        if r is None or r.status_code != 202:
            raise SystemExit(f"fuzz_service: the review run was not started: {r and r.text}")
        self.asked.add(self.run_id)
        deadline = time.monotonic() + timeout
        while (phase := self.view().get("phase")) != "waiting_review":
            if phase in ("done", "stopped") or time.monotonic() > deadline:
                raise SystemExit(f"fuzz_service: review run {self.run_id} is {phase}, not waiting for a review: "
                                 f"{self.view()}")
            time.sleep(0.2)

    def held(self) -> dict[str, Any]:
        view = self.view()
        return {**super().held(), "review": [view.get("phase"), self.pending()]}

    def _git(self, *args: str) -> str:
        import subprocess

        return subprocess.run(["git", "-C", str(self.harness), *args], check=True, capture_output=True,
                              text=True).stdout.strip()


def decides(path: str) -> bool:
    return path.endswith(("/approve", "/reject"))


# ---------------------------------------------------------------- making a case


def working_body(ep: Endpoint, rng: random.Random, records: list[dict[str, Any]], n: int,
                 candidates: list[str] | None = None) -> Any:
    if ep.model is None:
        picked = copy.deepcopy(rng.sample(records, rng.randint(1, 3)))
        for i, t in enumerate(picked):
            t["id"] = f"fuzz-{n}-{i}"  # a new id: a working body is stored, not a duplicate
        return picked
    body = {}
    for name, info in ep.model.model_fields.items():
        if name == "run_id":
            body[name] = f"fuzz-run-{n}"
        elif name == "candidate" and candidates:
            body[name] = rng.choice(candidates)  # one awaiting review (the reviews' run)
        elif name == "name":
            body[name] = f"fuzz-export-{n}"
        elif name in WORKING and rng.random() < 0.6:
            body[name] = copy.deepcopy(WORKING[name])
        elif info.is_required():
            body[name] = WORKING.get(name, "x")
    if "val_fraction" not in body:
        body.pop("split_seed", None)  # split_seed alone is refused by design: not the case wanted
    return body


def format_samples(root: Path) -> list[tuple[str, Path]]:
    """(format, file) of every sample ``fuzz_importers`` mutates, held-out sets and files past the body limit left
    out; with the tau-bench records it derives (format openai)."""
    _importer_fuzz()
    import fuzz_importers

    (root / "formats").mkdir(exist_ok=True)
    fuzz_importers._derived_samples(root / "formats")
    return [(fmt, path) for fmt, paths in sorted(fuzz_importers.SAMPLES.items()) for path in paths
            if not any(h in str(path) for h in HELD_OUT) and path.stat().st_size < (MAX_BODY_MB << 20) * 0.9]


def _importer_fuzz() -> None:
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)  # fuzz_importers, beside this script


def format_case(rng: random.Random, samples: list[tuple[str, Path]]) -> Case:
    """A file of another format, mutated as the importer fuzz mutates it (``variant_bytes``), posted with
    ``?format=`` its format (or auto, or another format's name a tenth of the time each)."""
    from fuzz_importers import variant_bytes

    fmt, path = rng.choice(samples)
    raw = path.read_bytes()
    r = rng.random()
    said = "auto" if r < 0.1 else rng.choice(samples)[0] if r < 0.2 else fmt
    body = raw if rng.random() < WORKING_SHARE else variant_bytes(raw, path.suffix == ".jsonl", rng)
    return Case(f"/trajectories?format={said}", body, changed=[f"{fmt} file {path.name}, sent as {said}"])


def make_case(ep: Endpoint, rng: random.Random, records: list[dict[str, Any]], n: int,
              samples: list[tuple[str, Path]] | None = None, candidates: list[str] | None = None) -> Case:
    if ep.model is None and samples and rng.random() < FORMAT_SHARE:
        return format_case(rng, samples)
    body = working_body(ep, rng, records, n, candidates)
    case = Case(ep.path, b"")
    if rng.random() < WORKING_SHARE or not body:
        case.body = json.dumps(body).encode()
        return case
    _importer_fuzz()
    from fuzz_importers import _paths  # every path into a JSON value, as the importer fuzz walks a record

    holes: dict[str, str] = {}
    for k in range(rng.randint(1, 2)):
        paths = [p for p in _paths(body) if p]
        if ep.model is not None and rng.random() < 0.7:
            paths = [p for p in paths if len(p) == 1]  # a body model's own fields, most often
        path = rng.choice(paths)
        parent = body
        for p in path[:-1]:
            parent = parent[p]
        text, kind = rng.choice(VALUES)
        mark = f"__fuzz_{k}__"
        where = ".".join(map(str, path))
        if isinstance(parent[path[-1]], str) and parent[path[-1]].startswith("__fuzz_"):  # changed again: this wins
            holes.pop(json.dumps(parent[path[-1]]))
            kept = [i for i, (w, _) in enumerate(case.kinds) if w != where]
            case.kinds, case.changed = [case.kinds[i] for i in kept], [case.changed[i] for i in kept]
        holes[json.dumps(mark)] = text
        parent[path[-1]] = mark
        case.changed.append(f"{where}: {text[:40]}{'...' if len(text) > 40 else ''}")
        case.kinds.append((where, kind))
    raw = json.dumps(body)
    for mark, text in holes.items():
        raw = raw.replace(mark, text, 1)
    if rng.random() < 0.05 and ep.model is not None and isinstance(body, dict) and body:  # a key twice
        key = rng.choice(list(body))
        raw = raw[:-1] + f', {json.dumps(key)}: null}}' if raw.endswith("}") else raw
        case.changed.append(f"{key}: twice")
        case.kinds.append((key, None))
    case.body = raw.encode()
    return case


# ---------------------------------------------------------------- judging a case


def _allows(schema: dict[str, Any], defs: dict[str, Any], kind: str | None) -> bool:
    """Whether a JSON schema (pydantic's) lets a value of ``kind`` through at all (its range and pattern not asked)."""
    if kind is None:
        return False
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    if "anyOf" in schema:
        return any(_allows(s, defs, kind) for s in schema["anyOf"])
    if "enum" in schema:
        return kind in {{bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}.get(
            type(v), "?") for v in schema["enum"]}
    if "const" in schema:
        return True
    allowed = schema.get("type")
    if allowed is None:
        return True  # any value
    allowed = {allowed} if isinstance(allowed, str) else set(allowed)
    return kind in allowed or (kind == "integer" and "number" in allowed)


def check(case: Case, ep: Endpoint, before: dict[str, Any], after: dict[str, Any], service: Service) -> None:
    status = case.status
    if status is None:
        case.problems.append(f"no answer within {service.slow:g} s")
        return
    if status >= 500:
        case.problems.append(f"status {status}")
    try:
        answer = json.loads(case.answer)
    except ValueError:
        case.problems.append("the answer is not JSON")
        return
    if status >= 400:
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, str) or not error.strip() or "\n" in error:
            case.problems.append(f"no one-line error: {case.answer[:200]!r}")
        if status == 422 and not isinstance(answer.get("errors"), list):
            case.problems.append("a 422 without its errors list")
        if before.get("review", ["waiting_review"])[0] != "waiting_review":  # a run not waiting moves on its own
            before, after = {k: v for k, v in before.items() if k != "review"}, {
                k: v for k, v in after.items() if k != "review"}
        if before != after:
            case.problems.append(f"refused ({status}) but what the service holds changed: {before} -> {after}")
        return
    if ep.model is not None:  # a 2xx: every value put in must be one the body model's schema allows
        schema = ep.model.model_json_schema()
        defs = schema.get("$defs", {})
        for where, kind in case.kinds:
            top = where.split(".")[0]
            sub = schema.get("properties", {}).get(top, {})
            if "." in where:  # an item of a list field
                sub = next((s.get("items", {}) for s in [sub, *sub.get("anyOf", [])] if "items" in s), {})
            if not _allows(sub, defs, kind):
                case.problems.append(f"accepted ({status}) a {kind or 'non-JSON'} value at {where}")
        if decides(case.endpoint):
            case.problems += decision_problems(case, before)
        return
    if "?format=" in case.endpoint:  # imported: its ids are the importer's (a ?format= body's 2xx is all it says)
        return
    for t in json.loads(case.body):  # a 2xx ingest: each trajectory is there, its score a score
        if not isinstance(t, dict) or not isinstance(t.get("id"), str):
            continue
        if len(t["id"]) > MAX_ID_CHARS:  # its GET is a URL clients and proxies refuse
            case.problems.append(f"stored an id of {len(t['id']):,} characters (at most {MAX_ID_CHARS})")
            continue
        if (ch := control_character(t["id"])) is not None:  # a newline: its GET reads another id, or nothing
            case.problems.append(f"stored an id holding a control character ({ch})")
            continue
        # the id as one path segment: '../../etc', 'a?b' and 'a#b' are stored and read back so; sent raw they were
        # read as another path, a query or a fragment (a 404 told as the service's failure)
        got = service.request("GET", f"/trajectories/{quote(t['id'], safe='')}")
        if got is None or got.status_code != 200:
            case.problems.append(f"stored, but GET /trajectories/{t['id'][:60]} is {got and got.status_code}")
            continue
        score = got.json().get("score")
        if score is not None and not (isinstance(score, int | float) and math.isfinite(score) and 0 <= score <= 1):
            case.problems.append(f"stored with score {score!r}")


def decision_problems(case: Case, before: dict[str, Any]) -> list[str]:
    """What is wrong with a decision the service took (2xx): its candidate must have been awaiting review, and the
    decisions must give it the decision asked for, reject every other candidate, and keep the reason given."""
    sent, answer = json.loads(case.body), json.loads(case.answer)
    decision = case.endpoint.rsplit("/", 1)[1]
    awaiting = before.get("review", [None, []])[1]
    if sent.get("candidate") not in awaiting:
        return [f"took a decision on {str(sent.get('candidate'))[:80]!r}, not awaiting review (awaiting: {awaiting})"]
    want = {b: "reject" for b in awaiting} | {sent["candidate"]: decision}
    if sent.get("reason"):
        want[f"{sent['candidate']}#reason"] = sent["reason"]
    if answer.get("decisions") != want or answer.get("decision") != decision:
        return [f"decisions {str(answer.get('decisions'))[:300]}, not {str(want)[:300]}"]
    return []


# ---------------------------------------------------------------- the loop


def main(argv: list[str] | None = None) -> int:
    class DefaultsHelp(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsHelp)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of fuzzing (the workspace's build not counted)")
    ap.add_argument("-n", type=int, default=None, help="stop after this many cases (default: the budget decides)")
    ap.add_argument("--seed", type=int, default=0, help="the random seed: one seed, the same cases")
    ap.add_argument("--path", action="append", help="fuzz only this endpoint (repeatable; e.g. /datasets/export)")
    ap.add_argument("--slow", type=float, default=SLOW_S, help="seconds a request may take before the service "
                    "counts as wedged")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case's status and answer")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="fuzz-service-") as tmp:
        root = Path(tmp)
        settings = build_workspace(root)
        records = trajectories(root)
        with Service(settings, args.slow) as service:
            r = service.request("POST", "/trajectories", json.dumps(records).encode())
            if r is None or r.status_code != 200:
                raise SystemExit(f"fuzz_service: the workspace's trajectories were not ingested: {r and r.text}")
            r = service.request("POST", "/runs", json.dumps({"run_id": "fuzz-run"}).encode())
            if r is None or r.status_code != 202:
                raise SystemExit(f"fuzz_service: the workspace's run was not started: {r and r.text}")
            service.asked.add("fuzz-run")
            eps = [e for e in endpoints(service.client.app, "fuzz-run")
                   if not args.path or any(e.path == p.replace("{run_id}", "fuzz-run") for p in args.path)]
            if not eps:
                raise SystemExit(f"fuzz_service: no endpoint takes a body among {args.path}")
            samples = format_samples(root)
            if not any(decides(e.path) for e in eps):
                return fuzz(service, eps, records, rng, args, samples)
            with Reviews(build_workspace(root / "review", review=True), args.slow) as reviews:
                return fuzz(service, eps, records, rng, args, samples, reviews)


def fuzz(service: Service, eps: list[Endpoint], records, rng: random.Random, args,
         samples: list[tuple[str, Path]] | None = None, reviews: Reviews | None = None) -> int:
    """The cases, each judged; with ``reviews``, approve/reject cases go to its run waiting for review (the time it
    takes to start another once a decision was taken counts against the budget)."""
    main_service = service
    order = eps[:]
    rng.shuffle(order)
    cases: list[Case] = []
    t_end = time.monotonic() + args.budget
    while time.monotonic() < t_end and (args.n is None or len(cases) < args.n):
        ep = order[len(cases) % len(order)]
        service, candidates = main_service, None
        if reviews is not None and decides(ep.path):
            reviews.ready()
            service, candidates = reviews, reviews.pending()
            ep = Endpoint(ep.path.replace("/runs/fuzz-run/", f"/runs/{reviews.run_id}/"), ep.model)
        case = make_case(ep, rng, records, len(cases), samples, candidates)
        before = service.held()
        t0 = time.monotonic()
        r = service.request("POST", case.endpoint, case.body)
        case.seconds = time.monotonic() - t0
        if r is not None:
            case.status, case.answer = r.status_code, r.text
            if r.status_code == 202 and case.endpoint == "/runs":
                service.asked.add(r.json()["run_id"])
        check(case, ep, before, service.held() if r is None or r.status_code >= 400 else before, service)
        health = service.request("GET", "/health")
        if health is None or health.status_code != 200:
            case.problems.append(f"GET /health after it: {health and health.status_code}")
        cases.append(case)
        if args.verbose:
            print(f"{case.status} {case.endpoint} [{'; '.join(case.changed) or 'working body'}] {case.answer[:160]}")
        if case.problems:
            print(f"FAIL {case.endpoint} [{'; '.join(case.changed) or 'working body'}] -> {case.status}: "
                  f"{'; '.join(case.problems)}\n  answer: {case.answer[:4000 if case.status == 500 else 300]}\n"
                  f"  body: {case.body[:300]!r}")
            sys.stdout.flush()
        if case.status is None:
            print("fuzz_service: the service did not answer; stopping")
            break
    by_status: dict[str, int] = {}
    for c in cases:
        key = f"{re.sub(r'^/runs/[^/]+/', '/runs/{run_id}/', c.endpoint)} {c.status}"
        by_status[key] = by_status.get(key, 0) + 1
    failed = [c for c in cases if c.problems]
    print(f"fuzz_service: {len(cases)} cases, {len(failed)} failures, slowest {max(c.seconds for c in cases):.2f} s")
    for key in sorted(by_status):
        print(f"  {key}: {by_status[key]}")
    return 1 if failed else 0


if __name__ == "__main__":
    from evoharness.benchrepeat import same_checkout

    same_checkout(__file__)
    sys.exit(main())
