"""The fresh SWE-bench runs of other people vendored in benchmarks/data/swe_fresh_runs (mini-swe-agent 1.17 +
GPT-5-mini, SWE-bench Verified) and the blind dev labels of their 14 unresolved runs
(benchmarks/data/swe_fresh_dev_labels.json: an LLM helper's, not human labels, committed before the labeller was
run on them). Reads only the repository, no public data folder.

The labelled set ``swe-fresh-dev`` is held back: its figures are scored by ``benchmarks/label_accuracy.py --only
swe-fresh-dev`` (docs/diagnosis.md); here only the join, and the properties of the two resolved runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.diagnosis.accuracy import SWE_FRESH_SET, baselines_for, read_swe_dev_labels, swe_dev_records
from evoharness.diagnosis.labeller import Labeller
from evoharness.errors import InputError
from evoharness.traces.importers import load_paths

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
RUNS = DATA / "swe_fresh_runs"
LABELS = DATA / "swe_fresh_dev_labels.json"


@pytest.fixture(scope="module")
def trajs():
    return list(load_paths([RUNS]))


def test_the_vendored_runs_read_with_their_own_reports_outcome(trajs):
    by_id = {str(t.task_id): t.score for t in trajs}
    assert len(by_id) == len(trajs) == 16
    assert sorted(i for i, s in by_id.items() if s == 1) == ["django__django-11099", "django__django-11133"]
    assert sum(s == 0 for s in by_id.values()) == 14


def test_every_blind_label_joins_its_unresolved_run(trajs):
    labels = read_swe_dev_labels(LABELS, halves=("",))
    dropped: list[str] = []
    sets = swe_dev_records(labels, trajs, dropped, set_name=SWE_FRESH_SET)
    assert dropped == []
    assert list(sets) == [SWE_FRESH_SET] and len(sets[SWE_FRESH_SET]) == len(labels) == 14
    assert {h.failure_class for _, h in sets[SWE_FRESH_SET]} == {"F1", "F2", "F4"}
    assert "first write" in baselines_for(SWE_FRESH_SET)  # scored beside the coding-run baselines
    for t, h in sets[SWE_FRESH_SET]:  # every label's quote is in the assistant message it names
        quote = labels[str(t.task_id)]["quote"]
        m = t.messages[h.step]
        assert m["role"] == "assistant" and quote in str(m["content"])


def test_the_fresh_label_file_has_no_halves_and_the_halved_reader_says_so():
    with pytest.raises(InputError, match="out of range"):
        read_swe_dev_labels(LABELS)  # no "half": not a swe_mini_dev_labels.json
    rows = json.loads(LABELS.read_text())["labels"]
    assert all("half" not in r for r in rows)


def test_the_resolved_fresh_runs_stay_healthy_with_no_process_signal(trajs):
    """Held back until now (the rules were written before these runs were vendored): django-11099 edits and
    re-runs its check; django-11133's first verification run fails (the agent mends it and re-runs). Neither
    an edit -> re-run cycle nor a recovered error is a failure."""
    labeller = Labeller()
    resolved = [(t, labeller.label(t)) for t in trajs if t.score == 1]
    assert len(resolved) == 2
    assert all(lab.failure_class == "healthy" for _, lab in resolved), [(t.task_id, lab.failure_class)
                                                                       for t, lab in resolved]
    assert not [(t.task_id, s.id) for t, lab in resolved for s in lab.signals if s.id[:2] in ("F2", "F3")]
