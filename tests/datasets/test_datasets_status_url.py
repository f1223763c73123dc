"""`dataset status --url` (and an export of the queue) on a URL that holds no queue: one `error:` line, exit 2,
nothing created, no password shown, no hang. Before: a mistyped SQLite path said "0 items" and left a new
database (and its directories) behind; another SQLite database got a training_queue table; 'http://...' said
"Can't load plugin: sqlalchemy.dialects:http"; a server that took the connection and never answered held the
command forever; the password of a postgresql:// URL was printed."""

from __future__ import annotations

import socket
import sqlite3
import threading

import pytest

from evoharness.cli import main
from evoharness.datasets import queue as queue_module


def _status(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["dataset", "status", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def server():
    """A TCP server on 127.0.0.1 that answers every connection with ``reply`` (None: reads, never answers)."""
    made = []

    def start(reply: bytes | None) -> int:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        held = []

        def serve():
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                held.append(conn)
                if reply is not None:
                    conn.recv(4096)
                    conn.sendall(reply)
                    conn.close()

        threading.Thread(target=serve, daemon=True).start()
        made.append((sock, held))
        return sock.getsockname()[1]

    yield start
    for sock, held in made:
        sock.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize(("url", "line"), [
    ("http://example.com/q", "error: datasets.url: 'http://example.com/q': unsupported scheme 'http'; a queue URL "
                             "is sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"),
    ("ftp://u:pw@x/q", "error: datasets.url: 'ftp://u:***@x/q': unsupported scheme 'ftp'; a queue URL is "
                       "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"),
    ("not a url", "error: datasets.url: 'not a url' is not a database URL; a queue URL is sqlite:///PATH or "
                  "postgresql+psycopg://USER@HOST/DB"),
    # URLs SQLAlchemy cannot parse (a bad port, an unclosed IPv6 host): the password was shown as typed
    ("postgresql+psycopg://u:secret@host:abc/db", "error: datasets.url: 'postgresql+psycopg://u:***@host:abc/db' is "
     "not a database URL; a queue URL is sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"),
    ("postgresql://u:secret@[::1", "error: datasets.url: 'postgresql://u:***@[::1' is not a database URL; a queue "
     "URL is sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"),
])
def test_a_url_of_another_scheme_or_none_is_one_line(url, line, capsys):
    assert _status(capsys, "--url", url) == (2, "", line + "\n")


def test_a_mistyped_sqlite_path_is_an_error_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = _status(capsys, "--url", "sqlite:///typo/dir/queue.db")
    assert (code, out) == (2, "")
    assert err == "error: typo/dir/queue.db: no training queue here (nothing enqueued yet, or a mistyped path)\n"
    assert list(tmp_path.iterdir()) == []
    code, out, err = main(["dataset", "export", "--out", "ex", "--source", "queue",
                           "--url", "sqlite:///typo/dir/queue.db"]), *capsys.readouterr()
    assert code == 2 and "no training queue here" in err and list(tmp_path.iterdir()) == []


def test_another_sqlite_database_or_a_garbage_file_is_left_as_it_was(tmp_path, capsys):
    other = tmp_path / "checkpoints.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("create table checkpoints (id integer)")
    db.close()
    before = other.read_bytes()
    code, _, err = _status(capsys, "--url", f"sqlite:///{other}")
    assert code == 2 and err == (f"error: sqlite:///{other}: holds no training queue (nothing enqueued there yet, "
                                 "or another database)\n")
    assert other.read_bytes() == before  # no training_queue table added
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not a database\n" * 100)
    code, _, err = _status(capsys, "--url", f"sqlite:///{garbage}")
    assert code == 2 and err.startswith(f"error: training queue 'sqlite:///{garbage}' unreachable: DatabaseError: ")
    assert garbage.read_text() == "not a database\n" * 100
    code, _, err = _status(capsys, "--url", f"sqlite:///{tmp_path}")
    assert code == 2 and err == f"error: {tmp_path}: not a file, so no training queue\n"


def test_a_fresh_home_says_nothing_is_queued_yet_and_creates_nothing(tmp_path, capsys):
    home = tmp_path / "home"
    code, out, err = _status(capsys, "--set", f"home={home}")
    assert (code, err) == (0, "")
    assert out == f"training queue: 0 items (none yet: the first enqueue creates {home / 'queue.db'})\n"
    assert not home.exists()
    assert main(["dataset", "status", "--json", "--set", f"home={home}"]) == 0
    assert '"total": 0' in capsys.readouterr().out and not home.exists()


def test_postgres_refused_garbage_or_silent_is_one_line_without_the_password(server, monkeypatch, capsys):
    pytest.importorskip("psycopg")
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    closed_port = free.getsockname()[1]
    free.close()
    monkeypatch.setattr(queue_module, "CONNECT_TIMEOUT_S", 1)
    for port in (closed_port, server(b"HTTP/1.0 200 OK\r\n\r\n<html>garbage</html>"), server(None)):
        code, out, err = _status(capsys, "--url", f"postgresql+psycopg://u:s3cret@127.0.0.1:{port}/db")
        assert (code, out) == (2, ""), err
        assert len(err.splitlines()) == 1 and "Traceback" not in err and "s3cret" not in err
        assert err.startswith(f"error: training queue 'postgresql+psycopg://u:***@127.0.0.1:{port}/db' unreachable: ")


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_datasets_url_setting_is_an_error_not_the_default_queue(tmp_path, capsys, value):
    """'--set datasets.url=' (a variable left unset) read the default queue under home as if no URL was given."""
    home = tmp_path / "home"
    assert main(["dataset", "status", "--set", f"home={home}", "--set", f"datasets.url={value}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("error: ") and "datasets.url" in err and "empty URL" in err
    assert not home.exists() or not any(home.rglob("queue.db"))


def test_enqueue_to_an_unreachable_postgres_queue_labels_nothing(tmp_path, monkeypatch, capsys):
    """`dataset enqueue --url postgresql://...` to a closed port said so only after the input had been labelled
    up to its first content failure (or to its end). It connects before reading input. Test fails before
    (the labeller ran)."""
    pytest.importorskip("psycopg")
    from evoharness.diagnosis.labeller import Labeller
    from evoharness.traces.store import write_trajectories
    from tests.datasets.helpers import make_traj

    path = tmp_path / "t.jsonl"
    write_trajectories(path, [make_traj("a", score=1.0), make_traj("b", score=0.0)])
    labelled = []
    real = Labeller.label
    monkeypatch.setattr(Labeller, "label", lambda self, t: labelled.append(t.id) or real(self, t))
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    closed_port = free.getsockname()[1]
    free.close()
    url = f"postgresql+psycopg://u:s3cret@127.0.0.1:{closed_port}/db"
    assert main(["dataset", "enqueue", str(path), "--url", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "s3cret" not in err
    shown = f"postgresql+psycopg://u:***@127.0.0.1:{closed_port}/db"
    assert err.startswith(f"error: training queue '{shown}' unreachable: ")
    assert labelled == []
    assert main(["dataset", "enqueue", str(path), "--url", f"sqlite:///{tmp_path / 'q.db'}"]) == 0  # labels both
    assert labelled == ["a", "b"]
