"""Typed graph state: every JSON field of `RunState` has a registered pydantic type, a stored value reads
back as that type and dumps to exactly what was stored (so checkpoints keep their format), and a value
that does not fit is one error naming the field."""

from __future__ import annotations

import typing

import pytest

from evoharness.errors import EvoharnessError
from evoharness.graph.state import STATE_TYPES, RunState, Typed, dump


def _json_fields() -> set[str]:
    """RunState fields holding JSON objects (dicts, or lists of dicts)."""
    out = set()
    for name, hint in typing.get_type_hints(RunState, include_extras=True).items():
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
        if typing.get_origin(base) is list:
            base = typing.get_args(base)[0]
        if typing.get_origin(base) is dict and typing.get_args(base)[1] is typing.Any:
            out.add(name)
    return out


def test_every_json_field_of_the_state_has_a_registered_type():
    assert _json_fields() == set(STATE_TYPES)


def assert_round_trips(state: dict) -> None:
    """Each JSON field of ``state`` validates as its type and dumps back unchanged."""
    typed = Typed(state)
    for field, model in STATE_TYPES.items():
        stored = state.get(field)
        if stored is None:
            continue
        if isinstance(stored, list):
            assert [dump(v) for v in typed.many(field, model)] == stored, field
        else:
            assert dump(typed.one(field, model)) == stored, field


def test_records_written_by_an_older_version_still_read():
    old = {  # shapes earlier versions stored: no `pinned` yet, a critic failure without defaults, extra keys
        "guards": {},
        "reviews": [{"pattern_id": "p-F2.x", "approved": False, "accommodation": False, "send_back": False,
                     "notes": "critic failed: timeout"}],
        "dropped": [{"pattern": None, "round": 1, "reason": "analyst failed: x"},
                    {"pattern": "p-F3.y", "signal": "F3.y", "round": 2, "reason": "analyst: none", "note": "old"}],
        "rejected": [{"branch": "candidate/r1-a", "commit": "c1", "round": 1, "reason": "failed: gain",
                      "base": "b", "tree": "t", "superseded_by": None}],
    }
    typed = Typed(old)
    assert typed.reviews[0].notes.startswith("critic failed") and not typed.reviews[0].was_sent_back
    assert typed.dropped[1].signal == "F3.y" and typed.dropped[1].dump()["note"] == "old"
    assert typed.rejected[0].tree == "t"
    assert typed.guards.pinned == {} and Typed({}).guards.pinned == {}
    # the run's own records keep exactly their keys (other models are stored whole, defaults filled in)
    assert_round_trips({k: v for k, v in old.items() if k in ("dropped", "rejected")})


def test_a_field_that_does_not_fit_its_type_is_one_error_naming_it():
    state = {"merged": [{"branch": "b", "merge_commit": "m", "round": 1, "reading": 0.5, "targets": "F2.x"}]}
    with pytest.raises(EvoharnessError, match=r"run state: 'merged' is not a Merged \(commit: Field required\)"):
        _ = Typed(state).merged
    with pytest.raises(EvoharnessError, match="run state has no anchor yet"):
        _ = Typed({}).anchor


def test_one_rollout_identity_from_the_worker_the_executor_and_the_run(tmp_path):
    from evoharness.agent.runner import run_rollout
    from evoharness.envs import get_environment
    from evoharness.graph.source import RunLedger
    from evoharness.harness_repo.init import init_harness
    from evoharness.sandbox.api import RolloutRequest
    from evoharness.sandbox.failure import failed_trajectory
    from evoharness.traces.models import Termination

    repo = init_harness(tmp_path / "h")
    sha = repo.main_head()
    task = get_environment("synthetic").list_tasks("dev")[0].id
    req = RolloutRequest(task_id=task, harness_commit=sha, seed=3, rollout=1, split="dev")
    assert req.id == f"{sha[:12]}/dev/{task}/s3"
    traj = run_rollout(repo.path, "synthetic", task, "scripted:weak", 3, rollout=1, split="dev", harness_commit=sha)
    crashed = failed_trajectory(req, sha, "scripted:weak", "synthetic", "worker_crash", "killed",
                                Termination.error, 0.1, {})
    assert traj.id == crashed.id == req.id  # a re-run after a crash replaces the failed one, never duplicates
    # a checkpoint written before the ledger paid by id: the same rollouts, so nothing is paid twice
    old = RunLedger(total=10, paid_keys=[f"{sha}:dev:{task}:3", req.id])
    assert old.paid_keys == [req.id, req.id]
