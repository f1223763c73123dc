"""Static review as evidence and as a gate: the critic (playbook and LLM) sees the review's findings of the
harness's middleware and tools; a run's gate holds an accepted candidate with findings until a human
approves it, shows why in the review interrupt, and merges it once approved."""

from __future__ import annotations

from evoharness.graph.gate import Gate
from evoharness.graph.progress import Progress
from evoharness.harness_repo.init import init_harness
from evoharness.harness_repo.models import Edit, Verdict
from evoharness.harness_repo.signing import sign
from evoharness.roles.llm import LLMCritic
from evoharness.roles.models import Evidence, Pattern
from evoharness.roles.playbook import PlaybookCritic
from evoharness.roles.scripted import ScriptedChatModel
from evoharness.verification.config import VerificationConfig
from tests.roles import replies as R
from tests.roles.scenario import scenario, seed_view
from tests.security.test_score_forging import ATEXIT

HOOK = "middleware/speed.py"


def _pattern(surface: str) -> Pattern:
    trajs, _labels = scenario()
    ev = [Evidence(trajectory_id=t.id, task_id=t.task_id, step=6, quote="3x search_emails") for t in trajs[:3]]
    return Pattern(id="p1", signal="F3.repeated_action", failure_class="F3", evidence=ev, count=3, share=0.5,
                   task_ids=[t.task_id for t in trajs[:3]], root_cause="no loop guard", surface=surface,
                   fix="")


def test_the_critic_sees_the_static_review():
    trajs, labels = scenario()
    clean, tricked = seed_view(), seed_view(**{HOOK: ATEXIT})
    assert clean.code_review() == [] and any("import atexit" in f for f in tricked.code_review())
    # playbook critic: the findings in the pattern's surface are in its notes (evidence, not a refusal)
    notes = PlaybookCritic().review(_pattern(HOOK), tricked, trajs, labels).notes
    assert "static review of middleware/speed.py" in notes and "import atexit" in notes, notes
    assert "static review" not in PlaybookCritic().review(_pattern("policies.yaml"), clean, trajs, labels).notes
    # LLM critic: the prompt carries a static review section only when there are findings
    critic = LLMCritic(ScriptedChatModel(replies=[R.CRITIC_OK]))
    with_findings = "\n".join(str(m.content) for m in critic.prompt(_pattern(HOOK), tricked, trajs, labels))
    without = "\n".join(str(m.content) for m in critic.prompt(_pattern(HOOK), clean, trajs, labels))
    assert "## Static review" in with_findings and "import atexit" in with_findings
    assert "## Static review" not in without


def test_a_candidate_with_findings_waits_for_a_human_then_merges(tmp_path):
    hr = init_harness(tmp_path / "h")
    main = hr.main_head()
    cand = hr.create_candidate(Edit(message="Add a delivery helper", targets="F3.repeated_action",
                                    changes=[{"path": HOOK, "content": ATEXIT}]))
    verdict = sign(hr.repo, Verdict(candidate=cand.branch, commit=cand.commit, base=main, accepted=True,
                                    reason="gain +0.3"))
    gate = Gate(hr, None, VerificationConfig(), Progress(quiet=True), rollouts=1, seed=0)
    why = gate.needs_human(verdict)  # what the review interrupt shows beside it
    assert why and "import atexit" in why
    merged, rejected = gate.settle([cand], [verdict], {}, round=1)  # unattended: held, recorded as rejected
    assert merged == [] and "a human must approve it" in rejected[0].reason and hr.main_head() == main
    cand = hr.create_candidate(Edit(message="Add a delivery helper, again", targets="F3.repeated_action",
                                    changes=[{"path": HOOK, "content": ATEXIT + "# second round\n"}]))
    verdict = sign(hr.repo, Verdict(candidate=cand.branch, commit=cand.commit, base=main, accepted=True))
    merged, rejected = gate.settle([cand], [verdict], {cand.branch: "approve"}, round=2)  # --review, `approve`
    assert rejected == [] and merged[0].branch == cand.branch and hr.main_head() != main
    assert "atexit" in hr.repo.commit(hr.main_head()).tree[HOOK].data_stream.read().decode()
