"""Importers on the real public traces, and on bad input."""

from __future__ import annotations

import json
import shutil

import pytest

from evoharness.diagnosis.composition import Composition
from evoharness.diagnosis.labeller import label_all
from evoharness.errors import InputError
from evoharness.traces.importers import detect_format, load_paths
from evoharness.traces.store import TrajectoryStore, read_trajectories, write_trajectories


def test_tau_bench_healthy_share_equals_reward_share(shared_data):
    path = shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json"
    assert detect_format(path) == "openai"
    trajs = list(load_paths([path]))
    assert len(trajs) == 12 and len({t.id for t in trajs}) == 12
    labels = label_all(trajs)
    comp = Composition.from_labels(labels)
    assert comp.counts["healthy"] == sum(t.score == 1 for t in trajs) == 6
    for lab in labels:
        if lab.failure_class != "healthy":
            assert lab.first_signal is not None and lab.first_signal.evidence
            assert lab.lever in ("harness", "weights")
    # tool errors became events at the tool message
    t = next(t for t in trajs if t.events)
    assert t.messages[t.events[0].step]["role"] == "tool"


def test_full_sets_import_whole(full_shared_data):
    tau = list(load_paths([full_shared_data / "tau_bench_airline_gpt4o"]))
    assert len(tau) == 200 and Composition.from_labels(label_all(tau)).counts["healthy"] == 84
    assert len(list(load_paths([full_shared_data / "mini_swe_agent_sample"]))) == 20
    assert len(list(load_paths([full_shared_data / "who_and_when"]))) == 184


def test_mini_swe_agent_joined_with_reports(shared_data):
    trajs = list(load_paths([shared_data / "mini_swe_agent_sample"]))
    assert len(trajs) == 4
    assert sorted(t.score for t in trajs) == [0.0] * 2 + [1.0] * 2
    labels = label_all(trajs)
    assert sum(lab.failure_class == "healthy" for lab in labels) == 2
    for lab in labels:
        if lab.failure_class != "healthy":
            assert lab.first_signal.evidence and lab.first_signal.step >= 0
    # bash blocks became tool calls answered by tool results; rejections became events
    t = trajs[0]
    calls = [m for m in t.messages if m.get("tool_calls")]
    assert calls and calls[0]["tool_calls"][0]["function"]["name"] == "bash"
    assert any(e.type == "format_rejected" for t in trajs for e in t.events)


def test_mini_swe_without_report_is_unscored(shared_data, tmp_path):
    src = next((shared_data / "mini_swe_agent_sample" / "trajs").iterdir())
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    [t] = list(load_paths([dst]))
    assert t.score is None


def test_who_and_when_is_failure_only_not_healthy(shared_data):
    trajs = list(load_paths([shared_data / "who_and_when"]))
    assert len(trajs) == 6
    assert all(t.score is None and t.meta["failure_only"] for t in trajs)
    labels = label_all(trajs)
    assert not any(lab.failure_class == "healthy" for lab in labels)
    assert all(lab.first_signal and lab.first_signal.evidence for lab in labels)


def test_canonical_roundtrip_and_store(shared_data, tmp_path):
    trajs = list(load_paths([shared_data / "mini_swe_agent_sample"]))
    out = tmp_path / "c.jsonl"
    assert write_trajectories(out, trajs) == 4
    assert detect_format(out) == "canonical"
    back = list(load_paths([out]))
    assert [t.model_dump() for t in back] == [t.model_dump() for t in trajs]
    store = TrajectoryStore(tmp_path / "s.jsonl")
    assert store.add(trajs) == 4 and store.add(trajs[:3]) == 0
    assert len(list(store)) == 4 and trajs[0].id in store


def test_torn_last_line_is_reported_or_skipped(tmp_path, shared_data):
    trajs = list(load_paths([shared_data / "mini_swe_agent_sample"]))[:3]
    out = tmp_path / "c.jsonl"
    write_trajectories(out, trajs)
    with out.open("ab") as fh:
        fh.write(trajs[0].model_dump_json().encode()[:50])
    with pytest.raises(InputError, match="line 4"):
        list(read_trajectories(out))
    bad = []
    assert len(list(read_trajectories(out, skip_invalid=True, on_invalid=bad.append))) == 3
    assert len(bad) == 1


@pytest.mark.parametrize("name,content,match", [
    ("trunc.json", b'[{"traj": [{"role": "user", "content": "hi"}], "rew', "line 1 col"),
    ("empty.json", b"", "empty file"),
    ("empty.jsonl", b"\n\n", "empty file"),
    ("junk.json", bytes(range(256)) * 4, "binary"),
    ("schema.json", b'[{"traj": "not a list", "reward": 1}]', "record 0"),
    ("schema2.jsonl", b'{"id": "a", "task_id": "t", "messages": [{"content": "no role"}]}\n', "line 1"),
    ("other.json", b'{"hello": "world"}', "unrecognised format"),
    ("reward.json", b'[{"traj": [], "reward": "yes"}]', "reward must be a number"),
])
def test_bad_input_names_file_and_record(tmp_path, name, content, match):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(InputError, match=match) as e:
        list(load_paths([p]))
    assert str(p) in str(e.value)


def test_directory_of_mixed_formats(shared_data, tmp_path):
    (tmp_path / "tau.json").write_text(json.dumps(
        json.loads((shared_data / "tau_bench_airline_gpt4o" / "gpt-4o-airline.json").read_text())[:5]))
    src = next((shared_data / "mini_swe_agent_sample" / "trajs").iterdir())
    shutil.copytree(src, tmp_path / "swe" / src.name)
    ww = next((shared_data / "who_and_when" / "Who&When" / "Hand-Crafted").iterdir())
    shutil.copy(ww, tmp_path / "ww.json")
    (tmp_path / "notes.txt").write_text("ignored: not a trace file")
    trajs = list(load_paths([tmp_path]))
    assert {t.meta.get("source_format") for t in trajs} == {"openai", "mini-swe-agent", "who-and-when"}
    (tmp_path / "zz_bad.json").write_text("{nope")
    with pytest.raises(InputError, match="zz_bad.json"):
        list(load_paths([tmp_path]))
    bad = []
    assert len(list(load_paths([tmp_path], skip_invalid=True, on_invalid=bad.append))) == 7
    assert len(bad) == 1


def test_format_override(shared_data, tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps([{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
                                                                               "content": "hello"}]}]))
    [t] = list(load_paths([p], fmt="openai"))
    assert t.final_answer == "hello" and t.score is None
    with pytest.raises(InputError, match="unknown format"):
        list(load_paths([p], fmt="nope"))
    with pytest.raises(InputError):
        list(load_paths([p], fmt="who-and-when"))


@pytest.mark.parametrize("content,match", [
    (b'[{"traj": [{"role": "user", "content": "hi"}, {"content": ""}], "reward": 1}]', "message 1 has no string"),
    (b'[{"traj": [{"role": "user"}, 3], "reward": "yes"}]', "message 1 has no string"),  # a bad message first
    (b'[{"traj": [{"role": "user"}], "reward": 1, "split": "train"}]', "split"),  # other fields still validated
])
def test_chat_records_keep_their_checks_without_copying_messages(tmp_path, content, match):
    p = tmp_path / "r.json"
    p.write_bytes(content)
    with pytest.raises(InputError, match=match):
        list(load_paths([p]))


def test_with_messages_keeps_the_list_and_validates_everything_else():
    from pydantic import ValidationError

    from evoharness.traces.models import Trajectory

    call = {"id": "c", "function": {"name": "f", "arguments": "{"}}
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}]
    t = Trajectory.with_messages(msgs, id="a", task_id="t", score=1.0)
    assert t.messages is msgs and "messages" in t.model_fields_set
    assert Trajectory.model_validate_json(t.model_dump_json()) == t
    (call,) = t.tool_calls()
    assert (call.step, call.name, call.parsed_ok, call.canonical) == (1, "f", False, "{")
    with pytest.raises(ValidationError, match="has no string 'role'"):
        Trajectory.with_messages([{"content": "x"}], id="a", task_id="t")
    with pytest.raises(ValidationError, match="score"):
        Trajectory.with_messages(msgs, id="a", task_id="t", score=2.0)


def test_arguments_parse_as_json_loads_does():
    """``parse_arguments`` skips json.loads's wrappers: the same values and the same failures, on texts
    around the edges (BOM, whitespace, trailing data, NaN, deep nesting, lone surrogates) and random ones."""
    import math
    import random

    from evoharness.traces.models import parse_arguments

    def ref(text):
        try:
            return json.loads(text), True
        except (ValueError, RecursionError):
            return None, False

    edges = ["", " ", "{}", ' {"a": 1}\n', '{"a": 1} x', '{"a": 1}{}', "\ufeff{}", "NaN", "[-Infinity]", "1e400",
             '"\\ud800"', '{"a": "\\u00e9"}', "[" * 5000 + "]" * 5000, "[1,]", "01", "-", "tru", '{"a" 1}']
    rng = random.Random(3)
    alphabet = list('{}[]",:0123456789.eE+- \t\n\\/abtrufnlsNI') + ["\ufeff", "\u00e9", "\\u0041"]
    seeds = ['{"a": 1}', "[1, 2.5e3]", '"s"', '{"a": {"b": [1, null, true, false]}}', " {} ", "-0"]

    def mutated():
        chars = list(rng.choice(seeds))
        for _ in range(rng.randint(0, 2)):
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        return "".join(chars)

    texts = edges + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(10000)]
    texts += [mutated() for _ in range(10000)]
    parsed = 0
    for text in texts:
        got, want = parse_arguments(text), ref(text)
        same = got == want or (got[1] and want[1] and repr(got[0]) == repr(want[0]))  # NaN != NaN
        assert same, text
        parsed += want[1]
    assert parsed > 1000 and math.isinf(parse_arguments("1e400")[0])


def test_parse_trajectory_is_model_validate_json():
    """The store's fast line parse gives what ``model_validate_json`` gives: the same trajectory (and the same
    fields set) or the same error, on lines around the edges of orjson and of Python-mode validation."""
    from pydantic import ValidationError

    from evoharness.traces.models import Trajectory
    from evoharness.traces.store import parse_trajectory

    base = {"id": "a", "task_id": "t", "messages": [{"role": "user", "content": "hi é"},
                                                     {"role": "assistant", "content": None, "tool_calls": [
                                                         {"id": "c", "function": {"name": "f", "arguments": "{}"}}]}]}

    def line(**over):
        return json.dumps({**base, **over}, ensure_ascii=False)

    lines = [line(), line(score=0.25, split="heldout", rollout=3, usage={"steps": 2, "wall_seconds": 1}),
             line(meta={"big": 10 ** 30, "neg": -(2 ** 70), "f": 1e-320, "s": "\U0001f600"}),
             line(events=[{"type": "tool_error", "step": 1, "extra": [1, {"x": None}]}]),
             line(rollout="3"), line(rollout=True), line(rollout=2.0), line(rollout=2.5), line(score="0.5"),
             line(score=2.0), line(split="weird"), line(termination="error"), line(harness_commit=5),
             line(task_id=""), line(unknown=1), line(messages=[{"role": 1}]), line(messages=[["user"]]),
             line(messages={"role": "user"}), line(messages=[]), line(events=[{"type": "x", "step": -1}]),
             line(meta=None), line(usage={"steps": True}), line(score=1), line(score=0), line(score=True),
             '{"id": "a", "id": "b", "task_id": "t"}', '{"id": "a", "task_id": "t", "meta": {"k": 1, "j": 2, "k": 3}}',
             '{"id": "a", "task_id": "t", "messages": [{"role": "user", "content": "a", "role": "tool"}]}',
             line().replace('"hi é"', '"\\ud800"'), line(score=0.25).replace("0.25", "NaN"),
             line(score=0.25).replace("0.25", "1e400"), line(meta={"x": 0.25}).replace("0.25", "-Infinity"),
             "[]", "null", '"s"', "{", "", "\ufeff" + line(),
             line() + " x", '{"id": "a", "task_id": "t", "messages": [{"role": "user", "content": "\\u0000"}]}']

    def outcome(parse, text):
        try:
            t = parse(text)
        except ValidationError as e:
            return "error", str(e)
        return t.model_dump_json(), t.model_fields_set, t.messages

    for text in lines:
        for raw in (text, text.encode()):
            assert outcome(parse_trajectory, raw) == outcome(Trajectory.model_validate_json, raw), text


def test_the_parse_is_no_part_of_a_trajectory_s_value_and_costs_its_making_nothing():
    """The parse is kept in a slot (``_call_memo``), not a pydantic private attribute, whose set-up cost every
    trajectory ~12k instructions when made (an import's record -> trajectory conversion, 38 -> 33 M per 200 tau-bench
    records with the reasoning gate): a parsed trajectory equals an unparsed one, and a pickle or a copy of a parsed
    one parses again, to the same calls."""
    import copy
    import pickle

    from evoharness.traces.models import Trajectory

    def made():
        return Trajectory(id="a", task_id="t", messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f",
                                                                                         "arguments": '{"x": 1}'}}]}])

    assert Trajectory.__private_attributes__ == {}  # none: pydantic would set each up at every trajectory made
    parsed, fresh = made(), made()
    calls = parsed.tool_calls()
    assert parsed == fresh and parsed.tool_calls_parsed() and not fresh.tool_calls_parsed()
    for again in (pickle.loads(pickle.dumps(parsed)), copy.deepcopy(parsed), parsed.model_copy(deep=True)):
        assert again == parsed and not again.tool_calls_parsed()
        assert again.tool_calls() == calls and again.tool_calls_parsed()


def test_tool_calls_are_parsed_once_and_again_for_new_messages_however_the_trajectory_was_made():
    from evoharness.traces.models import Trajectory

    def msgs(arg):
        return [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f",
                                                                                             "arguments": arg}}]}]

    dumped = Trajectory(id="a", task_id="t", messages=msgs('{"x": 1}')).model_dump_json()
    made = [Trajectory(id="a", task_id="t", messages=msgs('{"x": 1}')),
            Trajectory.model_construct(id="a", task_id="t", messages=msgs('{"x": 1}')),
            Trajectory.with_messages(msgs('{"x": 1}'), id="a", task_id="t"),
            Trajectory.model_validate_json(dumped)]
    for t in made:
        assert not t.tool_calls_parsed()
        first = t.tool_calls()
        assert t.tool_calls_parsed() and t.tool_calls() is first and first[0].args == {"x": 1}
        copy = t.model_copy()
        copy.messages = msgs('{"x": 2}')  # a new list: parsed again, for the copy only
        assert not copy.tool_calls_parsed() and copy.tool_calls()[0].args == {"x": 2}
        assert t.tool_calls()[0].args == {"x": 1}
        t.messages.append({"role": "assistant", "content": None,
                           "tool_calls": [{"id": "d", "function": {"name": "g", "arguments": "[]"}}]})
        assert [c.name for c in t.tool_calls()] == ["f", "g"]  # the list grew: parsed again
