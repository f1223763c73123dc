"""Odd but legal text in trace files (fix, sixth session): every format reads it, the commands write it.

A lone UTF-16 surrogate escape (``"\\ud83d"``: half of an emoji's pair, as a writer cutting strings by UTF-16
units leaves it) was read into a ``str`` no UTF-8 encoder takes: ``evoharness import`` of a JSON list or
a tau-bench file holding one ended in a PydanticSerializationError traceback after the work, and a canonical
JSONL line holding one was refused as "invalid JSON (truncated or not JSON)".
"""

from __future__ import annotations

import codecs
import gc
import json
import shutil
import threading
import weakref
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.cli import main
from evoharness.traces import jsontext

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLES = sorted([*(FIXTURES / "traces").iterdir(), *(p for p in (FIXTURES / "data").iterdir() if p.is_dir())])
LONE = "\ud83d"


def _replaced(s: str) -> str:
    """The reference: what a UTF-16 decoder with errors="replace" makes of ``s``'s code units."""
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


text = st.lists(st.sampled_from(["a", "\\", "u", "d83d", '"', "\ud83d", "\ude00", "\udbff", "\udc00", "é", "😀",
                                 "\n"]), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(text)
def test_a_lone_surrogate_escape_reads_as_the_replacement_character_and_nothing_else_changes(s):
    doc = json.dumps({"k": s, "l": [s, s + "x"]})  # ensure_ascii: each surrogate written as an escape
    expected = {"k": _replaced(s), "l": [_replaced(s), _replaced(s + "x")]}
    assert jsontext.loads(doc) == expected
    assert jsontext.loads(doc.encode()) == expected
    if _replaced(s) == s:  # no lone surrogate: the text is left as it is
        assert jsontext.lone_surrogates_replaced(doc) == doc


def _texts_cut(value):
    """``value`` with a lone high surrogate appended to every string holding a space (a text, not an id), and
    whether there was one."""
    if isinstance(value, str):
        return (value + LONE, True) if " " in value else (value, False)
    if isinstance(value, dict):
        done = {k: _texts_cut(v) for k, v in value.items()}
        return {k: v for k, (v, _) in done.items()}, any(ok for _, ok in done.values())
    if isinstance(value, list):
        done = [_texts_cut(v) for v in value]
        return [v for v, _ in done], any(ok for _, ok in done)
    return value, False


def _cut_every_trace_file(root: Path) -> int:
    cut = 0
    for f in sorted(root.rglob("*")):
        if f.suffix == ".jsonl" and "report" not in f.name:  # cost_report.jsonl: one indented object, no trace
            lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            done = [_texts_cut(x) for x in lines]
            f.write_text("\n".join(json.dumps(v) for v, _ in done) + "\n")
            cut += any(ok for _, ok in done)
        elif f.suffix in (".json", ".traj") and "report" not in f.name and f.name != "result.json":
            value, ok = _texts_cut(json.loads(f.read_text()))
            f.write_text(json.dumps(value, indent=1))  # an indent: the streamed fast path reads lists laid out so
            cut += ok
    return cut


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_every_format_imports_a_trace_holding_a_lone_surrogate(sample, tmp_path, capsys):
    root = tmp_path / sample.name
    shutil.copytree(sample, root)
    assert _cut_every_trace_file(root)
    out = tmp_path / "out.jsonl"
    assert main(["import", str(root), "--out", str(out)]) == 0, capsys.readouterr().err
    text = out.read_text(encoding="utf-8")  # strict UTF-8: no surrogate written
    assert "\\ufffd" in text or "\ufffd" in text
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(out), "--out", str(labels)]) == 0, capsys.readouterr().err
    labels.read_text(encoding="utf-8")


def test_a_canonical_line_holding_a_lone_surrogate_is_read_not_refused_as_invalid_json(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "t1", "task_id": "x", "messages": [
        {"role": "user", "content": "cut here " + LONE}, {"role": "assistant", "content": "ok"}]}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["import", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    (t,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert t["messages"][0]["content"] == "cut here \ufffd"


TAU = FIXTURES / "data" / "tau_bench_airline_gpt4o"


def _imported(main_args, out, capsys):
    assert main([*main_args, "--out", str(out)]) == 0, capsys.readouterr().err
    return out.read_bytes()


def test_a_utf8_byte_order_mark_on_json_lines_is_skipped_as_on_a_json_file(tmp_path, capsys):
    """Was: a canonical JSONL file with a BOM (Windows editors write one) was "line 1: invalid JSON"."""
    plain = _imported(["import", str(TAU)], tmp_path / "plain.jsonl", capsys)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(codecs.BOM_UTF8 + plain)
    assert _imported(["import", str(bom)], tmp_path / "again.jsonl", capsys) == plain
    assert main(["label", str(bom), "--out", str(tmp_path / "labels.jsonl")]) == 0
    assert main(["diagnose", str(bom)]) == 0


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_json_file_in_utf16_or_utf32_with_a_byte_order_mark_reads_as_its_utf8_twin(encoding, tmp_path, capsys):
    """Was: "not JSON: binary content" (PowerShell 5's `>` writes UTF-16 with a BOM)."""
    (src,) = [f for f in TAU.iterdir() if f.suffix == ".json"]
    plain = _imported(["import", str(src)], tmp_path / "plain.jsonl", capsys)
    wide = tmp_path / "wide" / src.name  # the same name: ids are made of it
    wide.parent.mkdir()
    text = src.read_text(encoding="utf-8")
    wide.write_bytes((codecs.BOM_UTF16_BE if encoding == "utf-16-be" else b"") + text.encode(encoding))
    assert _imported(["import", str(wide)], tmp_path / "wide.jsonl", capsys) == plain


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
@pytest.mark.parametrize("fmt", [[], ["--format", "canonical"]])
def test_json_lines_in_utf16_or_utf32_with_a_byte_order_mark_read_as_their_utf8_twin(encoding, fmt, tmp_path, capsys):
    """Was: one error line ("JSON lines are read as UTF-8; convert the file"), "invalid JSON" with --format."""
    plain = _imported(["import", str(TAU)], tmp_path / "plain.jsonl", capsys)
    wide = tmp_path / "wide.jsonl"
    text = plain.decode("utf-8").replace("\n", "\r\n", 1)  # a Windows line end too
    wide.write_bytes((codecs.BOM_UTF16_BE if encoding == "utf-16-be" else b"") + text.encode(encoding))
    assert _imported(["import", str(wide), *fmt], tmp_path / "again.jsonl", capsys) == plain
    assert main(["label", str(wide), "--out", str(tmp_path / "labels.jsonl")]) == 0


def test_json_lines_in_utf16_cut_short_are_one_error_line_naming_the_encoding(tmp_path, capsys):
    src = tmp_path / "wide.jsonl"
    whole = ('{"id": "a", "task_id": "t", "messages": []}\n' * 3).encode("utf-16")
    src.write_bytes(whole[:-1])  # an odd byte count: the last code unit cut in half
    assert main(["import", str(src), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {src}:line ") and "UTF-16" in err and err.count("\n") == 1
    assert not (tmp_path / "o.jsonl").exists()


def test_a_utf16_json_lines_body_is_ingested_as_its_utf8_twin():
    from evoharness.traces.importers import load_bytes

    body = "".join(json.dumps({"id": f"t{i}", "task_id": "t", "messages": []}) + "\n" for i in range(3))
    assert [t.id for t in load_bytes(body.encode("utf-16"))] == ["t0", "t1", "t2"]


@pytest.fixture
def locked(monkeypatch):
    """Paths that refuse to be listed or opened, as without read permission (the tests may run as root, whom
    chmod 000 does not stop)."""
    import os

    refused: set[Path] = set()
    scandir, open_, read_bytes = os.scandir, Path.open, Path.read_bytes

    def deny(path):
        if Path(path) in refused:
            raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", lambda p=".": deny(p) or scandir(p))
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: deny(self) or open_(self, *a, **k))
    monkeypatch.setattr(Path, "read_bytes", lambda self: deny(self) or read_bytes(self))
    return refused


@pytest.mark.parametrize("what", ["directory", "file"])
def test_a_run_that_cannot_be_read_is_an_error_or_with_skip_invalid_a_skipped_line(what, locked, tmp_path, capsys):
    """Was: a subdirectory that could not be listed was left out silently (`import` wrote the other runs, exit 0);
    a file that could not be read stopped `--skip-invalid` too (an OSError, not skipped bad input)."""
    (src,) = [f for f in TAU.iterdir() if f.suffix == ".json"]
    runs = tmp_path / "runs"
    (runs / "b").mkdir(parents=True)
    shutil.copy(src, runs / "a.json")
    shutil.copy(src, runs / "b" / "b.json")
    locked.add(runs / "b" if what == "directory" else runs / "b" / "b.json")
    out = tmp_path / "out.jsonl"
    assert main(["import", str(runs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {runs / 'b'}") and "permission denied" in err and err.count("\n") == 1
    assert not out.exists()
    assert main(["import", str(runs), "--out", str(out), "--skip-invalid"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"skipped: {runs / 'b'}") and "permission denied" in err
    assert len(out.read_text().splitlines()) == len(json.loads(src.read_text()))  # a.json's runs
    assert main(["diagnose", str(runs)]) == 2
    assert "permission denied" in capsys.readouterr().err


def test_runs_that_share_ids_are_all_written_and_a_warning_says_so(tmp_path, capsys):
    """Was: two runs in files of the same name (ids are made of it) were written with the same ids, unsaid; what
    keys by id downstream (dataset enqueue, calibrate) then keeps one of each."""
    (src,) = [f for f in TAU.iterdir() if f.suffix == ".json"]
    for run in ("r1", "r2"):
        (tmp_path / run).mkdir()
        shutil.copy(src, tmp_path / run / src.name)
    out = tmp_path / "out.jsonl"
    assert main(["import", str(tmp_path / "r1"), str(tmp_path / "r2"), "--out", str(out)]) == 0
    n = len(json.loads(src.read_text()))
    assert len(out.read_text().splitlines()) == 2 * n
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {n} of {2 * n} trajectories have the id of an earlier one")
    assert main(["import", str(tmp_path / "r1"), "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""


def test_text_nested_as_deep_as_the_parser_goes_runs_no_other_code_down_there(litter):
    """jsontext.loads (every importer's line, the service's batches) parses with the collector held: garbage of
    anything else was finalised ~1,000 frames deep, where its ``__del__`` failed with RecursionError."""
    with litter() as seen:
        with pytest.raises(RecursionError):
            jsontext.loads(b"[" * 100_000)
        assert jsontext.loads(b'{"a": [1]}') == {"a": [1]}
    assert seen["finalised"] > 10 and seen["unraisable"] == []


def test_the_collector_held_comes_back_as_it_was():
    """Nested or overlapping holders (two requests at once) leave it off until the last one leaves; a collector that
    was off before the first stays off."""
    assert gc.isenabled()
    with jsontext.collection_held:
        with jsontext.collection_held:
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with jsontext.collection_held:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _litter_cycles() -> weakref.ref:
    """Twice the young generation's threshold of unreachable cycles; a reference to one of them."""
    first = _Cycle()
    ref = weakref.ref(first)
    del first
    for _ in range(2 * gc.get_threshold()[0]):
        _Cycle()
    return ref


def test_a_hold_left_while_another_thread_holds_runs_the_collection_that_is_due():
    """The service parses bodies in its thread pool: holds of several threads overlap, and two threads parsing back
    to back left the collector off for good (a third thread's cycles were never freed). A thread leaving its hold
    while another thread still holds runs the collection due; a hold within a hold of the same thread (an importer's
    parse inside a labelled batch) does not, and neither does a hold taken while the collector was off."""
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with jsontext.collection_held:
            inside.set()
            leave.wait(30)

    assert gc.isenabled()
    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert inside.wait(30)
        with jsontext.collection_held:
            with jsontext.collection_held:
                nested = _litter_cycles()
            assert nested() is not None  # this thread still holds: not collected here
            ref = _litter_cycles()
        assert not gc.isenabled()  # the other thread still holds
        assert ref() is None and nested() is None
    finally:
        leave.set()
        thread.join()
    assert gc.isenabled()

    gc.disable()
    try:
        inside.clear(), leave.clear()
        thread = threading.Thread(target=other)
        thread.start()
        try:
            assert inside.wait(30)
            with jsontext.collection_held:
                ref = _litter_cycles()
            assert ref() is not None  # the collector was off before: it stays off, nothing collected
        finally:
            leave.set()
            thread.join()
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.collect()
