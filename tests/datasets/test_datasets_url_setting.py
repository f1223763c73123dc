"""`datasets.url` is checked where the settings are read, and a SQLite URI URL (`sqlite:///file:PATH?...&uri=true`)
is read as the file it names (fuzz, eighteenth session).

Before, a configured URL that can hold no queue (another scheme, an in-memory database, a NUL) was refused by
`dataset enqueue` only: `run`, `demo` and `serve` took it, and a run's content failures went to an in-memory queue
that was gone as the run ended. A read-only URL (`mode=ro`) for a queue to write was 'training queue ...
unreachable: attempt to write a readonly database', and a URI URL's `file:` prefix was read as a directory:
`sqlite:///file:/tmp/q.db?mode=ro&uri=true` left a directory `file:/tmp` in the current one."""

from __future__ import annotations

import pytest

from evoharness.cli import main
from evoharness.config import load_settings
from evoharness.datasets.queue import TrainingQueue
from evoharness.errors import InputError
from evoharness.traces.store import write_trajectories

from .helpers import make_traj

FORM = "a queue URL is sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("sqlite:///:memory:", "is an in-memory database"),
        ("sqlite://", "is an in-memory database"),
        ("sqlite:///file:q.db?mode=memory&uri=true", "is an in-memory database"),
        ("mysql://u@h/db", "unsupported scheme 'mysql'"),
        ("not a url", "is not a database URL"),
        ("sqlite:///q\x00.db", "holds a NUL character"),
    ],
)
def test_a_url_that_can_hold_no_queue_is_refused_with_the_settings(url, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        load_settings(overrides=[f"datasets.url={url}"], environ={})
    assert "datasets.url" in str(e.value) and says in str(e.value) and FORM in str(e.value)
    # a command that reads settings and writes nothing else says it in one line (rollout would write trajectories)
    argv = [
        "--set",
        f"datasets.url={url}",
        "rollout",
        "--env",
        "synthetic",
        "--tasks",
        "1",
        "--rollouts",
        "1",
        "--harness",
        str(tmp_path / "h"),
        "--out",
        str(tmp_path / "t.jsonl"),
        "--sandbox",
        "inprocess",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_sqlite_uri_url_names_its_file_not_a_directory_called_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    traces = tmp_path / "t.jsonl"
    write_trajectories(traces, [make_traj("content", score=0.0)])
    url = f"sqlite:///file:{tmp_path / 'sub' / 'q.db'}?uri=true"
    assert main(["dataset", "enqueue", str(traces), "--url", url]) == 0, capsys.readouterr().err
    assert (tmp_path / "sub" / "q.db").is_file() and not (tmp_path / "file:").exists()
    capsys.readouterr()
    assert main(["dataset", "status", "--url", url]) == 0
    assert "1" in capsys.readouterr().out


@pytest.mark.parametrize("query", ["mode=ro&uri=true", "immutable=1&uri=true"])
def test_a_read_only_url_reads_a_queue_but_is_refused_for_one_to_write(query, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    traces = tmp_path / "t.jsonl"
    write_trajectories(traces, [make_traj("content", score=0.0)])
    db = tmp_path / "q.db"
    assert main(["dataset", "enqueue", str(traces), "--url", f"sqlite:///{db}"]) == 0
    capsys.readouterr()
    before = db.read_bytes()
    url = f"sqlite:///file:{db}?{query}"
    assert main(["dataset", "status", "--url", url]) == 0  # reading through it is what it is for
    capsys.readouterr()
    write_trajectories(traces, [make_traj("content-2", score=0.0)])
    assert main(["dataset", "enqueue", str(traces), "--url", url]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (
        "",
        f"error: datasets.url: {url!r} opens the queue read-only: nothing could be enqueued; {FORM}\n",
    )
    with pytest.raises(InputError, match="read-only"):
        TrainingQueue(url)  # the queue a run or the service writes: refused before the run starts
    assert db.read_bytes() == before and not (tmp_path / "file:").exists()
