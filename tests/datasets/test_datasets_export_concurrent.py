"""Two exports into one directory at once (two `POST /datasets/export` of one name, two CLI runs) leave one
export's files there, whole: each moves its files in while holding the directory."""

from __future__ import annotations

import errno
import json
import os
import threading
import time

from evoharness.datasets import export as export_mod
from evoharness.datasets.export import export_dataset, read_manifest
from evoharness.datasets.models import ExportFormat, SourceKind

from .helpers import make_traj


def test_two_exports_into_one_directory_do_not_mix_their_files(tmp_path, monkeypatch):
    out = tmp_path / "exports" / "same-name"
    real = os.replace

    def slow_replace(src, dst):  # the openai export moves its files in slowly, the sharegpt one at once
        real(src, dst)
        if threading.current_thread().name == "openai":
            time.sleep(0.1)

    monkeypatch.setattr(export_mod.os, "replace", slow_replace)
    both_staged = threading.Barrier(2, timeout=30)
    real_card = export_mod.write_card

    def card_then_wait(stage, summary):  # both exports reach their move-in together
        real_card(stage, summary)
        both_staged.wait()
        if threading.current_thread().name == "sharegpt":  # starts moving in while the openai one is at it
            time.sleep(0.03)

    monkeypatch.setattr(export_mod, "write_card", card_then_wait)
    errors: list[BaseException] = []

    def export(fmt: ExportFormat, n: int) -> None:
        try:
            export_dataset(out, fmt=fmt, source=SourceKind.healthy,
                           trajectories=[make_traj(f"{fmt.value}-{i}", f"t{i}") for i in range(n)])
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=export, args=(ExportFormat.openai, 3), name="openai"),
               threading.Thread(target=export, args=(ExportFormat.sharegpt, 5), name="sharegpt")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    manifest = read_manifest(out)
    rows = [json.loads(line) for line in (out / "data.jsonl").read_text().splitlines()]
    assert len(rows) == manifest.records  # the data file is the manifest's export's, not the other one's
    key = "conversations" if manifest.format == ExportFormat.sharegpt else "messages"
    assert all(key in r for r in rows)
    assert [p.name for p in out.iterdir() if p.name.startswith(".export-")] == []  # no staging left behind


def test_a_directory_that_cannot_be_locked_still_gets_the_export(tmp_path, monkeypatch):
    # NFS emulates flock with a byte-range write lock, which a directory (opened read-only) cannot take: EBADF (ENOLCK
    # where no lock manager runs). The export is the user's; the lock only keeps two at once apart, as before it
    def flock(fd, op):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(export_mod.fcntl, "flock", flock)
    out = tmp_path / "exports" / "nfs"
    export_dataset(out, fmt=ExportFormat.openai, source=SourceKind.healthy,
                   trajectories=[make_traj(f"t-{i}", f"t{i}") for i in range(3)])
    assert read_manifest(out).records == 3
    assert len((out / "data.jsonl").read_text().splitlines()) == 3
