"""`dataset enqueue --url BAD`: one `error:` line, exit 2, before any input is read (fix, fourth session).
The queue opens at the first content failure, so a bad URL was reported only after the trajectories up to it
had been read and labelled (a whole file of healthy ones, a broken line's error instead of the URL's)."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.diagnosis.labeller import Labeller
from evoharness.traces.store import write_trajectories

from .helpers import make_traj

FORM = "a queue URL is sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"


@pytest.fixture
def labelled(monkeypatch) -> list[str]:
    """The ids of the trajectories the enqueue labelled."""
    seen: list[str] = []
    label = Labeller.label

    def spy(self, traj, *a, **kw):
        seen.append(traj.id)
        return label(self, traj, *a, **kw)

    monkeypatch.setattr(Labeller, "label", spy)
    return seen


@pytest.mark.parametrize(("url", "line"), [
    ("bogus://x", f"error: datasets.url: 'bogus://x': unsupported scheme 'bogus'; {FORM}"),
    ("not a url", f"error: datasets.url: 'not a url' is not a database URL; {FORM}"),
    ("sqlite:///{tmp}", "error: {tmp}: is a directory, not a SQLite queue file"),
    ("sqlite:///{tmp}/afile/queue.db", "error: {tmp}/afile/queue.db: {tmp}/afile is a file, not a directory"),
    # an in-memory database: "3 newly queued (3 in queue)", and all of it gone as the command ended
    ("sqlite:///:memory:", f"error: datasets.url: 'sqlite:///:memory:' is an in-memory database, gone when the "
                           f"command ends: nothing enqueued would be kept; {FORM}"),
    ("sqlite:///file:q.db?mode=memory&uri=true", "error: datasets.url: 'sqlite:///file:q.db?mode=memory&uri=true' is "
     f"an in-memory database, gone when the command ends: nothing enqueued would be kept; {FORM}"),
    ("sqlite://", f"error: datasets.url: 'sqlite://' is an in-memory database, gone when the command ends: nothing "
                  f"enqueued would be kept; {FORM}"),
    # a NUL, which no path holds: a ValueError traceback from sqlite3 (after 10 s of retries); the command line
    # refuses it before any command runs (cli._no_nul), the settings when it comes from a file or the environment
    ("sqlite:///{tmp}/q\x00.db", "error: argument 5 (after --url): 'sqlite:///{tmp}/q\\x00.db' holds a NUL "
                                 "character, which no argument can hold"),
])
def test_a_bad_url_is_refused_before_the_input_is_read(url, line, tmp_path, labelled, capsys):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [make_traj("healthy", score=1.0), make_traj("content", score=0.0)])
    with path.open("a") as fh:
        fh.write("{not json\n")  # read after the URL: its error never shows
    (tmp_path / "afile").write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["dataset", "enqueue", str(path), "--url", url.format(tmp=tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", line.format(tmp=tmp_path) + "\n")
    assert labelled == []  # nothing read or labelled
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_a_good_url_still_labels_and_queues(tmp_path, labelled, capsys):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, [make_traj("healthy", score=1.0), make_traj("content", score=0.0)])
    url = f"sqlite:///{tmp_path / 'new' / 'queue.db'}"  # a directory still to create is fine
    assert main(["dataset", "enqueue", str(path), "--url", url]) == 0
    assert capsys.readouterr().out == "2 trajectories, 1 content failure, 1 newly queued (1 in queue)\n"
    assert labelled == ["healthy", "content"] and (tmp_path / "new" / "queue.db").is_file()
