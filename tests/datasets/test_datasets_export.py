"""Exports: loadable with `datasets`, filters, render-under seed/evolved, the dataset card, the CLI."""

from __future__ import annotations

import json
import resource

import git
import pytest

from evoharness.cli import main
from evoharness.datasets.export import JsonlSource, export_dataset, read_manifest
from evoharness.datasets.models import ExportFilters, ExportFormat, SourceKind
from evoharness.datasets.prompts import resolve_prompt
from evoharness.datasets.validate import openai_errors, sharegpt_errors
from evoharness.errors import InputError
from evoharness.harness_repo.init import init_harness
from evoharness.traces.store import write_trajectories

from .helpers import make_traj, offline_hf, read_jsonl  # noqa: F401 (offline_hf: the fixture every test here uses)

pytestmark = pytest.mark.usefixtures("offline_hf")

datasets = pytest.importorskip("datasets")


def _trajs(n: int = 12) -> list:
    return [make_traj(f"t{i}", f"task-{i % 3}", score=[1.0, 0.5, 0.9][i % 3], calls=1 + i % 2,
                      commit=f"c{i % 2}", model="m-4b") for i in range(n)]


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_jsonl_exports_load_with_datasets_json(tmp_path, fmt):
    s = export_dataset(tmp_path, fmt=ExportFormat(fmt), source=SourceKind.all, trajectories=_trajs())
    ds = datasets.load_dataset("json", data_files=str(tmp_path / "data.jsonl"), split="train",
                               cache_dir=str(tmp_path / "cache"))
    assert len(ds) == s.records == 12
    check = openai_errors if fmt == "openai" else sharegpt_errors
    assert all(check(r) == [] for r in read_jsonl(tmp_path / "data.jsonl"))
    if fmt == "openai":
        assert ds[0]["messages"][2]["tool_calls"][0]["function"]["name"] == "lookup"
        assert ds[0]["tools"][0]["function"]["name"] == "lookup"
    else:
        assert json.loads(ds[0]["tools"])[0]["name"] == "lookup"
    meta = read_jsonl(tmp_path / "metadata.jsonl")
    assert [m["id"] for m in meta] == [f"t{i}" for i in range(12)]


def test_hf_export_is_parquet_loadable_offline(tmp_path):
    s = export_dataset(tmp_path, fmt=ExportFormat.hf, source=SourceKind.all, trajectories=_trajs())
    assert s.files[0] == "data/train-00000-of-00001.parquet"
    assert not (tmp_path / "hfstage").exists()
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / s.files[0]), split="train",
                               cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 12 and ds[0]["task_id"] == "task-0" and ds[0]["harness_commit"] == "c0"
    row = ds[0]
    record = {"messages": [{k: v for k, v in m.items() if v is not None} for m in row["messages"]],
              "tools": json.loads(row["tools"])}
    assert openai_errors(record) == []
    # the card's front matter points `load_dataset(DIR)` at the parquet file
    whole = datasets.load_dataset(str(tmp_path), split="train", cache_dir=str(tmp_path / "cache2"))
    assert len(whole) == 12


def test_filters_min_score_and_max_per_task(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.all, trajectories=_trajs(),
                       filters=ExportFilters(min_score=0.8, max_per_task=2))
    # task-1 scores 0.5 (all dropped); task-0 (1.0) and task-2 (0.9) capped at 2 each
    assert s.tasks == {"task-0": 2, "task-2": 2}
    assert s.skipped == {"below_min_score": 4, "over_max_per_task": 4}


def test_source_healthy_keeps_only_healthy(tmp_path):
    s = export_dataset(tmp_path, source=SourceKind.healthy, trajectories=_trajs())
    assert s.classes == {"healthy": 4} and set(s.tasks) == {"task-0"}


@pytest.fixture
def harness(tmp_path):
    """A seed harness, then one evolved commit on main that adds a lesson."""
    repo_dir = tmp_path / "harness"
    init_harness(repo_dir)
    repo = git.Repo(repo_dir)
    (repo_dir / "lessons.md").write_text("- EVOLVED LESSON: check the booking before answering.\n")
    repo.index.add(["lessons.md"])
    repo.index.commit("evolved: add a lesson")
    return repo_dir


def _system(path):
    return read_jsonl(path / "data.jsonl")[0]["messages"][0]["content"]


def test_render_under_seed_and_evolved(tmp_path, harness):
    trajs = _trajs(3)
    seed = export_dataset(tmp_path / "seed", source=SourceKind.all, trajectories=trajs,
                          prompt=resolve_prompt(str(harness), "seed"))
    evolved = export_dataset(tmp_path / "evo", source=SourceKind.all, trajectories=trajs,
                             prompt=resolve_prompt(str(harness), "evolved"))
    s_text, e_text = _system(tmp_path / "seed"), _system(tmp_path / "evo")
    assert "EVOLVED LESSON" in e_text and "EVOLVED LESSON" not in s_text
    assert "Solve task-0" in s_text and "`lookup`: Look things up (lookup)" in s_text  # task and tools
    assert "at most 12 steps" in s_text  # policies.yaml max_steps
    assert "You are the agent." not in s_text  # the trajectory's own system message is replaced
    repo = git.Repo(harness)
    assert seed.prompt.commit == repo.git.rev_list("--max-parents=0", "HEAD")
    assert evolved.prompt.commit == repo.head.commit.hexsha
    card = (tmp_path / "evo" / "README.md").read_text()
    assert evolved.prompt.commit in card and "`evolved` harness prompt" in card
    # DIR@REV: the seed commit by name
    at = resolve_prompt(f"{harness}@{seed.prompt.commit[:10]}", "evolved")
    assert at.commit == seed.prompt.commit and at.under == "rev"


def test_unrenderable_template_falls_back_to_raw_text_plus_lessons(tmp_path, harness):
    repo = git.Repo(harness)
    (harness / "prompts" / "system.md").write_text("Harness prompt for {{ unknown_variable }}.\n")
    repo.index.add(["prompts/system.md"])
    repo.index.commit("a template this exporter cannot fill")
    s = export_dataset(tmp_path / "o", source=SourceKind.all, trajectories=_trajs(2),
                       prompt=resolve_prompt(str(harness), "evolved"))
    text = _system(tmp_path / "o")
    assert text.startswith("Harness prompt for {{ unknown_variable }}.") and "EVOLVED LESSON" in text
    assert s.prompt_fallbacks == 2 and "fell back" in (tmp_path / "o" / "README.md").read_text()


def test_no_harness_keeps_the_trajectorys_system_message(tmp_path):
    export_dataset(tmp_path, source=SourceKind.all, trajectories=_trajs(1))
    assert _system(tmp_path) == "You are the agent."


def test_bad_harness_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not a git repository"):
        resolve_prompt(str(tmp_path), "seed")


def test_card_and_manifest_carry_provenance(tmp_path):
    trajs = _trajs(6)
    export_dataset(tmp_path, source=SourceKind.all, trajectories=trajs, filters=ExportFilters(min_score=0.5))
    card = (tmp_path / "README.md").read_text()
    for needle in ("Records:** 6", "`c0` | 3", "`c1` | 3", "`m-4b`", "`synthetic`", "min score 0.5",
                   "Placebo:** no", "Composition", "`healthy`", "split: train"):
        assert needle in card, needle
    m = read_manifest(tmp_path)
    assert m.records == 6 and m.harness_commits == {"c0": 3, "c1": 3} and m.filters.min_score == 0.5


def test_cli_queue_export_end_to_end(tmp_path, capsys, harness):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _trajs())
    assert main(["dataset", "enqueue", str(path), "--run-id", "r1"]) == 0
    out = tmp_path / "out"
    rc = main(["dataset", "export", "--source", "queue", "--format", "openai", "--harness", str(harness),
               "--render-under", "seed", "--out", str(out)])
    assert rc == 0
    assert "wrote 8 records" in capsys.readouterr().out  # the 8 non-healthy trajectories were queued
    meta = read_jsonl(out / "metadata.jsonl")
    assert {m["source"] for m in meta} == {"queue"} and {m["run_id"] for m in meta} == {"r1"}
    assert main(["dataset", "validate", str(out / "data.jsonl")]) == 0
    assert "8 records, all valid" in capsys.readouterr().out


def test_cli_bad_requests_exit_2(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _trajs(2))
    assert main(["dataset", "export", "--out", str(tmp_path / "o")]) == 2
    assert "needs --trajectories" in capsys.readouterr().err
    assert main(["dataset", "export", "-t", str(path), "--format", "csv", "--out", str(tmp_path / "o")]) == 2
    assert main(["dataset", "export", "-t", str(path), "--harness", str(tmp_path / "nope"),
                 "--out", str(tmp_path / "o")]) == 2
    missing = str(tmp_path / "missing.jsonl")
    assert main(["dataset", "export", "-t", missing, "--out", str(tmp_path / "o")]) == 2
    # every command's words for a path that names nothing since 9ce79d6 (was 'trajectory file not found')
    assert f"error: {missing}: no such file or directory" in capsys.readouterr().err.splitlines()


def test_jsonl_source_is_re_iterable(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _trajs(3))
    src = JsonlSource(path)
    assert [t.id for t in src] == [t.id for t in src] == ["t0", "t1", "t2"]


def test_hf_without_the_datasets_package_is_one_clear_error(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)
    path = tmp_path / "t.jsonl"
    write_trajectories(path, _trajs(2))
    assert main(["dataset", "export", "-t", str(path), "--format", "hf", "--out", str(tmp_path / "o")]) == 2
    assert "error: --format hf: needs the `datasets` package (pip install datasets)" in capsys.readouterr().err


def test_labels_file_replaces_relabelling_and_gives_the_same_metadata(tmp_path, capsys, monkeypatch):
    trajs = [make_traj(f"x{i}", task=f"t{i % 3}", score=1.0 if i % 2 else 0.2) for i in range(6)]
    src = tmp_path / "t.jsonl"
    write_trajectories(src, trajs)
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(src), "--out", str(labels)]) == 0
    base = export_dataset(tmp_path / "a", source=SourceKind.all, trajectories=JsonlSource(src))
    assert base.labels_reused == 0

    from evoharness.diagnosis.labeller import Labeller

    def no_labelling(self, t):
        raise AssertionError(f"relabelled {t.id}")

    monkeypatch.setattr(Labeller, "label", no_labelling)
    assert main(["dataset", "export", "-o", str(tmp_path / "b"), "--source", "all", "-t", str(src),
                 "--labels", str(labels)]) == 0
    assert "3 labels reused" in capsys.readouterr().out
    assert read_jsonl(tmp_path / "b" / "metadata.jsonl") == read_jsonl(tmp_path / "a" / "metadata.jsonl")
    assert (tmp_path / "b" / "data.jsonl").read_bytes() == (tmp_path / "a" / "data.jsonl").read_bytes()
    # labels_reused counts the records written: a trajectory the filters drop read its label but is not one
    assert main(["dataset", "export", "-o", str(tmp_path / "c"), "--source", "all", "-t", str(src),
                 "--labels", str(labels), "--max-per-task", "1"]) == 0
    assert "2 labels reused" in capsys.readouterr().out  # x0 and x2; x4's task already has its record (x1)
    unhealthy = [m for m in read_jsonl(tmp_path / "c" / "metadata.jsonl") if m["failure_class"] != "healthy"]
    assert [m["id"] for m in unhealthy] == ["x0", "x2"]
    assert read_manifest(tmp_path / "c").labels_reused == 2



def test_labels_that_do_not_line_up_or_are_stale_are_one_error_line(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj(f"x{i}", score=0.2) for i in range(3)])
    labels = tmp_path / "labels.jsonl"
    assert main(["label", str(src), "--out", str(labels)]) == 0
    good = labels.read_text().splitlines()
    assert all(json.loads(line)["schema_version"] == 1 for line in good)
    other = good[1].replace('"x1"', '"elsewhere"')
    stale = json.dumps({k: v for k, v in json.loads(good[0]).items() if k != "schema_version"})
    cases = {
        "unknown": ([good[0], other, *good[1:]], "line 2 labels trajectory 'elsewhere' where the trajectory file "
                                                 "has 'x1'"),
        "reordered": ([*good[1:], good[0]], "line 1 labels trajectory 'x1' where"),
        "short": (good[:2], "ends at line 2, before trajectory 'x2'"),
        "long": ([*good, other], "line 4 labels trajectory 'elsewhere', past the trajectory file's end"),
        "stale": ([stale, *good[1:]], "line 1: has no schema_version"),
        "newer": ([good[0].replace('"schema_version":1', '"schema_version":2'), *good[1:]],
                  "line 1: has schema_version 2, this evoharness reads 1"),
        "foreign": (['{"trajectory_id": "x0", "failure_class": "F9"}'], "line 1"),  # not a class
        **{f"lax {v}": ([good[0].replace('"schema_version":1', f'"schema_version":{v}'), *good[1:]],
                        "line 1: not a label (written by `evoharness label`): schema_version")
           for v in ('"1"', "true", "1.0")},  # the version is an integer, not something that coerces to one
    }
    out = tmp_path / "new" / "o"
    for name, (lines, msg) in cases.items():
        labels.write_text("\n".join(lines) + "\n")
        assert main(["dataset", "export", "-o", str(out), "--source", "all", "-t", str(src),
                     "--labels", str(labels)]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and msg in err[0], (name, err)
        assert not (tmp_path / "new").exists(), name  # nothing the failed export created is left
    for labels, msg in ((tmp_path / "missing.jsonl", "no such file"), (tmp_path, "is a directory")):
        assert main(["dataset", "export", "-o", str(out), "--source", "all", "-t", str(src),
                     "--labels", str(labels)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and msg in err[0]


@pytest.mark.parametrize("fmt", ["openai", "hf"])
def test_a_failed_export_removes_what_it_created_and_only_that(tmp_path, fmt):
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj("x0"), make_traj("x1")])
    with src.open("a") as fh:
        fh.write('{"id": "broken"}\n')  # the export fails on this line, after writing x0 and x1
    fresh = tmp_path / "a" / "b" / "out"
    with pytest.raises(InputError, match="line 3"):
        export_dataset(fresh, fmt=ExportFormat(fmt), trajectories=JsonlSource(src))
    assert not (tmp_path / "a").exists()

    mine = tmp_path / "mine"  # a directory the user made, with files of their own
    (mine / "notes").mkdir(parents=True)
    (mine / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="line 3"):
        export_dataset(mine, fmt=ExportFormat(fmt), trajectories=JsonlSource(src))
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt", "notes"]  # nothing of the failed export
    (mine / "data.jsonl").write_text("a data file no export wrote (no manifest.json)\n")
    with pytest.raises(InputError, match="which no earlier export wrote"):  # refused before anything is read
        export_dataset(mine, fmt=ExportFormat(fmt), trajectories=JsonlSource(src))
    assert (mine / "data.jsonl").read_text() == "a data file no export wrote (no manifest.json)\n"

    good = tmp_path / "good"  # a good export, then a failed one into the same directory: the good one stays
    export_dataset(good, fmt=ExportFormat(fmt), trajectories=[make_traj("g0"), make_traj("g1")])
    before = {p.relative_to(good): p.read_bytes() for p in good.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match="line 3"):
        export_dataset(good, fmt=ExportFormat(fmt), trajectories=JsonlSource(src))
    assert {p.relative_to(good): p.read_bytes() for p in good.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "hf"])
def test_an_export_the_disk_refuses_leaves_no_staging_directory(tmp_path, capsys, fmt):
    """A full disk (here the file size limit, RLIMIT_FSIZE, which fails writes as a full disk does): the writer's
    close flushed its buffer again and raised again, before the staging directory was removed, so each failed
    export left a hidden `.export-*` holding all it had written -- on a full disk, the space a retry needs."""
    src = tmp_path / "t.jsonl"
    write_trajectories(src, [make_traj(f"x{i}", final="a long answer " * 2_000) for i in range(100)])
    good = tmp_path / "good"
    export_dataset(good, fmt=ExportFormat(fmt), trajectories=[make_traj("g0"), make_traj("g1")])
    before = {p.relative_to(good): p.read_bytes() for p in good.rglob("*") if p.is_file()}
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_500_000, hard))  # past the first flush of the 1 MiB write buffer
    try:
        code = main(["dataset", "export", "-o", str(good), "-f", fmt, "--source", "all", "-t", str(src)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {good}: file too large"], err  # the output the disk refused, named
    assert {p.relative_to(good): p.read_bytes() for p in good.rglob("*") if p.is_file()} == before
    assert not [p.name for p in good.iterdir() if p.name.startswith(".")]


def test_a_harness_whose_head_is_damaged_is_named_so(tmp_path):
    """`dataset export --render-under seed --harness H` on a repo whose .git/HEAD is garbage said 'not a git
    repository (expected a harness repo)' of a directory holding .git."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("garbage\n")
    with pytest.raises(InputError, match=r"a damaged git repository: .*\.git/HEAD holds 'garbage\\n'"):
        resolve_prompt(str(tmp_path), "seed")
