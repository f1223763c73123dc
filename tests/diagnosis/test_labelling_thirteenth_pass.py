"""The thirteenth pass's labelling cuts (docs/benchmarks.md, "thirteenth session").

- Labelling a run leaves no reference cycle behind: a memo a detector keeps on the view (``AgentLog``, the calls
  that went through) holds the view's parts, not the view, so the run, its view and everything the detectors
  derived are freed when the caller drops the run, not when the garbage collector next runs (before, every failed
  run's whole trajectory waited for a collection). Checked on every run of the vendored fixtures but the held-out
  sets (tau-bench airline, Who&When Algorithm-Generated, mini-swe-agent, OpenHands, SWE-agent, tau2, ...), labelled
  with the collector off.
- The claim check's status reading (``EntityStatus``) scans a status result that names no entity (no ``id"``: a
  flight search) only when the vocabulary is read, by a reply naming a known entity. Compared with the class as it
  was on random sequences of results and replies (a vocabulary past ``MAX_VOCAB`` among them) and on every run of the
  fixtures' tau-bench airline set (and the full set where the checkout has it).
"""

from __future__ import annotations

import gc
import json
import random
import weakref
from pathlib import Path

import pytest

from evoharness.diagnosis.context import TraceView
from evoharness.diagnosis.detectors import STATUS_FIELD, EntityStatus, _status_claim, id_values
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import iter_files, load_file
from evoharness.traces.patterns import gate_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HELD_OUT = ("Hand-Crafted", "agentrx_magentic_one", "agentrx_tau", "swe_blind2")  # never labelled here


def _fixture_files() -> list[Path]:
    return [f for f in iter_files([FIXTURES / "data", FIXTURES / "traces"])
            if not any(h in str(f) for h in HELD_OUT)]


@pytest.fixture
def collector_off():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_a_labelled_run_is_freed_when_dropped_without_the_garbage_collector(collector_off) -> None:
    labeller = Labeller()
    kept: list[str] = []
    failed = 0
    for f in _fixture_files():
        try:
            runs = list(load_file(f))
        except Exception:  # noqa: BLE001 -- a fixture no importer reads (a README, a licence) has no run to label
            continue
        while runs:
            traj = runs.pop()
            failed += labeller.label(traj).failure_class != "healthy"
            ref = weakref.ref(traj)
            del traj
            if ref() is not None:
                kept.append(f"{f.relative_to(FIXTURES)}: {ref().id}")
    assert failed >= 30  # the failed runs are the ones every detector reads
    assert kept == []
    assert _ours_in_cycles() == []  # nothing else of a label waits for the collector either


_PACKAGE = str(Path(__file__).resolve().parents[2] / "evoharness")


def _ours_in_cycles() -> list[str]:
    """What of evoharness the collector finds unreachable now (objects of its classes, its functions, frames of its
    code): ``gc.collect() == 0`` also counted any library's cycles (an exception's traceback, a cache a library
    fills on first use), which say nothing of a label."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = []
        for o in gc.garbage:
            code = getattr(o, "f_code", None) or getattr(o, "__code__", None)
            if (type(o).__module__.startswith("evoharness.")
                    or (code is not None and code.co_filename.startswith(_PACKAGE))):
                found.append(type(o).__qualname__)
        return found
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_the_cycle_check_names_ours_and_passes_a_librarys(collector_off) -> None:
    from evoharness.traces.builder import TraceBuilder

    library = [[]]
    library[0].append(library)  # a cycle of plain lists, as a library may leave: `gc.collect() == 0` failed on it
    del library
    assert _ours_in_cycles() == []
    traj = TraceBuilder("t").user("hi").deliver("x").build(score=1.0)
    traj.meta["self"] = [traj]  # a cycle through a trajectory: found
    del traj
    assert "Trajectory" in _ours_in_cycles()


class _StatusBefore:
    """``EntityStatus`` as it was before this pass: every status result scanned when read."""

    MAX_VOCAB, PAST = EntityStatus.MAX_VOCAB, EntityStatus.PAST

    def __init__(self) -> None:
        self.latest: dict[str, str] = {}
        self.vocab: set[str] = set()
        self.earlier: dict[str, set[str]] = {}

    def read(self, tool_result: str) -> None:
        if '"status"' not in tool_result:
            return
        found = {v.lower() for v in STATUS_FIELD.findall(tool_result[:50_000])}
        if not found:
            return
        if len(self.vocab) < self.MAX_VOCAB:
            self.vocab |= found
        if len(found) == 1:
            status = next(iter(found))
            for ident in id_values(tool_result[:50_000]):
                key = ident.lower()
                before = self.latest.get(key)
                if before is not None and before != status:
                    self.earlier.setdefault(key, set()).add(before)
                self.latest[key] = status

    def contradicted(self, reply: str) -> str | None:
        if not self.latest:
            return None
        low = reply.lower()
        named = [e for e in self.latest if e in low]
        if not named:
            return None
        if reply.isascii() and not any(map(low.__contains__, self.vocab)):
            return None
        head = reply[:20_000]
        low_head = gate_text(head)
        found = _status_claim(frozenset(self.vocab)).finditer(head) if low_head is None else \
            _status_claim(frozenset(self.vocab), 0).finditer(low_head)
        claims = [(m.group(1).lower(), m.group(2).lower()) for m in found]
        for entity in named:
            expected = self.latest[entity]
            history = self.earlier.get(entity, ())
            wrong = sorted({status for verb, status in claims if status != expected
                            and not (verb in self.PAST and status in history)})
            if wrong and expected not in low:
                return f"{entity} is {expected!r} in the tools, the reply says {wrong[0]!r}"
        return None


def _same_statuses(texts: list[tuple[str, str]]) -> int:
    """Feed ``(role, text)`` to both readers as the claim check does; every answer and the state after each step must
    agree. Returns how many replies were contradicted."""
    new, old = EntityStatus(), _StatusBefore()
    fired = 0
    for role, text in texts:
        if role == "tool":
            new.read(text)
            old.read(text)
        else:
            got = new.contradicted(text) if new.latest else None
            assert got == (old.contradicted(text) if old.latest else None), text
            fired += got is not None
        assert (new.latest, new.earlier) == (old.latest, old.earlier)
    assert new.vocab == old.vocab
    return fired


def test_status_results_naming_no_entity_are_scanned_only_when_the_vocabulary_is_read() -> None:
    rng = random.Random(13)
    common = ["available", "Cancelled", "confirmed", "on time", "delayed", "landed", "pending", "Sent Back"]
    # more than MAX_VOCAB (letters only, as STATUS_FIELD reads a status): the order the vocabulary fills in matters
    rare = [f"state {chr(97 + k // 26)}{chr(97 + k % 26)}" for k in range(70)]
    ids = ["ABC123", "W42", "res_77"]
    verbs = ["is", "was", "has been", "status:", "are"]
    fillers = ["the", "now", "still", "your", "reservation", "é", "\u212aept", "HAT069"]

    def status() -> str:
        return rng.choice(rare) if rng.random() < 0.1 else rng.choice(common)

    fired = 0
    for _ in range(800):
        texts: list[tuple[str, str]] = []
        if rng.random() < 0.15:  # a search listing more statuses than the vocabulary keeps
            texts.append(("tool", json.dumps([{"flight_number": "HAT001", "status": s} for s in rng.sample(rare, 70)])))
        for _ in range(rng.randint(1, 14)):
            kind = rng.random()
            if kind < 0.3:  # a search: statuses, no id
                texts.append(("tool", json.dumps([{"flight_number": f"HAT{rng.randint(0, 999):03d}", "status": status()}
                                                  for _ in range(rng.randint(0, 4))])))
            elif kind < 0.5:  # a record: one status (sometimes two), an id
                rec: dict = {rng.choice(["reservation_id", "order_id", "id", "user_id"]): rng.choice(ids),
                             "status": status()}
                if rng.random() < 0.2:
                    rec["items"] = [{"status": status()}]
                texts.append(("tool", json.dumps(rec)))
            elif kind < 0.55:
                texts.append(("tool", "no status here"))
            elif kind < 0.85:  # a claim: "ABC123 is now cancelled"
                texts.append(("assistant", f"{rng.choice(ids)} {rng.choice(verbs)} "
                                           f"{rng.choice(fillers) + ' ' if rng.random() < 0.5 else ''}{status()}."))
            else:
                texts.append(("assistant", " ".join(rng.choice(verbs + fillers + ids + common)
                                                    for _ in range(rng.randint(1, 10)))))
        fired += _same_statuses(texts)
    assert fired > 50  # the rule itself fires


def test_the_deferred_status_reading_answers_as_before_on_tau_bench_airline() -> None:
    roots = [FIXTURES / "data" / "tau_bench_airline_gpt4o"]
    shared = FIXTURES.parents[2] / "shared" / "data" / "tau_bench_airline_gpt4o"
    if shared.is_dir():
        roots.append(shared)
    runs = 0
    for f in iter_files(roots):
        for traj in load_file(f):
            view = TraceView(traj)
            texts = [(view.roles[i], text) for i, text in enumerate(view.texts)
                     if text and view.roles[i] in ("tool", "assistant")]
            _same_statuses(texts)
            runs += 1
    assert runs >= 20
