"""An error names a path as the user typed it: a path argument read through ``Path`` loses its ``./`` (and a
trailing ``/``), and `evoharness import ./missing.json` said 'error: missing.json: no such file or directory'.
``cli.typed`` maps the error's input back to the argument that wrote it, for every command at once."""

from __future__ import annotations

import pytest

from evoharness.cli import main

COMMANDS = [  # (argv, the error line's end)
    (["import", "./missing.json", "-o", "out.jsonl"], "no such file or directory"),
    (["diagnose", "./missing.json"], "no such file or directory"),
    (["label", "./missing.json", "-o", "labels.jsonl"], "no such file or directory"),
    (["export-otel", "./missing.json", "-o", "o.jsonl"], "no such file or directory"),
    (["calibrate", "./missing.json", "--human", "./h.jsonl"], "no such file or directory"),
    (["-c", "./missing.json", "schema", "trajectory"], "no such file or directory"),
]


@pytest.mark.parametrize(("argv", "end"), COMMANDS)
def test_a_missing_path_is_named_as_typed(argv, end, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: ./missing.json: {end}"]


# Every command that reads a path, given one that names nothing: the one wording, "no such file or directory" (as
# errno and `ls` say it). Until the twenty-fifth session the same missing file was also "no such file" (`calibrate`,
# `dataset validate`, `dataset export --labels`), "trajectory file not found" (`dataset export -t`, `dataset enqueue`
# with a path), "file not found" (`candidate new --edit`, `verify --tasks @FILE`), "config file not found" (`--config`),
# "harness directory does not exist" (`rollout --harness`) and "not a git repository" (`review --harness`).
MISSING = "gone/missing.jsonl"  # (with a slash: a path, never a run id)
EVERY_READER = [
    ["diagnose", MISSING], ["label", MISSING, "-o", "l.jsonl"], ["import", MISSING, "-o", "o.jsonl"],
    ["export-otel", MISSING, "-o", "o.jsonl"], ["calibrate", MISSING, "--human", "h.jsonl"],
    ["calibrate", "l.jsonl", "--human", MISSING], ["dataset", "enqueue", MISSING],
    ["dataset", "export", "-t", MISSING, "-o", "ex"], ["dataset", "export", "-t", "t.jsonl", "--labels", MISSING,
                                                        "-o", "ex"],
    ["dataset", "validate", MISSING], ["candidate", "new", "--harness", "h", "--edit", MISSING],
    ["-c", MISSING, "noise", "--sigma", "0.02"], ["review", "--harness", MISSING],
    ["rollout", "--harness", MISSING, "--env", "synthetic", "-o", "o.jsonl"], ["show", "main", "--harness", MISSING],
    ["evaluate", "--harness", MISSING, "-o", "o.jsonl", "--tasks", "2", "-k", "1", "--split", "dev"],
    # a run directory named by its path (until the twenty-fifth session's review: 'no such run directory')
    ["report", MISSING, "--out", "ex"], ["ablate", MISSING, "-o", "o.jsonl"],
    ["evaluate", "--run", MISSING, "-o", "o.jsonl"],
]


@pytest.mark.parametrize("argv", EVERY_READER, ids=lambda a: " ".join(a[:3]))
def test_a_missing_path_is_said_in_one_wording_by_every_command(argv, tmp_path, monkeypatch, capsys):
    import json

    from evoharness.harness_repo.init import init_harness

    monkeypatch.chdir(tmp_path)
    init_harness(tmp_path / "h")
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "a", "task_id": "x", "messages": []}) + "\n")
    (tmp_path / "l.jsonl").write_text("")
    assert main(argv) == 2
    said = capsys.readouterr().err.splitlines()
    where = "--labels " if "--labels" in argv else ""
    assert said == [f"error: {where}{MISSING}: no such file or directory"], said
    assert not [p for p in ("o.jsonl", "ex") if (tmp_path / p).exists()]


def test_a_bad_file_inside_is_named_as_typed_with_its_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.jsonl").write_text('{"id": "a"}\nnot json\n')
    assert main(["diagnose", "./sub//bad.jsonl", "-f", "canonical"]) == 2
    [err] = capsys.readouterr().err.splitlines()
    assert err.startswith("error: ./sub//bad.jsonl:line 1: "), err


def test_typed_maps_only_another_spelling_of_the_same_path():
    from evoharness.cli import typed

    argv = ["import", "./a.json", "--out=./dir/", "b.json"]
    assert typed("a.json", argv) == "./a.json" and typed("dir", argv) == "./dir/"
    assert typed("b.json", argv) == "b.json" and typed("c.json", argv) == "c.json"
    assert typed("--out", argv) == "--out"


@pytest.mark.parametrize("argv", [["report", "./t.jsonl", "--out", "ex"], ["ablate", "./t.jsonl", "-o", "o.jsonl"],
                                  ["evaluate", "--run", "./t.jsonl", "-o", "o.jsonl"]], ids=lambda a: a[0])
def test_a_file_named_as_a_run_directory_is_said_to_be_no_directory(argv, tmp_path, monkeypatch, capsys):
    """`report ./FILE` said 'no such run directory' of a file that is there, as of a path that names nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("{}\n")
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == ["error: ./t.jsonl: not a directory (a run directory is one)"]
    assert not [p for p in ("o.jsonl", "ex") if (tmp_path / p).exists()]


LINK = "gone-harness"  # a symbolic link to a path that names nothing
HARNESS_READERS = [
    ["review", "--harness", LINK], ["show", "main", "--harness", LINK],
    ["candidate", "new", "--harness", LINK, "--edit", "e.json"], ["pr", "candidate/r1-x", "--harness", LINK,
                                                                 "--remote", "x"],
    ["verify", "candidate/r1-x", "--harness", LINK, "--env", "synthetic", "--tasks", "t1"],
    ["rollout", "--harness", LINK, "--env", "synthetic", "-o", "o.jsonl"], ["init", LINK],
]


@pytest.mark.parametrize("argv", HARNESS_READERS, ids=lambda a: " ".join(a[:2]))
def test_a_harness_that_is_a_link_leading_nowhere_is_said_to_be_one(argv, tmp_path, monkeypatch, capsys):
    """9ce79d6 named a link that leads nowhere as one for every --harness; review, show, candidate new, pr and verify
    said plain 'no such file or directory' (the repo opened its resolved path, the link's missing target, and asked
    about that), and init said 'file exists' (mkdir's error for the link's own name)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / LINK).symlink_to(tmp_path / "nowhere")
    (tmp_path / "e.json").write_text('{"message": "m", "targets": "F3.repeated_action", '
                                    '"changes": [{"path": "lessons.md", "content": "- x\\n"}]}')
    assert main(argv) == 2
    said = capsys.readouterr().err.splitlines()
    assert said == [f"error: {LINK}: a symbolic link that cannot be followed: no such file or directory"], said
    assert (tmp_path / LINK).is_symlink() and not (tmp_path / "nowhere").exists()
