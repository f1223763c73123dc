"""benchmarks/tau2_gold_paths.py on a small fixed subset of tau2's tasks: each task's gold actions run on tau2's
environment, wrapped in a scripted policy-following conversation, written in tau2's ``results.json`` and in
tau-bench's record layout, read back by the importers and labelled. Gold runs (reward 1) are Healthy with nothing
located on them even when scored 0 (the placement fallbacks aside) and no F2 / F3 signal; each controlled failure's
first signal is the step it is written to fail at (a recovered error: Healthy, no F2 / F3 signal)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.modules import load_file

pytest.importorskip("tau2")

ROOT = Path(__file__).resolve().parents[2]
SUBSET = {
    "retail": ["0", "5"],  # 5: the user states its user id, which the policy says is no authentication
    "airline": ["8", "12"],  # 8: a booking paid by certificate; 12: bags added
    "telecom": ["[mobile_data_issue]data_usage_exceeded|user_abroad_roaming_enabled_off[PERSONA:Easy]",
                "[mobile_data_issue]airplane_mode_on|data_saver_mode_on|user_abroad_roaming_disabled_on"
                "[PERSONA:None]"],  # the customer's own phone (user-side calls) and an agent's write each
}
PLACEMENT = ("F4.first_write", "F4.poor_delivery")


def _bench():
    # its dataclasses look their module up in sys.modules
    return load_file(ROOT / "benchmarks" / "tau2_gold_paths.py", "tau2_gold_paths", register=True)


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.fixture(scope="module")
def runs(bench):
    return bench.build(task_ids=SUBSET)


@pytest.fixture(scope="module")
def tau2_result(bench, runs, tmp_path_factory):
    return bench.evaluate(runs, tmp_path_factory.mktemp("tau2"), "tau2")


def test_the_subset_holds_every_kind_of_run(runs):
    kinds = {(r.domain, r.kind) for r in runs}
    for domain in SUBSET:
        assert {(domain, k) for k in ("gold", "no_confirmation", "wrong_argument", "recovered_error")} <= kinds
    assert {("retail", "before_identity"), ("retail", "misstated_status")} <= kinds
    assert ("airline", "before_identity") not in kinds  # airline's policy asks the user for its id: no look-up due
    assert len([r for r in runs if r.kind == "gold"]) == 6


def test_every_gold_run_is_healthy_and_nothing_is_located_on_it(tau2_result):
    """Nor does a gold path break a rule of the violation log (``violations``: runs with any)."""
    assert tau2_result["gold"] == {d: {"n": 2, "healthy": 2, "clean": 2, "violations": 0} for d in SUBSET}
    assert tau2_result["gold_unclean"] == []


def test_each_controlled_failure_is_located_at_its_written_step(tau2_result):
    """Before the identity fix, retail 5's write before any look-up was placed at the write only as the fallback
    ``F4.first_write`` (the user's stated user id counted as authentication), and telecom's identity rule ("identify
    the customer") was not read at all; before the user-side fix, telecom runs were ``E.user_off_script`` at the
    first thing the customer read off its phone."""
    failures = tau2_result["failures"]
    for key, c in failures.items():
        if not key.split("/")[1].startswith("misstated"):
            assert c["located"] == c["n"], (key, tau2_result["misses"])
            assert c["last"] == 0  # the last assistant message is never the step these fail at
    assert failures["retail/misstated_status"] == {"n": 2, "located": 2, "last": 2}


def test_a_final_answer_misstating_the_last_writes_result_is_located_there(bench, runs, tmp_path):
    """An amount off by a tenth (airline's payment, telecom's refuel charge) and a negated message (telecom) were
    found by no rule before ``F1.misstated_outcome`` (``diagnosis.outcome_claims``): the final answer read against
    the last write's own result. Gold runs stay clean with it."""
    res = bench.evaluate(runs, tmp_path, "tau2", outcome_claims=True)
    assert res["gold"] == {d: {"n": 2, "healthy": 2, "clean": 2, "violations": 0} for d in SUBSET}
    misstated = {k: c for k, c in res["failures"].items() if k.split("/")[1].startswith("misstated")}
    assert set(misstated) == {"retail/misstated_status", "airline/misstated_amount", "telecom/misstated_amount",
                              "telecom/misstated_message"}
    assert all(c["located"] == c["n"] == c["last"] for c in misstated.values()), res["misses"]


def test_the_tau_bench_layout_gives_the_same_answers_where_it_can_hold_the_run(bench, runs, tmp_path):
    """tau-bench's layout has no place for the customer's own calls (telecom's phone), so only retail and airline."""
    res = bench.evaluate([r for r in runs if r.domain != "telecom"], tmp_path, "tau-bench", outcome_claims=True)
    assert res["gold_unclean"] == []
    assert all(c["located"] == c["n"] for k, c in res["failures"].items()), res["misses"]


def test_what_the_customer_reads_off_its_own_phone_is_not_off_script(bench, runs, tmp_path):
    """tau2 records the customer's own calls (``requestor: user``); the importer keeps each result as a user message.
    What it holds ("5G" on the status bar) is what the user saw, not an id it made up: no ``E.user_off_script``
    (before: at the first such result of every telecom run). The control: the same words, with an id of the user's
    making beside "5G", said by the user with no call of its own before them are off script ("5G" alone, two
    characters, is no id since the twenty-second session: in tau-bench's layout, which drops the customer's calls, 58
    of the 114 telecom gold runs were off script at it)."""
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.traces.importers import load_paths

    gold = next(r for r in runs if r.domain == "telecom" and r.kind == "gold" and "airplane" in r.gold.task.id)
    [path] = bench.write([gold], tmp_path, "tau2")
    [t] = load_paths([path])
    lab = Labeller().label(t.model_copy(update={"score": 0.0}))
    assert lab.first_signal.id in PLACEMENT and not [s for s in lab.signals if s.id.startswith("E.")]
    said_only = copy.copy(gold)
    said_only.conv = copy.copy(gold.conv)
    said_only.conv.tau2 = [m.model_copy(update={"content": m.content.replace("5G", "QX7Z9 5G")})
                           if m.role == "user" and m.content else m for m in gold.conv.tau2
                           if getattr(m, "requestor", None) != "user" and not (m.role == "user" and m.tool_calls)]
    (tmp_path / "control").mkdir()
    [path] = bench.write([said_only], tmp_path / "control", "tau2")
    [t] = load_paths([path])
    lab = Labeller().label(t.model_copy(update={"score": 0.0}))
    assert lab.first_signal.id == "E.user_off_script" and "QX7Z9" in lab.first_signal.evidence


def test_out_names_a_folder_that_is_made_when_missing(bench, tmp_path, capsys):
    """``--out DIR`` where DIR does not exist yet: the folder is made and the written files kept there (it was
    ``error: DIR: no such directory``, though ``dataset export`` and ``demo`` make their ``--out DIR``)."""
    out = tmp_path / "new" / "gold"
    assert bench.main(["--out", str(out), "--limit", "1", "--domains", "airline", "--formats", "tau-bench"]) == 0
    assert [p.name for p in out.iterdir()] == ["tau2_gold_paths.json"]
    assert "error" not in capsys.readouterr().err
