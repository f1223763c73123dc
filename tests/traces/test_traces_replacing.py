"""``replacing``: the atomic write every output goes through (store.py)."""

from __future__ import annotations

import errno
import os
import stat
import threading

from evoharness.traces.store import replacing


def test_two_threads_writing_one_file_each_leave_it_whole(tmp_path):
    # thread a opens its temp file, thread b writes and replaces the same path meanwhile, then a finishes:
    # a temp file named per process only was b's too (b truncated a's, renamed it away, a's rename failed)
    out = tmp_path / "summary.json"
    a_open, b_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def write(text: str, *, first: bool) -> None:
        try:
            with replacing(out, "w") as fh:
                fh.write(text[: len(text) // 2])
                if first:
                    a_open.set()
                    b_done.wait(5)
                else:
                    a_open.wait(5)
                fh.write(text[len(text) // 2 :])
        except BaseException as e:  # noqa: BLE001 -- the thread's error is the test's
            errors.append(e)
        finally:
            if not first:
                b_done.set()

    a = threading.Thread(target=write, args=("a" * 1000,), kwargs={"first": True})
    b = threading.Thread(target=write, args=("b" * 10,), kwargs={"first": False})
    a.start()
    b.start()
    a.join(10)
    b.join(10)
    assert errors == []
    assert out.read_text() == "a" * 1000  # the last to finish wins, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_the_directory_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    # without it a power cut after the rename can bring back the old file (or none) though the write returned
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with replacing(tmp_path / "out.jsonl") as fh:
        fh.write(b"{}\n")
    assert synced == [False, True]
    assert (tmp_path / "out.jsonl").read_bytes() == b"{}\n"


def test_a_file_system_that_cannot_fsync_a_directory_still_gets_the_output(tmp_path, monkeypatch):
    # some network and FUSE file systems answer EINVAL to fsync on a directory; a directory the user may write into
    # but not list (mode 0o300) cannot be opened to fsync at all. The file is whole and renamed by then: the write
    # returns, as it did before the directory was fsync'd (SQLite's unixSync ignores the directory's fsync too)
    real = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with replacing(tmp_path / "out.jsonl") as fh:
        fh.write(b"{}\n")
    assert (tmp_path / "out.jsonl").read_bytes() == b"{}\n"

    real_open = os.open

    def unlistable(path, flags, *a, **kw):
        if os.path.isdir(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", unlistable)
    with replacing(tmp_path / "out.jsonl") as fh:
        fh.write(b"[]\n")
    assert (tmp_path / "out.jsonl").read_bytes() == b"[]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
