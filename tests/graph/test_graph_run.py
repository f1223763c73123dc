"""The self-improving loop end to end on the synthetic environment (in-process agent, playbook roles)."""

from __future__ import annotations

import json

import git

from evoharness.datasets.queue import TrainingQueue
from evoharness.graph.progress import Progress
from evoharness.graph.runner import decide, resume_run, start_run
from evoharness.harness_repo.repo import HarnessRepo
from tests.graph.test_graph_state import assert_round_trips

QUIET = Progress(quiet=True)


def _main_chain(repo_path):
    r = git.Repo(repo_path)
    return list(r.iter_commits("main", first_parent=True))


def test_run_merges_only_verified_candidates_and_moves_toward_healthy(make_settings):
    settings = make_settings(rollouts=8, max_rounds=3, budget=6000)
    out = start_run(settings, progress=QUIET)
    assert out.done
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert summary["merged"], summary["rejected"]
    repo = HarnessRepo(settings.run.harness)
    chain = _main_chain(repo.path)
    assert len(chain[-1].parents) == 0  # the seed commit
    for c in chain[:-1]:  # every other commit on main is a verified merge
        assert len(c.parents) == 2
        status, verdict = repo.verdict_of(c.parents[1].hexsha)
        assert verdict.accepted and verdict.commit == c.parents[1].hexsha
        assert "behaviour" in c.message and "attribution" in c.message
    assert {m["merge_commit"] for m in summary["merged"]} == {c.hexsha for c in chain[:-1]}
    for r in summary["rejected"]:  # rejected candidates keep their branch, with the verdict in a note
        assert r["branch"] in repo.branches()
        status, verdict = repo.verdict_of(r["commit"])
        assert status == "rejected" and not verdict.accepted
    before, after = summary["before"], summary["after"]
    for split in ("dev", "heldout"):
        b, a = before[split]["composition"], after[split]["composition"]
        assert a["healthy"] > b["healthy"], split
        assert a["F2"] + a["F3"] < b["F2"] + b["F3"], split
    # a fresh anchor after every merge, and it is the bar the next round used
    merged_rounds = {m["round"] for m in summary["merged"]}
    for rnd in summary["rounds"]:
        if rnd["round"] in merged_rounds:
            assert rnd["fresh_anchor"] is not None and rnd["selection_optimism"] is not None
    anchors = summary["anchors"]
    assert len(anchors) == 1 + len(summary["merged"])
    for prev, nxt in zip(summary["rounds"], summary["rounds"][1:], strict=False):
        bar = prev["fresh_anchor"] if prev["fresh_anchor"] is not None else prev["anchor_before"]
        assert nxt["anchor_before"] == bar
    assert summary["budget"]["spent"] <= settings.run.budget
    assert summary["accommodation_share"] is not None
    assert_round_trips(out.state)  # the final state: every JSON field is its registered type, exactly


def test_content_failures_are_queued_and_never_reach_the_engineer(make_settings):
    settings = make_settings(rollouts=4, max_rounds=1)
    out = start_run(settings, progress=QUIET)
    queue = TrainingQueue(f"sqlite:///{settings.home / 'queue.db'}")
    items = list(queue.items())
    assert items and {i.failure_class for i in items} <= {"F1", "F4"}
    assert {i.trajectory_id for i in items} == set(out.state["queued"])
    content = set(out.state["queued"])
    for rnd in out.state["rounds"]:
        for c in rnd["candidates"]:
            assert not any(e.split("@")[0] in content for e in c.get("evidence", []))


def test_review_gate_interrupts_before_merge_then_approve_or_reject(make_settings, tmp_path):
    settings = make_settings(rollouts=8, max_rounds=1, review=True)
    out = start_run(settings, progress=QUIET)
    assert out.interrupted and not out.done
    repo = HarnessRepo(settings.run.harness)
    seed_head = repo.main_head()
    pending = out.interrupted[0]["candidates"]
    assert pending
    # nothing merged while waiting
    assert len(_main_chain(repo.path)) == 1
    again = resume_run(settings, out.run_id, progress=QUIET)  # resuming keeps waiting
    assert again.interrupted and repo.main_head() == seed_head
    branch = pending[0]["branch"]
    done = decide(settings, out.run_id, branch, "approve", None, progress=QUIET)
    assert done.done
    assert repo.main_head() != seed_head
    assert done.state["merged"][0]["branch"] == branch

    s2 = make_settings(rollouts=8, max_rounds=1, review=True, harness=tmp_path / "h2")
    s2 = s2.model_copy(update={"home": tmp_path / "state2"})
    out2 = start_run(s2, progress=QUIET)
    b2 = out2.interrupted[0]["candidates"][0]["branch"]
    done2 = decide(s2, out2.run_id, b2, "reject", "not this one", progress=QUIET)
    repo2 = HarnessRepo(s2.run.harness)
    assert len(_main_chain(repo2.path)) == 1
    status, verdict = repo2.verdict_of(repo2.head_of(b2))
    assert status == "rejected" and "not this one" in verdict.reason and verdict.decided_by == "human"
    assert done2.done


def test_malformed_llm_replies_drop_the_candidate_and_main_stays(make_settings, tmp_path):
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["not json at all", "{\"patterns\": 5}", "```json\n{oops\n```"] * 40))
    settings = make_settings(rollouts=2, max_rounds=1)
    settings = settings.model_copy(update={"roles": settings.roles.model_copy(
        update={"kind": "llm", "model": f"scripted:{replies}", "max_retries": 2})})
    out = start_run(settings, progress=QUIET)
    assert out.done
    assert any("analyst failed" in d["reason"] for d in out.state["dropped"])
    assert len(_main_chain(settings.run.harness)) == 1
    assert not out.state["merged"]


def test_a_run_that_merged_nothing_does_not_evaluate_the_same_main_on_heldout_twice(make_settings):
    """A run that merged nothing ended at its round limit printing 'evaluating X on heldout (12 rollouts)' twice,
    for the same commit, and counted those rollouts planned and done again; none ran (the cache answered) and
    none was paid again. The second time now says the seed's measurement is the answer."""
    import io

    from evoharness.config import Settings

    settings = make_settings(rollouts=2, max_rounds=1).model_dump(mode="json")
    settings["verification"].update(z=1000.0, sequential=False)  # no gain resolvable: nothing merged
    stream = io.StringIO()
    out = start_run(Settings.model_validate(settings), progress=Progress(stream=stream))
    summary = json.loads((out.run_dir / "summary.json").read_text())
    assert out.done and not summary["merged"] and summary["stop_reason"].startswith("round limit")
    lines = stream.getvalue().splitlines()
    evaluated = [x for x in lines if " on heldout (" in x]
    again = [x for x in lines if "heldout of " in x]
    assert len(evaluated) == 1 and len(again) == 1, lines
    assert again[0].split("] ", 1)[1] == (f"heldout of {evaluated[0].split('] ', 1)[1].split()[1]}: measured already "
                                         "(12 rollouts, none run again)")
    assert summary["after"]["heldout"] == summary["before"]["heldout"]
    assert lines[-1] == again[0] and "round 1: merged 0" in lines[-2]  # no rollouts planned, none counted done
