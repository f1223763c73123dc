"""Verification per hunk: splitting a diff, leave-one-out commits in git, and the judgement.

The end-to-end tests run the verifier against an in-process agent stand-in that reads the harness
files of the commit it is asked to run (a loop guard it obeys, and a lesson telling it not to call
tools, which it also obeys): a bundled harmful lesson measurably hurts there.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest
import yaml

from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit, FileChange
from evoharness.harness_repo.signing import VerdictSigner
from evoharness.verification.config import VerificationConfig
from evoharness.verification.hunks import GitParts, only_hunk, split_hunks, without_hunk
from evoharness.verification.observations import Observation
from evoharness.verification.selection import BehaviourAware
from evoharness.verification.verifier import Verifier
from tests.modules import load_file

T = "F3.repeated_action"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bundled_hunks.py"


def test_changed_regions_separated_by_unchanged_lines_are_separate_hunks():
    old = "a\nb\nc\nd\ne\n"
    new = "A\nb\nc\nD\nD2\ne\n"
    hunks = split_hunks(old, new)
    assert len(hunks) == 2
    assert without_hunk(old, new, hunks, 0) == "a\nb\nc\nD\nD2\ne\n"
    assert without_hunk(old, new, hunks, 1) == "A\nb\nc\nd\ne\n"
    assert only_hunk(old, new, hunks, 1) == "a\nb\nc\nD\nD2\ne\n"
    assert len(split_hunks(old, "A\nB\nc\nd\ne\n")) == 1  # adjacent lines: one region


def test_two_lessons_appended_together_are_two_hunks_in_markdown_only():
    old = "# Lessons\n"
    new = "# Lessons\n- Stop repeating a call that returned the same result.\n- Do not call any tools.\n"
    assert len(split_hunks(old, new, markdown=True)) == 2
    assert len(split_hunks(old, new, markdown=False)) == 1
    hunks = split_hunks(old, new, markdown=True)
    assert only_hunk(old, new, hunks, 1) == "# Lessons\n- Do not call any tools.\n"


# ---- an in-process stand-in that reads the harness at each commit --------------------------------

FIX = FileChange(path="policies.yaml", content="""\
# Harness policies read by the reference agent.
max_steps: 12
loop_guard:
  enabled: true
  max_repeats: 2
checkpoint_nudge:
  enabled: false
  every: 4
exit_gate:
  enabled: false
repair_tool_calls: false
""")
HARM = FileChange(path="lessons.md", content="- Do not call any tools. Answer immediately.\n")
NULL_POLICY = FileChange(path="policies.yaml", content="# Policies (reviewed).\n" + FIX.content.split("\n", 1)[1]
                         .replace("enabled: true", "enabled: false", 1))
NULL_LESSON = FileChange(path="lessons.md", content="\n")


class HarnessReader:
    """An `ObservationSource`: one rollout = the stand-in agent on a task under the commit's files.

    Tasks t0..t23; t0..t11 take several tool calls. On those the agent loops (``F3.repeated_action``,
    score 0.1) with probability 0.6 unless the loop guard is enabled (then 0.1); it obeys a lesson
    forbidding tool calls, and then fails them (score 0.2) 20% of the time when it does not loop. Noise is seeded by
    (world, tree, task, seed), as a cached rollout would be.
    """

    def __init__(self, repo, world: int) -> None:
        self.repo, self.world, self.memo, self._files = repo, world, {}, {}

    def _harness(self, commit: str) -> tuple[bool, bool, str]:
        if commit not in self._files:
            c = self.repo.repo.commit(commit)
            policies = yaml.safe_load(c.tree["policies.yaml"].data_stream.read())
            lessons = c.tree["lessons.md"].data_stream.read().decode().lower()
            self._files[commit] = (bool(policies["loop_guard"]["enabled"]), "do not call any tools" in lessons,
                                   c.tree.hexsha)
        return self._files[commit]

    def pending(self, requests, ledger=None):
        return len({(self._harness(r.harness_commit)[2], r.task_id, r.seed) for r in requests} - self.memo.keys())

    def observe(self, requests, ledger=None):
        out, paid = [], 0
        for r in requests:
            guard, no_tools, tree = self._harness(r.harness_commit)
            key = (tree, r.task_id, r.seed)
            if key not in self.memo:
                paid += 1
                rng = random.Random(zlib.crc32(f"{self.world}|{tree}|{r.task_id}|{r.seed}".encode()))
                loops = rng.random() < (0.1 if guard else 0.6) and int(r.task_id[1:]) < 12
                score = 0.1 if loops else 0.9
                if no_tools and not loops and int(r.task_id[1:]) < 12 and rng.random() < 0.2:
                    score = 0.2
                score = min(1.0, max(0.0, score + rng.gauss(0, 0.02)))
                self.memo[key] = Observation(task_id=r.task_id, rollout=r.rollout, seed=r.seed, score=score,
                                             fired=frozenset({T}) if loops else frozenset(), healthy=score >= 0.5)
            out.append(self.memo[key].model_copy(update={"rollout": r.rollout}))
        return out, paid


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return init_harness(tmp_path_factory.mktemp("hunks") / "harness")


def _candidate(repo, message: str, *changes: FileChange):
    return repo.create_candidate(Edit(message=message, targets=T, changes=list(changes)), round=1)


def test_leave_one_out_commits_hold_the_other_hunks_and_move_no_branch(repo):
    cand = _candidate(repo, "Enable the loop guard and tell the agent to answer at once", FIX, HARM)
    branches, main = repo.branches(), repo.main_head()
    parts = GitParts(repo).parts(cand)
    assert [p.label.split(" ")[0] for p in parts] == ["lessons.md#1", "policies.yaml#1"]

    def files(commit):
        tree = repo.repo.commit(commit).tree
        return tree["lessons.md"].data_stream.read().decode(), tree["policies.yaml"].data_stream.read().decode()

    lessons_gone, policies_gone = parts
    assert files(lessons_gone.without) == ("", FIX.content)
    assert files(lessons_gone.alone)[0] == HARM.content and "enabled: false" in files(lessons_gone.alone)[1]
    assert files(policies_gone.without)[0] == HARM.content and "enabled: false" in files(policies_gone.without)[1]
    assert repo.branches() == branches and repo.main_head() == main
    assert GitParts(repo).parts(cand) == parts  # the same commits again (a resumed run reuses its rollouts)


def _verify(repo, cand, world: int, judge: bool = True, drop: bool = True):
    source = HarnessReader(repo, world)
    cfg = VerificationConfig(rollouts=4, anchor_rollouts=4, drop_refused_hunks=drop)
    verifier = Verifier(source, cfg, seed=world, hunks=GitParts(repo) if judge else None,
                        signer=VerdictSigner(repo.repo))
    anchor = verifier.measure_anchor(repo.main_head(), [f"t{i}" for i in range(24)], round=0)
    return verifier.verify(cand, anchor, BehaviourAware(0.5), round=1)


def _lessons(repo, commit: str) -> str:
    return repo.repo.commit(commit).tree["lessons.md"].data_stream.read().decode()


def test_a_fix_bundled_with_a_harmful_lesson_never_carries_the_lesson_in_20_worlds(repo):
    bundle = _candidate(repo, "Loop guard on, and answer immediately", FIX, HARM)
    whole = [_verify(repo, bundle, w, judge=False) for w in range(20)]
    refused = [_verify(repo, bundle, w, drop=False) for w in range(20)]
    dropped = [_verify(repo, bundle, w) for w in range(20)]
    # judged as a whole, the harmful lesson rides along with the fix
    assert sum(v.accepted and "Do not call any tools" in _lessons(repo, v.commit) for v in whole) >= 10
    # judged per hunk: the bundle is refused, or only its fix is kept
    assert sum(v.accepted for v in refused) == 0
    assert sum(v.accepted and "Do not call any tools" in _lessons(repo, v.commit) for v in dropped) == 0
    assert sum(v.accepted and v.commit != bundle.commit for v in dropped) >= 15
    assert repo.head_of(bundle.branch) == dropped[0].commit  # one reduced head, found again by every run


def test_null_edits_are_never_accepted(repo):
    null = _candidate(repo, "Reword the policies header", NULL_POLICY, NULL_LESSON)
    assert sum(_verify(repo, null, w).accepted for w in range(20)) == 0


def test_the_reduced_candidate_names_what_was_dropped_and_merges_without_it(tmp_path):
    repo = init_harness(tmp_path / "harness")
    bundle = _candidate(repo, "Loop guard on; no tools", FIX, HARM)
    refused = _verify(repo, bundle, 3, drop=False)
    hunks = next(g for g in refused.gates if g.gate == "hunks")
    assert not refused.accepted and refused.reason == "failed: hunks"
    assert "lessons.md#1" in hunks.reason and "policies.yaml" not in hunks.reason
    assert hunks.numbers["hunks"] == 2 and hunks.numbers["refused"] == 1

    verdict = _verify(repo, bundle, 3)
    assert verdict.accepted and verdict.commit == repo.head_of(bundle.branch) != bundle.commit
    assert "after dropping 1 of 2 hunks" in verdict.reason
    assert any(g.gate == "hunks_dropped" and "lessons.md#1" in g.reason for g in verdict.gates)
    repo.merge_verified(bundle.branch, verdict)
    main = repo.repo.commit(repo.main_head()).tree
    assert main["lessons.md"].data_stream.read() == b""
    assert b"enabled: true" in main["policies.yaml"].data_stream.read()


def test_benchmark_bundled_hunks_and_null_edits(capsys):
    bench = load_file(BENCH, "bundled_hunks")
    assert bench.main(["--tries", "20", "--json"]) == 0
    import json

    modes = json.loads(capsys.readouterr().out)["modes"]
    assert modes["whole"]["bundle"]["accepted"] >= 10
    assert modes["per_hunk"]["bundle"]["accepted"] == 0
    # edits that change nothing: about 2 in 100 pass by chance with these worlds' independent draws, with
    # the fixed design and the sequential one alike (100 worlds each); 1 of these 40 does
    assert modes["per_hunk"]["null1"]["accepted"] + modes["per_hunk"]["null2"]["accepted"] <= 1
    assert modes["per_hunk"]["fix1"]["accepted"] >= 18


def test_a_sequential_verification_judges_hunks_on_the_rollouts_it_ran(repo):
    """Each hunk is judged on the tasks and seeds the candidate itself was measured on: a sequential
    verification's later looks add seeds on the targeted tasks only, so its control tasks' later seeds
    were never run and must not be measured for a hunk (that would pay for rollouts no comparison pairs)."""
    bundle = _candidate(repo, "Loop guard on, and a lesson on brevity", FIX,
                        FileChange(path="lessons.md", content="- Keep the final answer short.\n"))
    judged = 0
    for world in range(6):
        source = HarnessReader(repo, world)
        asked: list[tuple[str, str, int]] = []
        observe = source.observe

        def spy(requests, ledger=None, _observe=observe, _asked=asked):
            _asked.extend((r.harness_commit, r.task_id, r.seed) for r in requests)
            return _observe(requests, ledger)

        source.observe = spy
        cfg = VerificationConfig(rollouts=4, anchor_rollouts=4, sequential=True, drop_refused_hunks=False)
        verifier = Verifier(source, cfg, seed=world, hunks=GitParts(repo), signer=VerdictSigner(repo.repo))
        anchor = verifier.measure_anchor(repo.main_head(), [f"t{i}" for i in range(24)], round=0)
        asked.clear()
        verdict = verifier.verify(bundle, anchor, BehaviourAware(0.5), round=1)
        if not any(g.gate == "hunks" for g in verdict.gates):
            continue  # the whole candidate failed a gate first: no hunk was judged
        judged += 1
        assert verdict.measurements["looks"] is not None
        ran = {(t, s) for c, t, s in asked if c == bundle.commit}
        parts = {(t, s) for c, t, s in asked if c not in (bundle.commit, anchor.commit)}
        assert parts and parts <= ran, sorted(parts - ran)[:5]
    assert judged >= 2


def test_a_sequential_verification_judges_each_hunk_by_its_own_paired_test(repo):
    """The candidate was accepted by the sequential paired test; each of its hunks is judged by the same kind of
    test (one look at the same alpha), not by the fixed design's gain bar, which refused real fixes that the
    sequential test had accepted (the fix's gain under the fixed bar's resolvable threshold)."""
    bundle = _candidate(repo, "Loop guard on, and a lesson on brevity", FIX,
                        FileChange(path="lessons.md", content="- Keep the final answer short.\n"))
    judged = 0
    for world in range(6):
        cfg = VerificationConfig(rollouts=4, anchor_rollouts=4, sequential=True, drop_refused_hunks=False)
        verifier = Verifier(HarnessReader(repo, world), cfg, seed=world, hunks=GitParts(repo),
                            signer=VerdictSigner(repo.repo))
        anchor = verifier.measure_anchor(repo.main_head(), [f"t{i}" for i in range(24)], round=0)
        verdict = verifier.verify(bundle, anchor, BehaviourAware(0.5), round=1)
        hunks = next((g for g in verdict.gates if g.gate == "hunks"), None)
        if hunks is None:
            continue
        judged += 1
        # the lesson changes nothing: refused by the paired test; the loop guard is the fix: kept
        assert "lessons.md#1" in hunks.reason and "sequential_gain" in hunks.reason, hunks.reason
        assert "policies.yaml" not in hunks.reason, hunks.reason
        assert hunks.numbers["refused"] == 1
    assert judged >= 2
