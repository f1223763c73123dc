"""``Labeller.labelled``: runs labelled in batches, detector by detector, give ``label``'s labels, in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.importers import iter_files, load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# tool-calling, coding, multi-agent and chat shapes, healthy and failed (no held-out set among them)
ROOTS = (FIXTURES / "data" / "tau_bench_airline_gpt4o", FIXTURES / "data" / "mini_swe_agent_sample",
         FIXTURES / "traces" / "tau_retail", FIXTURES / "traces" / "tau2", FIXTURES / "traces" / "swe_agent",
         FIXTURES / "traces" / "ag2", FIXTURES / "traces" / "autogen", FIXTURES / "traces" / "openhands")


@pytest.fixture(scope="module")
def runs() -> list:
    out = []
    for path in iter_files(list(ROOTS)):
        out.extend(load_file(path))
    return out


@pytest.mark.parametrize("batch", [1, 5, 16, 10_000])
def test_labelled_gives_each_run_its_one_at_a_time_label_in_order(runs, batch):
    labeller = Labeller()
    want = [labeller.label(t.model_copy()).model_dump_json() for t in runs]
    classes = {lab.split('"failure_class":"')[1].split('"')[0] for lab in want}
    assert len(runs) > 30 and {"healthy", "F2", "F4"} <= classes  # several shapes share each batch
    got = [(t.id, lab.model_dump_json()) for t, lab in labeller.labelled([t.model_copy() for t in runs], batch=batch)]
    assert [i for i, _ in got] == [t.id for t in runs]
    assert [lab for _, lab in got] == want


def test_labelled_pairs_each_item_and_reads_a_stream_one_batch_ahead(runs):
    pulled = []

    def stream():
        for n, t in enumerate(runs[:12]):
            pulled.append(n)
            yield (n, t)

    out = Labeller().labelled(stream(), traj_of=lambda item: item[1], batch=5)
    (n, t), lab = next(out)
    assert (n, lab.trajectory_id) == (0, t.id) and len(pulled) == 5  # a batch read, not the whole stream
    rest = list(out)
    assert [item[0] for item, _ in rest] == list(range(1, 12))
    assert all(lab.trajectory_id == item[1].id for item, lab in rest)
