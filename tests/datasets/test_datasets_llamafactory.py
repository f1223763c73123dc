"""A ShareGPT export carries LLaMA-Factory's dataset_info.json: the description LLaMA-Factory needs before it loads a
dataset, with the columns and tags of the rows as written (until the seventeenth session the user wrote it by hand)."""

from __future__ import annotations

import json
import re

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
        if r == "function":  # its FunctionFormatter: a call, or a list of them, with a name and arguments; since
            # 0.9.5 (PR #9610) the JSON between the template's tool-call words, the text around them kept
            found = re.search("<tool_call>(.*?)</tool_call>", content, re.DOTALL)
            calls = json.loads(found.group(1) if found else content)
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


def test_a_reply_with_text_and_calls_is_written_as_text_then_tool_call_words_llamafactory_reads(tmp_path, capsys):
    """A reply with text and calls was a function_call turn `{"content", "calls"}`, which stopped LLaMA-Factory's
    preprocessing with a KeyError (54 of the 200 tau-bench airline rows). LLaMA-Factory 0.9.5's FunctionFormatter
    takes the JSON between the template's tool-call words (`<tool_call>`, `</tool_call>` by default) and trains on the
    text around them followed by the calls: so the turn is `TEXT<tool_call>CALLS</tool_call>`, text and calls kept."""
    trajs = _trajs()
    for t in trajs[:2]:  # two records with a preamble beside a call
        next(m for m in t.messages if m.get("tool_calls"))["content"] = "Let me look that up."
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    out, plain = tmp_path / "out", tmp_path / "plain"
    assert main(["dataset", "export", "-t", str(src), "--format", "sharegpt", "--out", str(out)]) == 0
    assert main(["dataset", "export", "-t", str(src), "--out", str(plain)]) == 0
    err = capsys.readouterr().err
    assert ("note: 2 records hold an assistant turn with text and tool calls, written as "
            "TEXT<tool_call>CALLS</tool_call>") in err and "warning" not in err, err
    assert "- **Text beside tool calls:** 2 records hold an assistant turn" in (out / "README.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sharegpt_text_with_calls"] == 2 and manifest["sharegpt_calls_unreadable"] == 0
    info = json.loads((out / "dataset_info.json").read_text())["evoharness"]
    mixed = 0
    for row, record in zip(read_jsonl(out / "data.jsonl"), read_jsonl(plain / "data.jsonl"), strict=True):
        _as_llamafactory_reads(info, row)
        values = [c["value"] for c in row["conversations"] if c["from"] == "function_call"]
        replies = [m for m in record["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
        for value, reply in zip(values, replies, strict=True):
            found = re.search("<tool_call>(.*?)</tool_call>", value, re.DOTALL)
            calls = json.loads(found.group(1) if found else value)
            want = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                    for c in reply["tool_calls"]]
            assert (calls if isinstance(calls, list) else [calls]) == want  # every call, its arguments as objects
            assert (value.replace(found.group(0), "") if found else "") == (reply["content"] or "")  # the text, whole
            mixed += found is not None
    assert mixed == 2
    assert main(["dataset", "validate", str(out)]) == 0


def test_a_function_call_llamafactory_cannot_read_back_is_counted_warned_and_named_by_validate(tmp_path, capsys):
    """A text that holds `<tool_call>` would be taken for the calls' start (LLaMA-Factory's regex finds the first);
    the export writes the row, counts it and says so, and `dataset validate` names the turn. A row of the old
    `{"content", "calls"}` form is named by validate too (it passed before: validate read only roles)."""
    trajs = _trajs()
    next(m for m in trajs[0].messages if m.get("tool_calls"))["content"] = "I will write <tool_call> myself."
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    out = tmp_path / "out"
    assert main(["dataset", "export", "-t", str(src), "--format", "sharegpt", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("warning: 1 records hold a function_call turn whose text holds <tool_call> or whose calls hold "
            "</tool_call>, which LLaMA-Factory cannot read back as written") in err, err
    assert json.loads((out / "manifest.json").read_text())["sharegpt_calls_unreadable"] == 1
    assert "- **Unreadable tool calls:** 1 records" in (out / "README.md").read_text()
    assert main(["dataset", "validate", str(out)]) == 2
    listed = capsys.readouterr().out
    assert "line 1: conversations[1]: a function_call LLaMA-Factory cannot read: its calls are not JSON between " \
           "<tool_call> and </tool_call>" in listed, listed
    rows = read_jsonl(out / "data.jsonl")
    old = {"content": "Let me look.", "calls": [{"name": "lookup", "arguments": {"q": "x"}}]}
    rows[1]["conversations"][1]["value"] = json.dumps(old)
    (out / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["dataset", "validate", str(out)]) == 2
    assert "line 2: conversations[1]: a function_call LLaMA-Factory cannot read: a call without name and arguments" \
        in capsys.readouterr().out
    s = export_dataset(tmp_path / "plain", fmt=ExportFormat.sharegpt, source=SourceKind.all, trajectories=_trajs())
    assert s.sharegpt_text_with_calls == s.sharegpt_calls_unreadable == 0
    card = (tmp_path / "plain" / "README.md").read_text()
    assert "Text beside tool calls" not in card and "Unreadable tool calls" not in card


def test_skip_text_with_calls_writes_only_turns_every_llamafactory_template_reads(tmp_path, capsys):
    """LLaMA-Factory's gemma*, llama2* (its Llama2Template passes no tool-call words) and lfm2* (other words) parse a
    function_call value whole as JSON, so a `TEXT<tool_call>CALLS</tool_call>` turn stops their preprocessing
    ("Invalid JSON format in function message"). `--skip-text-with-calls` leaves those records out, counted: every
    function_call turn written is then the calls' JSON alone."""
    trajs = _trajs()
    for t in trajs[:2]:  # two records with a preamble beside a call
        next(m for m in t.messages if m.get("tool_calls"))["content"] = "Let me look that up."
    src, out = tmp_path / "t.jsonl", tmp_path / "out"
    write_trajectories(src, trajs)
    assert main(["dataset", "export", "-t", str(src), "--format", "sharegpt", "--skip-text-with-calls",
                 "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert "wrote 4 records (sharegpt)" in said.out and "2 skipped (2 text with calls)" in said.out, said.out
    assert "note:" not in said.err
    assert [m["id"] for m in read_jsonl(out / "metadata.jsonl")] == ["t2", "t3", "t4", "t5"]
    calls = 0
    for row in read_jsonl(out / "data.jsonl"):
        for turn in row["conversations"]:
            if turn["from"] == "function_call":
                value = json.loads(turn["value"])  # as Llama2Template's formatter reads it: the whole value
                assert all(c["name"] == "lookup" for c in (value if isinstance(value, list) else [value]))
                calls += 1
    assert calls == 4 + 2  # t2, t4 one call each; t3, t5 two
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["skipped"] == {"text_with_calls": 2} and manifest["sharegpt_text_with_calls"] == 0
    assert manifest["filters"]["skip_text_with_calls"] is True
    assert "records with a reply of text and tool calls skipped (`--skip-text-with-calls`)" in (
        out / "README.md").read_text()
    # without it the note names the option
    assert main(["dataset", "export", "-t", str(src), "--format", "sharegpt", "--out", str(tmp_path / "all")]) == 0
    assert "--skip-text-with-calls leaves them out" in capsys.readouterr().err
