"""``TrajectoryStore.add`` on a disk that refuses the write (full, over quota, over the file size limit): the run's
trajectory store is appended to, not replaced, so a refused append must take back what it wrote and name the file."""

from __future__ import annotations

import errno
import resource

import pytest

from evoharness.traces.models import Trajectory
from evoharness.traces.store import TrajectoryStore


def _trajs(first: int, n: int) -> list[Trajectory]:
    return [Trajectory(id=f"t{i}", task_id=f"task{i}", messages=[{"role": "user", "content": "x" * 500}])
            for i in range(first, first + n)]


@pytest.fixture
def file_size_limit():
    """Set RLIMIT_FSIZE's soft limit for the block (Python ignores SIGXFSZ: a write past it is EFBIG, after the part
    that fits), then restore it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def set_limit(n: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))

    yield set_limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_refused_append_names_the_store_leaves_no_half_line_and_is_retried_whole(tmp_path, file_size_limit):
    """An append past the disk's room said `cannot write a file of the run: No space left on device` (no file named),
    left the part of the batch that fit (its last line cut, which every later append ran into) and counted the
    batch's ids as stored, so the same add after freeing room skipped them: lost trajectories."""
    store = TrajectoryStore(tmp_path / "trajectories.jsonl")
    assert store.add(_trajs(0, 2)) == 2
    before = store.path.read_bytes()
    file_size_limit(len(before) + 700)  # room for one more line and a part of the next
    with pytest.raises(OSError) as e:
        store.add(_trajs(2, 3))
    assert e.value.errno == errno.EFBIG and e.value.filename == str(store.path)
    file_size_limit(resource.RLIM_INFINITY)
    assert store.path.read_bytes() == before  # nothing of the refused batch, no half line
    assert store.add(_trajs(2, 3)) == 3  # retried whole: none skipped as stored
    assert [t.id for t in TrajectoryStore(store.path)] == ["t0", "t1", "t2", "t3", "t4"]


def test_an_id_stored_with_another_line_is_a_conflict_logged_not_a_silent_duplicate(tmp_path):
    """``TrajectoryStore.add`` keeps the first copy of an id: the same trajectory again is a duplicate, as before;
    another trajectory under a stored id (also earlier in the same call, or stored before the store was reopened)
    is not appended either, but noted in ``conflicts`` and logged (store.conflict)."""
    from structlog.testing import capture_logs

    from evoharness.traces.models import Trajectory
    from evoharness.traces.store import TrajectoryStore

    def traj(tid, score):
        return Trajectory.model_validate({"id": tid, "task_id": "t", "messages": [{"role": "user", "content": "hi"}],
                                          "score": score})

    path = tmp_path / "trajectories.jsonl"
    store = TrajectoryStore(path)
    assert store.add([traj("a", 0.1), traj("a", 0.1), traj("b", 0.2), traj("b", 0.3)]) == 2
    assert store.conflicts == ["b"]
    again = TrajectoryStore(path)
    with capture_logs() as logs:
        assert again.add([traj("a", 0.1), traj("a", 0.5), traj("c", 0.0)]) == 1
    assert again.conflicts == ["a"]
    assert [(e["event"], e["trajectory"]) for e in logs if e["log_level"] == "warning"] == [("store.conflict", "a")]
    assert [t.score for t in TrajectoryStore(path)] == [0.1, 0.2, 0.0]
