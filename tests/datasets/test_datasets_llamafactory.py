"""A ShareGPT export carries LLaMA-Factory's dataset_info.json: the description LLaMA-Factory needs before it loads a
dataset, with the columns and tags of the rows as written (until the seventeenth session the user wrote it by hand)."""

from __future__ import annotations

import json

from evoharness.cli import main
from evoharness.datasets.export import export_dataset
from evoharness.datasets.models import ExportFormat, SourceKind
from evoharness.traces.store import write_trajectories

from .helpers import make_traj, read_jsonl


def _trajs() -> list:
    return [make_traj(f"t{i}", f"task-{i % 3}", calls=1 + i % 2) for i in range(6)]


def _as_llamafactory_reads(info: dict, row: dict) -> list[tuple[str, str]]:
    """The turns of ``row`` as LLaMA-Factory's sharegpt converter aligns them (its parser.py and converter.py):
    every column and tag from ``info`` (a ``columns``/``tags`` object it is given sets what it leaves out to None),
    user|observation at even positions, assistant|function at odd ones, an even count."""
    cols, tags = info["columns"], info["tags"]
    role = {
        tags["user_tag"]: "user",
        tags["assistant_tag"]: "assistant",
        tags["observation_tag"]: "observation",
        tags["function_tag"]: "function",
        tags["system_tag"]: "system",
    }
    turns = row[cols["messages"]]
    aligned = [(role[t[tags["role_tag"]]], t[tags["content_tag"]]) for t in turns]
    assert all(r in (("user", "observation"), ("assistant", "function"))[i % 2] for i, (r, _) in enumerate(aligned))
    assert len(aligned) % 2 == 0
    assert isinstance(row[cols["system"]], str)
    tools = json.loads(row[cols["tools"]])  # its ToolFormatter parses the column as JSON
    assert all(isinstance(t, dict) and t["name"] for t in tools)
    for r, content in aligned:
        if r == "function":  # its FunctionFormatter: a call, or a list of them, with a name and arguments
            calls = json.loads(content)
            for call in calls if isinstance(calls, list) else [calls]:
                assert isinstance(call["name"], str) and isinstance(call["arguments"], dict)
    return aligned


def test_a_sharegpt_export_describes_its_file_for_llamafactory(tmp_path):
    s = export_dataset(tmp_path, fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=_trajs())
    assert "dataset_info.json" in s.files
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert list(info) == ["evoharness"]
    entry = info["evoharness"]
    assert entry["formatting"] == "sharegpt" and entry["file_name"] == "data.jsonl"
    assert set(entry["columns"]) == {"messages", "system", "tools"}
    assert set(entry["tags"]) == {
        "role_tag",
        "content_tag",
        "user_tag",
        "assistant_tag",
        "observation_tag",
        "function_tag",
        "system_tag",
    }
    rows = read_jsonl(tmp_path / entry["file_name"])
    assert len(rows) == 6
    read = [_as_llamafactory_reads(entry, row) for row in rows]
    assert read[1][1][0] == "function" and read[1][-1] == ("assistant", "final answer of t1")


def test_only_sharegpt_gets_one_and_a_later_export_removes_it(tmp_path):
    export_dataset(tmp_path, fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=_trajs())
    assert (tmp_path / "dataset_info.json").is_file()
    s = export_dataset(tmp_path, fmt=ExportFormat.openai, source=SourceKind.all, trajectories=_trajs())
    assert "dataset_info.json" not in s.files
    assert not (tmp_path / "dataset_info.json").exists()  # it described a file that is gone


def test_a_llamafactory_data_directory_is_refused_not_overwritten(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    theirs = '{"alpaca_en_demo": {"file_name": "alpaca_en_demo.json"}}\n'
    (data / "dataset_info.json").write_text(theirs)
    write_trajectories(tmp_path / "t.jsonl", _trajs())
    code = main(["dataset", "export", "--format", "sharegpt", "-t", str(tmp_path / "t.jsonl"), "--out", str(data)])
    assert code == 2
    assert capsys.readouterr().err.startswith(f"error: --out: {data} holds dataset_info.json, which no earlier export")
    assert (data / "dataset_info.json").read_text() == theirs
    assert sorted(p.name for p in data.iterdir()) == ["dataset_info.json"]


def test_an_earlier_exports_dataset_info_with_the_users_datasets_added_is_refused_not_removed(tmp_path, capsys):
    """LLaMA-Factory's data/README tells a user to describe their datasets in dataset_info.json; with `dataset_dir`
    at an earlier sharegpt export, the entries they added there were deleted by the next export into it (its
    manifest.json made the whole directory the export's). Such a file is refused now, left as it was."""
    out = tmp_path / "out"
    export_dataset(out, fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=_trajs())
    info = json.loads((out / "dataset_info.json").read_text())
    info["alpaca_en_demo"] = {"file_name": "alpaca_en_demo.json"}
    edited = json.dumps(info, indent=2)
    (out / "dataset_info.json").write_text(edited)
    write_trajectories(tmp_path / "t.jsonl", _trajs())
    argv = ["dataset", "export", "--format", "sharegpt", "-t", str(tmp_path / "t.jsonl"), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out: {out} holds dataset_info.json with datasets no export wrote (alpaca_en_demo): a "
                   "new export would remove it; move them to a dataset_info.json of their own, or export into a new "
                   "or empty directory"], err
    assert (out / "dataset_info.json").read_text() == edited and (out / "data.jsonl").is_file()

    (out / "dataset_info.json").write_text(json.dumps({k: v for k, v in info.items() if k != "alpaca_en_demo"}))
    assert main(argv) == 0  # the export's own entry only: replaced as before
    assert list(json.loads((out / "dataset_info.json").read_text())) == ["evoharness"]


def test_a_reply_with_text_and_calls_that_llamafactory_cannot_read_is_counted_and_warned(tmp_path, capsys):
    """A function_call turn `{"content", "calls"}` stops LLaMA-Factory's preprocessing with a KeyError (its function
    formatter reads each call's `name`); until the seventeenth session's end the export wrote it without a word."""
    trajs = _trajs()
    for t in trajs[:2]:  # two records with a preamble beside a call
        next(m for m in t.messages if m.get("tool_calls"))["content"] = "Let me look that up."
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    out = tmp_path / "out"
    assert main(["dataset", "export", "-t", str(src), "--format", "sharegpt", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("warning: 2 records hold an assistant turn with text and tool calls, written as a function_call turn "
            "{content, calls} that LLaMA-Factory cannot read") in err
    assert "- **Text beside tool calls:** 2 records hold an assistant turn" in (out / "README.md").read_text()
    assert json.loads((out / "manifest.json").read_text())["sharegpt_text_with_calls"] == 2
    rows = [r for r in read_jsonl(out / "data.jsonl")
            if any(c["from"] == "function_call" and '"calls"' in c["value"] for c in r["conversations"])]
    assert len(rows) == 2
    s = export_dataset(tmp_path / "plain", fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=_trajs())
    assert s.sharegpt_text_with_calls == 0
    assert "Text beside tool calls" not in (tmp_path / "plain" / "README.md").read_text()
