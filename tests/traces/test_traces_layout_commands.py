"""One file, one reading, in every command: JSON lines or one JSON document by what the file holds, not its name
(``evoharness/traces/layout.py``). Until the twenty-eighth session a named file was JSON lines only when its name
ended in .jsonl: canonical, OTLP, LangSmith or OpenAI records one a line in t.json / t.otel / t.ndjson / t were refused
by `diagnose`, `label` and `import` ("JSON lines in a file whose name does not end in .jsonl") while `dataset export`
and `dataset enqueue` read the canonical ones; `dataset export -t t.otel` of OTLP lines said "not a canonical
trajectory: id: Field required" instead of its "convert it first"; and a JSON list of canonical trajectories, which
`import` reads, was "line 1: invalid JSON" to the dataset commands.

The table: each content kind under each name gives, in each command, what it gives under the name that says it
(t.jsonl for lines, t.json for a document): the same exit code, the same output bytes, the same error line (its path
aside). An HTTP body (``load_bytes``: POST /trajectories) has no name: the same trajectories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.cli import main
from evoharness.errors import InputError
from evoharness.traces.importers import load_bytes, load_paths

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
NAMES = ["t.jsonl", "t.json", "t.otel", "t.ndjson", "t"]  # one stem: ids made of the file name agree


def _canonical() -> list[str]:
    return [t.model_dump_json() for t in load_paths([TRACES / "tau_retail" / "runs.json"])]


KINDS = {  # kind: (its text, the name that says it)
    "canonical lines": (lambda: "\n".join(_canonical()) + "\n", "t.jsonl"),
    "canonical list": (lambda: json.dumps([json.loads(x) for x in _canonical()], indent=1), "t.json"),
    "otlp lines": (lambda: (TRACES / "otlp" / "genai.jsonl").read_text(), "t.jsonl"),
    "langsmith lines": (lambda: "\n".join(json.dumps(r) for r in json.loads((TRACES / "langsmith" / "runs.json")
                                                                          .read_text())) + "\n", "t.jsonl"),
    "openai lines, CRLF": (lambda: "\r\n".join(json.dumps(r) for r in json.loads((TRACES / "tau_retail" / "runs.json")
                                                                              .read_text())) + "\r\n", "t.jsonl"),
}


def _outcomes(d: Path, path: Path, capsys) -> dict[str, tuple]:
    """(exit code, stdout, stderr, output bytes) of each command on ``path``; its path and ``d`` masked."""
    def run(name: str, args: list[str], out: Path | None = None) -> None:
        rc = main(["--set", f"home={d / 'home'}", *args])
        cap = capsys.readouterr()
        body = b""
        if out is not None and out.is_file():
            body = out.read_bytes()
        elif out is not None and out.is_dir():
            body = b"".join(f.read_bytes() for f in sorted(out.rglob("*.jsonl")))
        got[name] = (rc, *(x.replace(str(path), "FILE").replace(str(d), "D") for x in (cap.out, cap.err)), body)

    got: dict[str, tuple] = {}
    run("diagnose", ["diagnose", str(path)])
    run("label", ["label", str(path), "--out", str(d / "labels.out")], d / "labels.out")
    run("import", ["import", str(path), "--out", str(d / "import.out")], d / "import.out")
    run("export-otel", ["export-otel", str(path), "--out", str(d / "spans.out")], d / "spans.out")
    run("dataset export", ["dataset", "export", "--source", "all", "-t", str(path), "--out", str(d / "ds")], d / "ds")
    run("dataset enqueue", ["dataset", "enqueue", str(path), "--url", f"sqlite:///{d}/q.db"])
    return got


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_command_reads_a_file_by_its_content_whatever_its_name(kind, tmp_path, capsys):
    make, own = KINDS[kind]
    text = make()
    seen = {}
    for name in NAMES:
        d = tmp_path / name.replace(".", "_")
        d.mkdir()
        (d / name).write_text(text, newline="")
        seen[name] = _outcomes(d, d / name, capsys)
    want = seen[own]
    assert want["diagnose"][0] == want["label"][0] == want["import"][0] == want["export-otel"][0] == 0, want
    canonical_lines = kind == "canonical lines"
    for cmd in ("dataset export", "dataset enqueue"):  # canonical JSON lines, or the way to convert
        assert want[cmd][0] == (0 if canonical_lines else 2), want[cmd]
        if not canonical_lines:
            what = "a JSON document of canonical trajectories" if kind == "canonical list" else "a trace file in the"
            assert want[cmd][2].startswith(f"error: FILE: {what}"), want[cmd]
            assert "convert it first, `evoharness import" in want[cmd][2], want[cmd]
    for name in NAMES:
        for cmd, outcome in want.items():
            got = seen[name][cmd]
            if cmd == "dataset export":  # the card names the trajectory file it read
                got, outcome = got[:3], outcome[:3]
            if cmd == "export-otel":  # span ids and the service instance are drawn anew: the spans per trace
                got, outcome = (*got[:3], got[3].count(b"\n")), (*outcome[:3], outcome[3].count(b"\n"))
            assert got == outcome, (name, cmd)


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_http_body_reads_as_the_file_does(kind, tmp_path):
    make, own = KINDS[kind]
    text = make()
    (tmp_path / own).write_text(text, newline="")
    from_file = [t.model_dump_json() for t in load_paths([tmp_path / own])]
    assert from_file
    assert [t.model_dump_json() for t in load_bytes(text.encode(), source="t")] == from_file  # ids: the stem "t"


@pytest.mark.parametrize("text, where, reason", [
    ("[1]\n[2]\n", "line 2 col 1", "invalid JSON (Extra data)"),  # lines of lists: one document with data after it
    ('{"a": 1} {"b": 2}\n', "line 1 col 10", "invalid JSON (Extra data)"),  # two objects on one line
    ('{"id": "a", "task_id": "t", "messages": [1]\n{"id": "b"}\n', "line 1",  # lines, the first cut short
     "invalid JSON (Expecting ',' delimiter)"),
    ('{\n  "id": "x",\n  "task_id": 1,\n', "line 4 col 1", "invalid JSON (Expecting property name enclosed in "
                                                           "double quotes)"),  # a document cut short
])
def test_a_bad_file_is_the_same_error_under_every_name(text, where, reason, tmp_path, capsys):
    errors = set()
    for name in NAMES:
        path = tmp_path / name
        path.write_text(text)
        for cmd in (["diagnose"], ["import", "--out", str(tmp_path / "o.jsonl")]):
            assert main([cmd[0], str(path), *cmd[1:]]) == 2
            errors.add(capsys.readouterr().err.replace(str(path), "FILE"))
        with pytest.raises(InputError) as e:
            load_bytes(text.encode(), source="FILE")
        errors.add(f"error: {e.value}\n")
    assert errors == {f"error: FILE:{where}: {reason}\n"}
