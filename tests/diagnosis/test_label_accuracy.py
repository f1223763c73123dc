"""The labeller against human step-level failure labels (Who&When, AgentRx) and this project's dev labels of
tau-bench airline runs (benchmarks/data: an LLM helper's, not human labels), beside trivial labellers.

The rule is fixed: on every set and every figure the labeller must be strictly above every trivial
labeller that reports that figure on the same records. Where it is not yet, the case is an expected
failure that names the figure (strict: it starts failing -- and the mark must go -- once it passes).
Reads the public data folder beside the repository; skipped with the reason when it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.diagnosis.accuracy import (
    BASELINES,
    DEV_RUNS,
    FIGURES,
    Prediction,
    dev_labelled_records,
    labelled_records,
    prediction_of,
    read_dev_labels,
    score_set,
    speaker,
)
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import load_paths

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
DEV_LABELS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "tau_airline_dev_labels.json"
SETS = ("who-and-when/Algorithm-Generated", "who-and-when/Hand-Crafted", "agentrx/Magentic-One",
        "tau-airline-dev/tune", "tau-airline-dev/test", "tau-airline-dev/test2",
        "tau-airline-dev/test3")  # the last four: dev labels by this project, not human
# not yet above every baseline (measured once the rules were fixed on Algorithm-Generated; see README)
NOT_YET = {
    ("who-and-when/Hand-Crafted", "agent"): "33/58 vs last message 35/58",
}


@pytest.fixture(scope="module")
def scores():
    roots = [DATA / "who_and_when", DATA / "agentrx_magentic_one"]
    if not all(r.is_dir() for r in roots):
        pytest.skip(f"public human-labelled sets not found under {DATA.resolve()} (CI lays shared/ beside the clone)")
    labeller = Labeller()

    def ours(t) -> Prediction:
        return prediction_of(t, labeller.label(t))

    sets = labelled_records(load_paths(roots))
    if not (DATA / DEV_RUNS).is_file():
        pytest.skip(f"{DATA / DEV_RUNS} not found (CI lays shared/ beside the clone)")
    sets.update(dev_labelled_records(read_dev_labels(DEV_LABELS), load_paths([DATA / DEV_RUNS])))
    return {name: score_set(name, recs, {"evoharness": ours, **BASELINES}) for name, recs in sets.items()}


def _cases():
    for name in SETS:
        for fig in FIGURES:
            marks = [pytest.mark.xfail(strict=True, reason=NOT_YET[(name, fig)])] if (name, fig) in NOT_YET else []
            yield pytest.param(name, fig, marks=marks, id=f"{name}-{fig}")


@pytest.mark.parametrize("name, figure", list(_cases()))
def test_labeller_is_strictly_above_every_trivial_baseline(scores, name, figure):
    s = scores[name]
    ours = s.figures["evoharness"].get(figure)
    rivals = {b: s.figures[b][figure] for b in BASELINES if figure in s.figures.get(b, {})}
    if ours is None:
        assert not rivals, f"{name} {figure}: baselines report it, the labeller does not"
        pytest.skip(f"{name} has no {figure} labels")
    assert rivals, f"{name} {figure}: no trivial baseline to compare with"
    for base, (hits, n) in rivals.items():
        assert ours[0] / ours[1] > hits / n, f"{name} {figure}: {ours[0]}/{ours[1]} <= {base} {hits}/{n}"


def test_sets_have_the_published_sizes(scores):
    assert {k: v.n for k, v in scores.items()} == {
        "who-and-when/Algorithm-Generated": 126, "who-and-when/Hand-Crafted": 58, "agentrx/Magentic-One": 44,
        "tau-airline-dev/tune": 20, "tau-airline-dev/test": 20, "tau-airline-dev/test2": 28,
        "tau-airline-dev/test3": 48}


def test_holdout_split_cuts_only_the_tuning_set_into_disjoint_stable_parts():
    from evoharness.diagnosis.accuracy import TUNING_SET, HumanLabel, holdout_split
    from evoharness.traces.models import Trajectory

    def rec(i):
        return Trajectory(id=f"who-and-when:Algorithm-Generated:{i}", task_id=str(i)), HumanLabel(1, "A", None)

    tuning = [rec(i) for i in range(60)]
    test = [rec(f"t{i}") for i in range(5)]
    parts = holdout_split({TUNING_SET: tuning, "who-and-when/Hand-Crafted": test})
    assert parts["who-and-when/Hand-Crafted"] == test
    held, tune = parts[f"{TUNING_SET}/held-out"], parts[f"{TUNING_SET}/tuning"]
    assert sorted(t.id for t, _ in held + tune) == sorted(t.id for t, _ in tuning)
    assert not {t.id for t, _ in held} & {t.id for t, _ in tune}
    assert 10 <= len(held) <= 30  # about a third
    assert holdout_split({TUNING_SET: tuning})[f"{TUNING_SET}/held-out"] == held  # the same cut every time


def test_signal_breakdown_counts_the_chosen_detector_and_the_ceiling_among_all_signals():
    from types import SimpleNamespace

    from evoharness.diagnosis.accuracy import HumanLabel, signal_breakdown
    from evoharness.diagnosis.models import FailureClass, Signal
    from evoharness.traces.models import Trajectory

    def sig(sid, step):
        return Signal(id=sid, failure_class=FailureClass.F4, step=step, evidence="")

    msgs = [{"role": "user", "content": "q"}] + [{"role": "assistant", "name": n, "content": "x"} for n in "ABC"]
    recs = [(Trajectory(id=f"r{i}", task_id=str(i), messages=msgs), HumanLabel(step, agent, None))
            for i, (step, agent) in enumerate([(1, "A"), (2, "B"), (3, "C")])]
    labels = {  # r0: right step and agent; r1: wrong step, a later signal at the human step; r2: nothing there
        "r0": SimpleNamespace(first_signal=sig("F4.x", 1), signals=[sig("F4.x", 1)], agent="A"),
        "r1": SimpleNamespace(first_signal=sig("F4.x", 1), signals=[sig("F4.x", 1), sig("F1.y", 2)], agent=None),
        "r2": SimpleNamespace(first_signal=sig("F1.y", 1), signals=[sig("F1.y", 1)], agent="C"),
    }
    out = signal_breakdown("s", recs, lambda t: labels[t.id])
    assert out.rows == {"F4.x": [2, 1, 1], "F1.y": [1, 0, 1]}
    assert out.any_signal_at_step == 2
    assert "| F4.x | 2 | 1/2 | 1/2 |" in out.table() and "2/3" in out.table()
    assert out.to_json()["first_signal"]["F1.y"] == {"records": 1, "step_exact": 0, "agent": 1}


def test_class_confusion_counts_each_labelled_class_by_the_predicted_one_and_skips_unlabelled_runs():
    from evoharness.diagnosis.accuracy import HumanLabel, class_confusion
    from evoharness.traces.models import Trajectory

    labelled = [("F1", "F4"), ("F1", "F1"), ("E", "F4"), ("F4", "F4"), ("F2", None), (None, "F4")]
    recs = [(Trajectory(id=f"r{i}", task_id=str(i)), HumanLabel(1, None, h)) for i, (h, _) in enumerate(labelled)]
    preds = {f"r{i}": Prediction(failure_class=p) for i, (_, p) in enumerate(labelled)}
    out = class_confusion("s", recs, lambda t: preds[t.id])
    assert out.to_json() == {"E": {"F4": 1}, "F1": {"F1": 1, "F4": 1}, "F2": {"(none)": 1}, "F4": {"F4": 1}}
    table = out.table()
    assert "s (n=5)" in table  # the unlabelled run is not counted
    assert "| F1 | 0 | 1 | 1 | 1/2 |" in table and "| E | 0 | 0 | 1 | 0/1 |" in table
    assert "no class labels" in class_confusion("w", recs[-1:], lambda t: preds[t.id]).table()


@pytest.mark.parametrize("only", [[], ["who-and-when/Hand-Crafted"],
                                  ["who-and-when/Algorithm-Generated", "agentrx/Magentic-One"],
                                  ["who-and-when/Algorithm-Generated"],
                                  ["who-and-when/Algorithm-Generated/held-out"]])
@pytest.mark.parametrize("flag", ["--by-signal", "--by-record"])
def test_by_signal_is_refused_unless_only_the_tuning_two_thirds_are_named(flag, only, capsys, monkeypatch):
    """Per-detector results and each record's labels are per-record knowledge: of the tuning two thirds only."""
    import runpy
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "label_accuracy.py"
    argv = [str(script), flag, "--holdout", *[a for o in only for a in ("--only", o)]]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}") and err.count("\n") == 1


def test_by_record_sets_each_human_label_beside_the_labellers_misses_first():
    from types import SimpleNamespace

    from evoharness.diagnosis.accuracy import HumanLabel, record_rows, record_table
    from evoharness.diagnosis.models import FailureClass, Signal
    from evoharness.traces.models import Trajectory

    def sig(sid, step):
        return Signal(id=sid, failure_class=FailureClass.F4, step=step, evidence="")

    msgs = [{"role": "user", "content": "q"}] + [{"role": "assistant", "name": n, "content": "x"} for n in "ABCD"]
    recs = [(Trajectory(id=f"r{i}", task_id=str(i), messages=msgs), HumanLabel(step, agent, None))
            for i, (step, agent) in enumerate([(1, "A"), (2, "B"), (4, "D")])]
    labels = {  # r0 right; r1 one step early, no agent of its own (the speaker at its step); r2 three steps early
        "r0": SimpleNamespace(first_signal=sig("F4.x", 1), signals=[sig("F4.x", 1)], agent="A"),
        "r1": SimpleNamespace(first_signal=sig("F4.x", 1), signals=[sig("F4.x", 1), sig("F1.y", 2)], agent=None),
        "r2": SimpleNamespace(first_signal=sig("F1.y", 1), signals=[sig("F1.y", 1)], agent="D"),
    }
    rows = record_rows(recs, lambda t: labels[t.id])
    assert rows[1] == {"record": "r1", "human_step": 2, "human_agent": "B", "step": 1, "agent": "A",
                       "first_signal": "F4.x", "step_exact": False, "agent_right": False,
                       "signals": [["F4.x", 1], ["F1.y", 2]]}
    assert [(r["step_exact"], r["agent_right"]) for r in rows] == [(True, True), (False, False), (False, True)]
    table = record_table("s", rows).splitlines()
    assert table[0] == "s (n=3): each record, the human label beside the rule labeller's"
    assert [line.split(" | ")[0] for line in table[3:]] == ["| r2", "| r1", "| r0"]  # the farthest miss first
    assert table[4] == "| r1 | 2 | B | 1 | A | F4.x | no | no | F4.x @1, F1.y @2 |"


@pytest.mark.parametrize("opts", [["--context", "100"], ["--window", "-1"], ["--context", "4096"],
                                  ["--labeller", "rules", "--window", "5"], ["--judge-timeout", "30"]])
def test_the_judges_options_without_the_judge_are_refused_by_name(opts, capsys, monkeypatch):
    import runpy
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "label_accuracy.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--swe-blind2-labels", "", *opts])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 2
    assert capsys.readouterr().err == f"error: {opts[-2]} is for --labeller llm\n"


@pytest.mark.parametrize("seconds", ["0", "-1", "inf", "nan"])
def test_the_judge_timeout_is_a_positive_finite_number_of_seconds(seconds, capsys, monkeypatch):
    import runpy
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "label_accuracy.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--swe-blind2-labels", "", "--labeller", "llm",
                                      "--model", "openai:http://127.0.0.1:9/v1#m", "--judge-timeout", seconds])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("error: --judge-timeout must be a finite positive number of seconds")


def test_the_humans_agent_is_the_agent_answerable_for_the_humans_step():
    # Who&When chooses the mistake agent and the mistake step jointly: the agent is the one acting at the step -- its
    # speaker, or at a terminal's output the expert whose code it ran (the humans' own convention). The labeller's
    # agent follows the same rule (responsible_agent at its step), so the agent figure moves with the step. Checked
    # on the tuning two thirds of Algorithm-Generated only: all but one record (71 of 72; record 15 blames the
    # author of an algorithm a verifier re-posted). The speaker alone, without the executor rule, gives 69.
    from evoharness.diagnosis.accuracy import TUNING_SET, _norm, holdout_split
    from evoharness.diagnosis.multiagent import responsible_agent

    root = DATA / "who_and_when"
    if not root.is_dir():
        pytest.skip(f"public human-labelled sets not found under {DATA.resolve()} (CI lays shared/ beside the clone)")
    recs = holdout_split(labelled_records(load_paths([root / "Who&When" / "Algorithm-Generated"])))[
        f"{TUNING_SET}/tuning"]
    assert len(recs) == 72
    joint = sum(_norm(responsible_agent(t.messages, h.step)) == _norm(h.agent) for t, h in recs)
    spoken = sum(_norm(speaker(t, h.step)) == _norm(h.agent) for t, h in recs)
    assert joint >= len(recs) - 1 and joint > spoken, (joint, spoken)


def _dev_file(tmp_path, rows) -> Path:
    p = tmp_path / "dev.json"
    p.write_text(json.dumps({"about": "dev labels, not human labels", "labels": rows}))
    return p


def test_dev_labels_join_tau_runs_by_task_and_trial_and_a_simulated_users_failure_is_class_e(tmp_path):
    from evoharness.diagnosis.accuracy import dev_labelled_records, read_dev_labels
    from evoharness.traces.models import Trajectory

    def run(task, trial):
        msgs = [{"role": "system", "content": "p"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "bye"}]
        return Trajectory(id=f"f:{task}:{trial}", task_id=str(task), rollout=trial, messages=msgs)

    row = {"quote": "q", "reason": "r", "confidence": "high"}
    labels = read_dev_labels(_dev_file(tmp_path, [
        {**row, "task_id": 1, "trial": 0, "half": "tune", "step": 2, "category": "Invention of New Information",
         "party": "agent"},
        {**row, "task_id": 1, "trial": 2, "half": "test", "step": 3, "category": "Underspecified User Intent",
         "party": "user"},
        {**row, "task_id": 2, "trial": 0, "half": "tune", "step": 9, "category": "Invalid Invocation",
         "party": "agent"}]))  # step 9: past the run's end, left out
    sets = dev_labelled_records(labels, [run(1, 0), run(1, 1), run(1, 2), run(2, 0)])
    assert {k: [(t.id, h.step, h.agent, h.failure_class) for t, h in v] for k, v in sets.items()} == {
        "tau-airline-dev/test": [("f:1:2", 3, None, "E")],
        "tau-airline-dev/tune": [("f:1:0", 2, None, "F1")]}


_GOOD = {"task_id": 1, "trial": 0, "half": "tune", "step": 2, "category": "Invalid Invocation", "party": "agent"}


@pytest.mark.parametrize("rows", [None, [{"task_id": 1}], [{**_GOOD, "half": "dev"}],
                                  # an unknown or a non-string category (was: run dropped / a traceback), a bool or
                                  # negative step
                                  [{**_GOOD, "category": "x"}], [{**_GOOD, "category": None}],
                                  [{**_GOOD, "step": True}], [{**_GOOD, "step": -1}]])
def test_a_file_that_is_no_dev_label_file_is_an_input_error(tmp_path, rows):
    from evoharness.diagnosis.accuracy import read_dev_labels
    from evoharness.errors import InputError

    p = _dev_file(tmp_path, rows) if rows is not None else tmp_path / "missing.json"
    with pytest.raises(InputError, match="not a dev-label file"):
        read_dev_labels(p)


def test_a_dev_label_file_nested_too_deeply_is_an_input_error(tmp_path):
    from evoharness.diagnosis.accuracy import read_dev_labels
    from evoharness.errors import InputError

    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="not a dev-label file"):
        read_dev_labels(p)


def test_the_dev_label_halves_are_the_sample_scripts_and_cover_every_failed_airline_run_once(full_shared_data):
    """Every label's half is the one ``benchmarks/tau_dev_sample.py`` draws for its run (first sample, test2,
    test3), the three draws are disjoint, and together they are all the reward-0 airline runs."""
    from tests.modules import load_file

    sample = load_file(Path(__file__).resolve().parents[2] / "benchmarks" / "tau_dev_sample.py", "tau_dev_sample")
    records = json.loads((full_shared_data / DEV_RUNS).read_text())
    drawn = sample.sample(records) + sample.test2(records) + sample.test3(records)
    halves = {(r["task_id"], r["trial"]): r["half"] for r in drawn}
    assert len(halves) == len(drawn) == sum(1 for r in records if not r["reward"]) == 116
    labels = json.loads(DEV_LABELS.read_text())["labels"]
    assert {(r["task_id"], r["trial"]): r["half"] for r in labels} == halves
    assert sum(h == "test3" for h in halves.values()) == 48


def _who_when_log(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    history = [{"role": "assistant", "name": "Planner_Expert", "content": "Let us look it up."},
               {"role": "assistant", "name": "Checker_Expert", "content": "The answer is 12."}]
    (folder / name).write_text(json.dumps({"question": "How many?", "history": history, "mistake_agent":
                                           "Planner_Expert", "mistake_step": "0", "mistake_reason": "r"}))


@pytest.mark.parametrize("only,shown", [
    ([], ["who-and-when/Algorithm-Generated/tuning"]),  # the tuning view: the test set left out, and said so
    (["who-and-when/Hand-Crafted"], ["who-and-when/Hand-Crafted"]),  # named: scored
])
def test_holdout_leaves_the_test_sets_out_unless_named(only, shown, tmp_path, capsys, monkeypatch):
    """``--holdout`` is the tuning view (TEAM.md: run label_accuracy only with it while tuning): it printed the test
    sets' figures beside the tuning sets' until 2026-12-07. A folder of one tuning and one test log, no public data."""
    import runpy
    import sys

    for subset in ("Algorithm-Generated", "Hand-Crafted"):
        _who_when_log(tmp_path / subset, "1.json")
        _who_when_log(tmp_path / subset, "3.json")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "label_accuracy.py"
    argv = [str(script), "--holdout", "--data", str(tmp_path), *[a for o in only for a in ("--only", o)]]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(script), run_name="__main__")
    assert e.value.code == 0
    out = capsys.readouterr().out
    rows = {line.split(" (n=")[0].strip("| ") for line in out.splitlines() if " (n=" in line}
    assert rows == set(shown)
    assert ("test sets left out (not scored): who-and-when/Hand-Crafted" in out) is (not only)


def test_holdout_leaves_every_test_split_out_the_tau_dev_ones_included():
    """TEAM.md's test sets are Hand-Crafted, AgentRx Magentic-One, swe-blind2 and the tau airline dev sample's test,
    test2 and test3 splits; ``--holdout`` (the tuning view) left the three tau splits in and printed their figures.
    By set name alone: no data is read."""
    from evoharness.diagnosis.accuracy import without_test_sets

    names = ["who-and-when/Algorithm-Generated/tuning", "who-and-when/Algorithm-Generated/held-out",
             "who-and-when/Hand-Crafted", "agentrx/Magentic-One", "tau-airline-dev/tune", "tau-airline-dev/test",
             "tau-airline-dev/test2", "tau-airline-dev/test3", "swe-mini-dev/tune", "swe-mini-dev/test",
             "swe-fresh-dev", "swe-blind2-dev"]
    kept, left = without_test_sets(dict.fromkeys(names, []))
    assert sorted(left) == ["agentrx/Magentic-One", "swe-blind2-dev", "tau-airline-dev/test", "tau-airline-dev/test2",
                            "tau-airline-dev/test3", "who-and-when/Hand-Crafted"]
    assert set(kept) == set(names) - set(left)
    kept, left = without_test_sets(dict.fromkeys(names, []), ["tau-airline-dev/test2"])  # named: scored
    assert "tau-airline-dev/test2" in kept and "tau-airline-dev/test2" not in left
