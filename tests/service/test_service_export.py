"""POST /datasets/export says which asked-for tasks no record was written of, as `dataset export --task` warns."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path as FsPath

import pytest
from fastapi.testclient import TestClient

from evoharness.config import Settings
from evoharness.datasets.tokens import ChatTemplateTokens
from evoharness.service.app import create_app
from tests.service.helpers import trajectory

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers not installed: no tokenizer to count with")

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_an_asked_for_task_that_gave_no_record_is_named(tmp_path):
    """A typo in `tasks` wrote an empty export (records 0) with nothing to say why; the CLI warns for it."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        stored = c.post("/trajectories", json=[trajectory(f"e{i}", "healthy", task=f"t{i}") for i in range(3)],
                        headers=AUTH)
        assert stored.status_code == 200, stored.text
        r = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory",
                                             "tasks": ["t1", "t-1", "t2", "t-1"]}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["records"] == 2 and r.json()["tasks_without_records"] == ["t-1"], r.json()
        every = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory"}, headers=AUTH)
        assert every.json()["records"] == 3 and every.json()["tasks_without_records"] == []


def test_identical_records_are_skipped_unless_kept_and_counted(tmp_path):
    """The same run ingested twice under two ids: one row, `duplicate_records` 1 (`keep_duplicates` writes both)."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    run = trajectory("e1", "healthy", task="t1")
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/trajectories", json=[run, {**run, "id": "e1-again"}], headers=AUTH).status_code == 200
        r = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory"}, headers=AUTH)
        assert r.json()["records"] == 1 and r.json()["duplicate_records"] == 1, r.json()
        assert r.json()["skipped"] == {"duplicate_record": 1}
        kept = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory",
                                                "keep_duplicates": True}, headers=AUTH)
        assert kept.json()["records"] == 2 and kept.json()["duplicate_records"] == 1, kept.json()


def test_a_placebo_that_is_no_boolean_is_422(tmp_path):
    """`"placebo": "yes"` wrote a placebo set. (`"tasks": ["\\udc80"]`, half a surrogate pair, was a 500, then a 422;
    it is read as U+FFFD now, as POST /trajectories reads it: test_half_a_surrogate_pair_is_read_as_ingest_reads_it.)"""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    NO_BOOL = "Input should be a valid boolean"
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        assert c.post("/trajectories", json=[trajectory("e1", "healthy")], headers=AUTH).status_code == 200
        for body, error in (('{"source": "healthy", "placebo": "yes"}', f"body.placebo: {NO_BOOL}"),
                            ('{"source": "healthy", "placebo": 1}', f"body.placebo: {NO_BOOL}"),
                            ('{"source": "healthy", "keep_duplicates": "no"}', f"body.keep_duplicates: {NO_BOOL}")):
            r = c.post("/datasets/export", content=body, headers={**AUTH, "Content-Type": "application/json"})
            assert r.status_code == 422 and r.json()["error"] == error, (body, r.status_code, r.text)
        assert not (tmp_path / "home" / "exports").exists() or not any((tmp_path / "home" / "exports").iterdir())


def test_half_a_surrogate_pair_is_read_as_ingest_reads_it(tmp_path):
    """A run whose task id a writer cut by UTF-16 units (`"task_id": "cut-\\ud83d"`) is stored under `cut-\ufffd`:
    POST /trajectories reads half a surrogate pair as U+FFFD, as `evoharness import` does. The export route read its
    body with its own `json.loads`, which kept the half pair, and refused it (422, 'holds half a UTF-16 surrogate
    pair'): asking for the task by the very id it was sent under found nothing. Both now read the body alike."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    cut = json.dumps([trajectory("e1", "healthy", task="cut-\ud83d")], ensure_ascii=True)
    assert "\\ud83d" in cut
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        headers = {**AUTH, "Content-Type": "application/json"}
        assert c.post("/trajectories", content=cut, headers=headers).json()["stored"] == 1
        r = c.post("/datasets/export", content='{"source": "healthy", "render_under": "trajectory", '
                                               '"tasks": ["cut-\\ud83d"]}', headers=headers)
        assert r.status_code == 200 and r.json()["records"] == 1, r.text
        assert r.json()["tasks_without_records"] == []


def test_val_fraction_splits_by_task_and_is_validated_like_the_cli(tmp_path):
    """`dataset export --val-fraction F [--split-seed S]` had no counterpart in the service."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    body = {"source": "healthy", "render_under": "trajectory"}
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        runs = [trajectory(f"e{i}", "healthy", task=f"t{i}") for i in range(10)]
        assert c.post("/trajectories", json=runs, headers=AUTH).status_code == 200
        r = c.post("/datasets/export", json={**body, "val_fraction": 0.2, "split_seed": 3}, headers=AUTH)
        assert r.status_code == 200, r.text
        v = r.json()["validation"]
        assert v["seed"] == 3 and v["fraction"] == 0.2 and len(v["tasks"]) == 2 and v["tasks_considered"] == 10
        assert v["records"] == {"train": 8, "validation": 2}
        out = tmp_path / "home" / "exports"
        path = next(out.iterdir())
        assert sorted(p.name for p in path.iterdir() if p.name.endswith(".jsonl")) == [
            "train.jsonl", "train.metadata.jsonl", "validation.jsonl", "validation.metadata.jsonl"]
        assert c.post("/datasets/export", json=body, headers=AUTH).json()["validation"] is None
        for extra, error in (({"val_fraction": 1}, "body.val_fraction: Input should be less than 1"),
                             ({"val_fraction": 0}, "body.val_fraction: Input should be greater than 0"),
                             ({"split_seed": 7}, "split_seed 7: it chooses the tasks of val_fraction, which was not "
                                                 "given"),
                             ({"val_fraction": 0.5, "split_seed": "7"}, "body.split_seed: Input should be a valid "
                                                                        "integer"),
                             ({"val_fraction": 0.5, "tasks": ["t1"]}, "val_fraction: a split by task needs at least "
                                                                      "2 tasks; the sources hold 1 with a record to "
                                                                      "export (after source and the filters; "
                                                                      "held-out tasks never are)")):
            r = c.post("/datasets/export", json={**body, **extra}, headers=AUTH)
            assert r.status_code == 422 and r.json()["error"] == error, (extra, r.status_code, r.text)


def test_export_errors_name_the_fields_the_request_sent_not_the_cli_options(tmp_path):
    """The service said "--task: held-out tasks ...", "--out: ... export into a new or empty directory" and "(after
    --source and the filters ...)" to a client that sent `tasks`, `name` and `source`; the CLI keeps its options'
    names (tests/datasets/test_datasets_export_out.py)."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    body = {"source": "healthy", "render_under": "trajectory"}
    theirs = tmp_path / "home" / "exports" / "theirs"
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        runs = [trajectory("e1", "healthy", task="t1"), trajectory("h1", "healthy", task="secret", split="heldout")]
        assert c.post("/trajectories", json=runs, headers=AUTH).status_code == 200
        for extra, status, error in (
                ({"tasks": ["secret"]}, 422, "tasks: held-out tasks are never exported: secret"),
                ({"val_fraction": 0.5}, 422, "val_fraction: a split by task needs at least 2 tasks; the sources hold 1 "
                                             "with a record to export (after source and the filters; held-out tasks "
                                             "never are)"),
                ({"name": "theirs"}, 409, f"name: {theirs} holds README.md, which no earlier export wrote (no export "
                                          "manifest.json): export under another name")):
            if "name" in extra:
                theirs.mkdir(parents=True)
                (theirs / "README.md").write_text("a project's readme")
            r = c.post("/datasets/export", json={**body, **extra}, headers=AUTH)
            assert r.status_code == status and r.json()["error"] == error, (extra, r.status_code, r.text)
            assert "--" not in r.json()["error"]


def test_hf_without_the_datasets_package_names_the_format_field_not_the_cli_option(tmp_path, monkeypatch):
    """The service said "--format hf: needs the `datasets` package" to a client that sent {"format": "hf"}; the CLI
    keeps its option's name (tests/datasets/test_datasets_export.py)."""
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        assert c.post("/trajectories", json=[trajectory("e1", "healthy", task="t1")], headers=AUTH).status_code == 200
        r = c.post("/datasets/export", json={"source": "healthy", "render_under": "trajectory", "format": "hf"},
                   headers=AUTH)
        assert r.json()["error"] == "format hf: needs the `datasets` package (pip install datasets)", r.text
        assert r.status_code == 409
        assert not list((tmp_path / "home" / "exports").glob("*/data/*"))  # nothing written


def test_skip_text_with_calls_leaves_out_a_reply_with_text_and_calls(tmp_path):
    """`dataset export --skip-text-with-calls` in the service: the run whose call has text beside it is skipped and
    counted as text_with_calls; without the field it is written."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    mixed = trajectory("e2", "healthy", task="t2")
    mixed["messages"][2]["content"] = "Let me look that order up."
    body = {"source": "healthy", "render_under": "trajectory"}
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/trajectories", json=[trajectory("e1", "healthy"), mixed], headers=AUTH).status_code == 200
        r = c.post("/datasets/export", json={**body, "skip_text_with_calls": True}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["records"] == 1 and r.json()["skipped"] == {"text_with_calls": 1}, r.json()
        assert c.post("/datasets/export", json=body, headers=AUTH).json()["records"] == 2


def test_max_tokens_skips_a_longer_record_and_the_answer_gives_the_lengths(tmp_path):
    """`dataset export --max-tokens` in the service (the approximate count: UTF-8 bytes / 3): the longer run is skipped
    whole and counted as over_max_tokens; the answer gives the lengths of what was written."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    long = trajectory("e2", "healthy", task="t2")
    long["messages"][1]["content"] = "a long question " * 400
    body = {"source": "healthy", "render_under": "trajectory"}
    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/trajectories", json=[trajectory("e1", "healthy"), long], headers=AUTH).status_code == 200
        every = c.post("/datasets/export", json=body, headers=AUTH).json()
        lengths = every["token_lengths"]["splits"]["train"]
        assert every["records"] == 2 and lengths["max"] > 2000 > lengths["min"], every
        r = c.post("/datasets/export", json={**body, "max_tokens": 2000}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["records"] == 1 and r.json()["skipped"] == {"over_max_tokens": 1}, r.json()
        assert r.json()["token_lengths"]["splits"]["train"]["max"] == lengths["min"]
        assert c.post("/datasets/export", json={**body, "max_tokens": 0}, headers=AUTH).status_code == 422


@needs_transformers
def test_the_service_counts_tokens_with_the_datasets_tokenizer_setting(tmp_path):
    """`dataset export --tokenizer DIR` in the service: a body names no path on the server, so the operator's
    `datasets.tokenizer` is what it counts with (before: always approximate, bytes / 3); a setting that names no
    tokenizer is 409 naming the setting."""
    from tests.datasets.test_datasets_token_lengths import TEMPLATE, _tokenizer

    runs = [trajectory("e1", "healthy"), trajectory("e2", "healthy", task="t2")]
    tok = _tokenizer(tmp_path / "tok", TEMPLATE, [json.dumps(r) for r in runs])
    body = {"source": "healthy", "render_under": "trajectory"}
    for setting, status in ((str(tok), 200), (str(tmp_path / "none"), 409)):
        home, harness = str(tmp_path / str(status)), str(tmp_path / "h")
        settings = Settings.model_validate({"home": home, "service": {"loop": False}, "run": {"harness": harness},
                                            "datasets": {"tokenizer": setting}})
        with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
            assert c.post("/trajectories", json=runs, headers=AUTH).status_code == 200
            r = c.post("/datasets/export", json=body, headers=AUTH)
            assert r.status_code == status, r.text
            if status == 409:
                assert r.json()["error"].startswith("datasets.tokenizer: ") and "no such directory" in r.json()["error"]
                continue
            lengths = r.json()["token_lengths"]
            assert lengths["exact"] and str(tok) in lengths["method"], lengths
            counted = ChatTemplateTokens(tok)
            written = [json.loads(x) for x in (FsPath(r.json()["path"]) / "data.jsonl").read_text().splitlines()]
            assert lengths["splits"]["train"]["total"] == sum(counted.count(x) for x in written)


@needs_transformers
def test_a_tokenizer_replaced_or_removed_while_the_service_runs_is_read_again(tmp_path):
    """The service kept the first tokenizer it loaded for its whole life: a tokenizer replaced at the setting's path
    was never read (its exports counted with the old one) and one removed still counted, from memory. Now the next
    export reads the replacement, and a removed one is that export's 409; the service goes on answering."""
    import shutil

    from tests.datasets.test_datasets_token_lengths import TEMPLATE, _tokenizer

    runs = [trajectory("e1", "healthy"), trajectory("e2", "healthy", task="t2")]
    tok = tmp_path / "tok"
    _tokenizer(tok, TEMPLATE, [json.dumps(r) for r in runs])
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "service": {"loop": False},
                                        "run": {"harness": str(tmp_path / "h")}, "datasets": {"tokenizer": str(tok)}})
    body = {"source": "healthy", "render_under": "trajectory"}

    def total(r) -> int:
        assert r.status_code == 200, r.text
        return r.json()["token_lengths"]["splits"]["train"]["total"]

    def counted(r) -> int:
        written = [json.loads(x) for x in (FsPath(r.json()["path"]) / "data.jsonl").read_text().splitlines()]
        return sum(ChatTemplateTokens(tok).count(x) for x in written)

    with TestClient(create_app(settings, TOKEN, quiet=True)) as c:
        assert c.post("/trajectories", json=runs, headers=AUTH).status_code == 200
        first = c.post("/datasets/export", json=body, headers=AUTH)
        assert total(first) == counted(first)
        shutil.rmtree(tok)  # another tokenizer at the same path: its template writes a preamble before every turn
        _tokenizer(tok, TEMPLATE.replace("<|im_start|>", "<|im_start|>a longer preamble "), ["x"])
        second = c.post("/datasets/export", json=body, headers=AUTH)
        assert total(second) == counted(second) and total(second) > total(first)
        shutil.rmtree(tok)
        gone = c.post("/datasets/export", json=body, headers=AUTH)
        assert gone.status_code == 409 and gone.json()["error"].startswith("datasets.tokenizer: "), gone.text
        assert "no such directory" in gone.json()["error"]
        assert c.get("/health").status_code == 200
        _tokenizer(tok, TEMPLATE, [json.dumps(r) for r in runs])  # put back: the next export counts again
        assert total(c.post("/datasets/export", json=body, headers=AUTH)) == total(first)


@needs_transformers
def test_the_cli_counts_with_the_datasets_tokenizer_setting_unless_told_otherwise(tmp_path, capsys):
    from evoharness.cli import main
    from tests.datasets.test_datasets_token_lengths import TEMPLATE, _tokenizer

    runs = [trajectory("e1", "healthy"), trajectory("e2", "healthy", task="t2")]
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in runs))
    tok = _tokenizer(tmp_path / "tok", TEMPLATE, [json.dumps(r) for r in runs])
    assert main(["--set", f"datasets.tokenizer={tok}", "dataset", "export", "-t", str(src), "--out",
                 str(tmp_path / "o")]) == 0
    assert "token lengths: train 2 records" in capsys.readouterr().out  # no '(approximate ...)'
    assert main(["--set", f"datasets.tokenizer={tmp_path / 'none'}", "dataset", "export", "-t", str(src), "--out",
                 str(tmp_path / "o2")]) == 2
    assert capsys.readouterr().err.startswith("error: datasets.tokenizer: ")


def test_a_number_field_given_a_boolean_or_a_string_is_422(tmp_path):
    """`"max_per_task": true` exported one record a task and `"min_score": true` only the runs scoring 1, and
    `"min_score": "0.5"` or `"val_fraction": "0.5"` were read as numbers: pydantic's lax mode coerced them, where
    `placebo`, `split_seed` and `max_tokens` already refused another type. Now each is 422 naming the field, nothing
    written; a whole number stays a valid min_score."""
    settings = Settings.model_validate({"home": str(tmp_path / "home"), "run": {"harness": str(tmp_path / "h")},
                                        "service": {"loop": False}})
    body = {"source": "healthy", "render_under": "trajectory"}
    with TestClient(create_app(settings, TOKEN, quiet=True), raise_server_exceptions=False) as c:
        runs = [trajectory(f"e{i}-{k}", "healthy", task=f"t{i}") for i in range(3) for k in range(2)]
        assert c.post("/trajectories", json=runs, headers=AUTH).status_code == 200
        for extra, field in (({"max_per_task": True}, "max_per_task"), ({"max_per_task": "1"}, "max_per_task"),
                             ({"min_score": True}, "min_score"), ({"min_score": "0.5"}, "min_score"),
                             ({"val_fraction": "0.5"}, "val_fraction")):
            r = c.post("/datasets/export", json={**body, **extra}, headers=AUTH)
            assert r.status_code == 422 and r.json()["error"].startswith(f"body.{field}: Input should be a valid "), (
                extra, r.status_code, r.text)
        assert not (tmp_path / "home" / "exports").exists() or not any((tmp_path / "home" / "exports").iterdir())
        ok = c.post("/datasets/export", json={**body, "min_score": 1, "max_per_task": 1}, headers=AUTH)
        assert ok.status_code == 200 and ok.json()["records"] == 3, ok.text
