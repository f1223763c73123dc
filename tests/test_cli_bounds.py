"""Count options past any sane value are one `error:` line and exit 2 before any work (fix, third session):
`demo --rounds 99999999999999999999999` ran a whole demo, `dataset enqueue --round` that large was a SQLite
OverflowError traceback, and `rollout --workers 100000` would start that many sandboxes at once. `rollout --seed`
past 32 bits or negative made every rollout a failed one (the endpoint refuses the seed), and a huge --tasks
meant all tasks, silently (fix, fourth session)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from evoharness.cli import main
from evoharness.cli_support import MAX_ROLLOUTS_PER_TASK, MAX_SEED
from evoharness.config import load_settings
from evoharness.graph.book import Book
from evoharness.graph.config import RunConfig
from evoharness.traces.store import write_trajectories
from evoharness.verification.verifier import Verifier
from tests.datasets.helpers import make_traj

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(("args", "line"), [
    (["demo", "--rounds", HUGE], f"error: --rounds must be 1 to 100, not {int(HUGE):,}"),
    (["demo", "--rounds", "-1"], "error: --rounds must be 1 to 100, not -1"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--workers", "100000"],
     "error: --workers must be 1 to 256, not 100,000"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--workers", "0"],
     "error: --workers must be 1 to 256, not 0"),
    (["candidate", "new", "--harness", "h", "--edit", "e.json", "--round", HUGE],
     f"error: --round must be 0 to 10,000, not {int(HUGE):,}"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--set", "sandbox.workers=1000"],
     "error: settings: sandbox.workers: Input should be less than or equal to 256"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--seed", HUGE],
     f"error: --seed must be 0 to 2,147,483,647, not {int(HUGE):,}"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--seed", "-5"],
     "error: --seed must be 0 to 2,147,483,647, not -5"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--seed", "2147483647", "-k", "3"],
     "error: --seed must be 0 to 2,147,483,645 with 3 rollouts (rollout k uses seed+k, up to 2,147,483,647), "
     "not 2,147,483,647"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--tasks", HUGE],
     f"error: --tasks must be 0 to 100,000 (0 = all), not {int(HUGE):,}"),
    (["rollout", "--harness", "h", "--env", "synthetic", "--out", "r.jsonl", "--tasks", "-3"],
     "error: --tasks must be 0 to 100,000 (0 = all), not -3"),
    (["evaluate", "--harness", "h", "--out", "e.json", "--tasks", HUGE],
     f"error: --tasks must be 0 to 100,000 (0 = all), not {int(HUGE):,}"),
    (["evaluate", "--harness", "h", "--out", "e.json", "--tasks", "-1"],
     "error: --tasks must be 0 to 100,000 (0 = all), not -1"),
    (["run", "--set", f"run.max_rounds={HUGE}"],
     "error: settings: run.max_rounds: Input should be less than or equal to 998"),
    (["run", "--set", f"run.seed={HUGE}"],
     "error: settings: run.seed: Input should be less than or equal to 2147482648"),
    (["run", "--set", "run.seed=-1"],
     "error: settings: run.seed: Input should be greater than or equal to 0"),
    (["run", "--set", "run.rollouts=1001"],
     "error: settings: run.rollouts: Input should be less than or equal to 1000"),
    # an infinite budget ended the run's first verification, and `verify`'s plan, in a traceback (NaN to integer)
    (["run", "--set", "run.budget=1e999"], "error: settings: run.budget: Input should be a finite number"),
    (["verify", "c", "--harness", "h", "--tasks", "a", "--budget", "inf"],
     "error: --budget must be >= 0 and finite, not inf"),
    (["verify", "c", "--harness", "h", "--tasks", "a", "--budget", "nan"],
     "error: --budget must be >= 0 and finite, not nan"),
])
def test_a_count_past_its_limit_is_one_error_line_before_any_work(args, line, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [line] and "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == []  # no demo-out/, no output file, no harness


def test_enqueue_round_past_its_limit_queues_nothing(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [make_traj("a", score=0.0)])
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    assert main(["dataset", "enqueue", str(path), "--url", url, "--round", HUGE]) == 2  # an OverflowError before
    assert capsys.readouterr().err == f"error: --round must be 0 to 10,000, not {int(HUGE):,}\n"
    assert main(["dataset", "enqueue", str(path), "--url", url, "--round", "10000"]) == 0
    assert capsys.readouterr().out.startswith("1 trajectory, ")



class _Recorder:
    """An observation source (and a ledger, an env, a progress) that keeps the requests it is asked for."""

    def __init__(self) -> None:
        self.requests: list = []

    def pending(self, requests, ledger=None) -> int:
        return len(requests)  # nothing measured yet: every request is still to run (and be asked for)

    def check(self, pending) -> None:
        pass

    def note(self, text) -> None:
        pass

    def list_tasks(self, split):
        return [SimpleNamespace(id="t")]

    def observe(self, requests, ledger=None):
        self.requests.extend(requests)
        raise _Asked


class _Asked(Exception):
    pass


def test_every_seed_a_run_derives_from_its_largest_settings_is_one_an_endpoint_takes():
    """run.seed was unbounded and run.max_rounds went to 10,000: held-out evaluation asked for seeds run.seed + r and
    the anchor after a merge in round r for 1,000,000 x r + i, past 2**31 - 1 (an endpoint refuses such a seed,
    so every rollout of that stage fails). Test fails before (no bound on run.seed; 10,000 rounds)."""
    fields = RunConfig.model_fields
    most = {k: next(m.le for m in fields[k].metadata if getattr(m, "le", None) is not None)
            for k in ("seed", "rollouts", "max_rounds")}
    run = load_settings(environ={}, overrides=[*(f"run.{k}={v}" for k, v in most.items()),
                                               "verification.sequential=false"]).run  # k=1,000: 2,000 seeds if on
    seen = _Recorder()
    with pytest.raises(_Asked):  # held-out evaluation of the run: seeds run.seed .. run.seed + k - 1
        Book(run, seen, None, None, seen, source=seen).evaluate("c" * 40, "heldout", seen, round=run.max_rounds)
    with pytest.raises(_Asked):  # the dev anchor after a merge in the run's last round
        Verifier(seen).measure_anchor("c" * 40, ["t"], k=run.rollouts, round=run.max_rounds)
    seeds = [r.seed for r in seen.requests]
    assert len(seeds) == 2 * MAX_ROLLOUTS_PER_TASK == 2 * run.rollouts
    assert 0 <= min(seeds) and max(seeds) <= MAX_SEED
