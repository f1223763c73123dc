"""Harness trees are extracted safely with and without Python's tar extraction filters (3.11.2 has none)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from evoharness.sandbox.checkout import extract_tree


def _tar(members: list[tuple[str, str, str]]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = extra.encode()
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            else:
                info.type, info.linkname = tarfile.SYMTYPE, extra
                t.addfile(info)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


@pytest.fixture(params=["filters", "no-filters"])
def python_kind(request, monkeypatch):
    if request.param == "no-filters":  # what Debian 12's Python 3.11.2 has
        monkeypatch.delattr(tarfile, "tar_filter", raising=False)
    return request.param


def test_a_tree_with_an_inner_link_extracts(tmp_path, python_kind):
    extract_tree(_tar([("prompts/system.md", "file", "hello"), ("link.md", "sym", "prompts/system.md")]), tmp_path)
    assert (tmp_path / "prompts" / "system.md").read_text() == "hello"
    assert (tmp_path / "link.md").read_text() == "hello"


def test_a_member_outside_the_destination_is_refused(tmp_path, python_kind):
    dest = tmp_path / "tree"
    dest.mkdir()
    with pytest.raises(Exception, match="outside|escapes"):
        extract_tree(_tar([("../evil.txt", "file", "x")]), dest)
    assert not (tmp_path / "evil.txt").exists()


def test_without_filters_a_link_out_of_the_tree_is_refused(tmp_path, monkeypatch):
    monkeypatch.delattr(tarfile, "tar_filter", raising=False)
    with pytest.raises(ValueError, match="links outside"):
        extract_tree(_tar([("passwd", "sym", "/etc/passwd")]), tmp_path)
    assert not Path(tmp_path / "passwd").is_symlink()
