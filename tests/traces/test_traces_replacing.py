"""``replacing``: the atomic write every output goes through (store.py)."""

from __future__ import annotations

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
