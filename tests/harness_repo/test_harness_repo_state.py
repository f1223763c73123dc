"""Stateful property test: random create / edit / verify / tamper / reject / merge / move-main sequences.

Invariants: main only ever sits on the seed or on a merge of a commit an accepted verdict named (measured
against the previous main, same tree, no protected path changed); no candidate branch is lost or moved
behind our back; every merge attempt succeeds exactly when the rules say it should; the repo stays sound.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from evoharness.errors import MergeRefused
from evoharness.harness_repo import gitops
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit, Verdict
from evoharness.harness_repo.signing import sign

from .helpers import git


@dataclass
class Model:
    head: str
    created_from: str
    protected_tamper: bool = False
    verdict: Verdict | None = None


@dataclass
class World:
    branches: dict[str, Model] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # commit -> verdict-ok | verdict-bad | rejected | merged
    merged_heads: set[str] = field(default_factory=set)


OPS = ["create", "create", "edit", "tamper", "tamper-protected", "accepted", "accepted", "failed",
       "human-reject", "merge", "merge", "verify-then-merge", "verify-then-merge", "move-main", "review"]
PATHS = ["lessons.md", "prompts/extra.md", "tools/helper.py"]
BETWEEN = ["nothing", "edit", "tamper", "tamper-protected", "main-moves", "human-reject", "failed"]


class HarnessMachine(RuleBasedStateMachine):

    @initialize()
    def setup(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="hr-state-"))
        self.hr = init_harness(self.tmp / "h")
        self.seed = self.hr.main_head()
        self.main = self.seed
        self.world = World()
        self.n = 0
        self.checked: set[str] = set()  # merge commits on main already checked

    def teardown(self) -> None:
        if hasattr(self, "tmp"):
            fsck = subprocess.run(["git", "-C", str(self.hr.path), "fsck", "--strict"], capture_output=True,
                                  text=True)
            shutil.rmtree(self.tmp, ignore_errors=True)
            assert fsck.returncode == 0, fsck.stderr

    def _text(self) -> str:
        self.n += 1
        return f"# lesson {self.n}\n"  # valid Markdown, Python and YAML alike

    def _edit(self, path: str) -> Edit:
        return Edit(message=f"idea {self.n}", targets="F3.repeated_action",
                    changes=[{"path": path, "content": self._text()}])

    @rule(op=st.sampled_from(OPS), pick=st.integers(0, 7), arg=st.integers(0, 6))
    def act(self, op: str, pick: int, arg: int) -> None:
        """One random step. Steps that need a branch create one first when there is none."""
        if op == "create" or not self.world.branches:
            self.create(PATHS[arg % len(PATHS)], arg % 4)
            return
        names = list(self.world.branches)
        branch = names[-1] if pick < 4 else names[pick % len(names)]  # favour the newest branch
        if op in ("edit", "tamper", "tamper-protected"):
            self.change(branch, op)
        elif op in ("accepted", "failed", "human-reject"):
            self.verify(branch, op)
        elif op == "merge":
            self.merge(branch)
        elif op == "verify-then-merge":
            self.verify_then_merge(branch, BETWEEN[arg % len(BETWEEN)])
        elif op == "move-main":
            self.move_main()
        else:
            self.review()

    def create(self, path: str, round: int) -> str:
        cand = self.hr.create_candidate(self._edit(path), round)
        assert cand.branch not in self.world.branches and cand.base == self.main
        self.world.branches[cand.branch] = Model(head=cand.commit, created_from=self.main)
        return cand.branch

    def change(self, branch: str, how: str) -> None:
        """Move the branch: a validated revision, or someone committing straight onto it."""
        m = self.world.branches[branch]
        if how == "edit":
            m.head = self.hr.revise(branch, self._edit("lessons.md")).commit
            return
        repo, protected = self.hr.repo, how == "tamper-protected"
        path = "harness.toml" if protected else "lessons.md"
        content = (f"# tampered {self._text()}" + (repo.commit(m.head).tree / "harness.toml").data_stream.read()
                   .decode()) if protected else self._text()
        tree = gitops.rewrite_tree(repo, repo.commit(m.head).tree, {path: content.encode()})
        sha = gitops.make_commit(repo, tree, "tamper\n", [m.head])
        assert gitops.cas_ref(repo, f"refs/heads/{branch}", sha, m.head)
        m.head = sha
        m.protected_tamper = m.protected_tamper or protected

    def verify(self, branch: str, outcome: str) -> None:
        m = self.world.branches[branch]
        v = sign(self.hr.repo, Verdict(candidate=branch, commit=m.head, base=self.main,
                                       accepted=outcome == "accepted", reason=outcome))  # as the verifier does
        if outcome == "human-reject":
            self.hr.reject(branch, v)
            self.world.notes[m.head] = "rejected"
            return
        self.hr.record_verdict(v)
        m.verdict = v
        self.world.notes[m.head] = "verdict-ok" if v.accepted else "verdict-bad"

    def merge(self, branch: str) -> None:
        m = self.world.branches[branch]
        v = m.verdict or Verdict(candidate=branch, commit=m.head, base=self.main, accepted=False)
        should = (v.accepted and v.commit == m.head and v.base == self.main and m.created_from == self.main
                  and not m.protected_tamper and self.world.notes.get(m.head) not in ("rejected", "verdict-bad")
                  and m.head not in self.world.merged_heads)
        try:
            merge = self.hr.merge_verified(branch, v)
        except MergeRefused as e:
            assert not should, f"refused a mergeable candidate: {e}"
            event("merge refused")
            return
        assert should, "merged a candidate the rules refuse"
        event("merge accepted")
        self.main = merge
        self.world.merged_heads.add(m.head)
        self.world.notes[m.head] = "merged"

    def verify_then_merge(self, branch: str, between: str) -> None:
        """Verify the head, let one thing happen, then try to merge (each refusal path, often)."""
        self.verify(branch, "accepted")
        if between in ("edit", "tamper", "tamper-protected"):
            self.change(branch, between)
        elif between == "main-moves":
            self.move_main()
        elif between in ("human-reject", "failed"):
            self.verify(branch, between)
        self.merge(branch)

    def move_main(self) -> None:
        """Another process merges its own verified candidate."""
        cand = self.hr.create_candidate(self._edit("prompts/other.md"), 9)
        v = sign(self.hr.repo, Verdict(candidate=cand.branch, commit=cand.commit, base=self.main, accepted=True))
        self.hr.record_verdict(v)
        self.main = self.hr.merge_verified(cand.branch, v)
        self.world.branches[cand.branch] = Model(head=cand.commit, created_from=v.base, verdict=v)
        self.world.merged_heads.add(cand.commit)
        self.world.notes[cand.commit] = "merged"

    def review(self) -> None:
        expected = {}
        for b, m in self.world.branches.items():
            note = self.world.notes.get(m.head)
            if m.head in self.world.merged_heads:
                expected[b] = "merged"
            elif note in ("rejected", "verdict-bad"):
                expected[b] = "rejected"
            else:
                expected[b] = "verified" if note == "verdict-ok" else "pending"
        assert {i.branch: i.status for i in self.hr.candidates()} == expected

    @invariant()
    def main_only_moves_by_verified_merges(self) -> None:
        if not hasattr(self, "hr"):
            return
        assert self.hr.main_head() == self.main
        notes = self.hr.notes()
        rows = git(self.hr.path, "rev-list", "--first-parent", "--parents", self.main).splitlines()
        for row in rows:
            commit, *parents = row.split()
            if commit in self.checked:
                break
            if commit == self.seed:
                assert parents == []
                continue
            assert len(parents) == 2, f"main has a non-merge commit {commit}"
            note = notes[commit]
            v = Verdict.model_validate(note["verdict"])
            assert note["status"] == "merged" and v.accepted
            assert (v.base, v.commit) == (parents[0], parents[1])
            assert self.hr.tree_hash(commit) == self.hr.tree_hash(parents[1])
            assert all(self.hr.manifest.editable(p) for p in self.hr.changed_paths(parents[0], commit))
            self.checked.add(commit)

    @invariant()
    def no_candidate_is_lost(self) -> None:
        if not hasattr(self, "hr"):
            return
        out = git(self.hr.path, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/candidate/")
        heads = dict(line.split() for line in out.splitlines())
        assert heads == {b: m.head for b, m in self.world.branches.items()}


HarnessMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=15, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_harness_repo_state_machine = HarnessMachine.TestCase
