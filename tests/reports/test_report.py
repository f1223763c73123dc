"""`evoharness report`: markdown, HTML and PNGs for a real (short) run, finished or in progress."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser

from evoharness.graph.progress import Progress
from evoharness.graph.runner import start_run
from tests.reports.conftest import cli, run_settings

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VOID = {"meta", "img", "br", "hr", "input", "link"}


class _Balance(HTMLParser):
    """Collects tags; fails on a close tag that does not match the open one."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.imgs: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def _check_html(path) -> _Balance:
    parser = _Balance()
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    parser.feed(text)
    parser.close()
    assert not parser.errors, parser.errors[:3]
    assert not parser.stack, f"unclosed: {parser.stack}"
    return parser


def _check_png(path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) > 15_000, (path, len(data))  # a drawn figure, not an empty canvas


def test_report_of_a_finished_run_has_its_numbers_tables_and_plots(done_run, tmp_path):
    settings, outcome = done_run
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    out = tmp_path / "rep"
    assert cli("report", str(outcome.run_dir), "--out", str(out)) == 0
    for name in ("anchors.png", "composition.png", "seed_vs_evolved.png"):
        _check_png(out / name)
    assert not (out / "ablation.png").exists()  # not computed: the report says how
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    parser = _check_html(out / "report.html")
    assert set(parser.imgs) == {"anchors.png", "composition.png", "seed_vs_evolved.png"}
    assert summary["merged"], "the fixture run should merge the playbook's fix"
    for text in (md, html):
        assert outcome.run_id in text
        for a in summary["anchors"]:  # every anchor, with its commit
            assert f"{a['mean']:.3f}" in text and a["commit"][:10] in text
        for rnd in summary["rounds"]:
            for c in rnd["candidates"]:
                assert c["branch"].removeprefix("candidate/") in text
                assert f"{c['verdict']['measurements']['reading']:.3f}" in text
            assert f"{rnd['selection_optimism']:+.3f}" in text
        for split in ("dev", "heldout"):
            healthy = summary["after"][split]["composition"]["healthy"]
            assert f"{100 * healthy:.1f}%" in text
        assert f"evoharness ablate {outcome.run_id}" in text
        assert "Incomplete run" not in text
    assert "| Round | Commit | Mean |" in md


def test_run_id_and_demo_directory_name_the_same_run(done_run, tmp_path):
    settings, outcome = done_run
    by_id, by_demo = tmp_path / "a", tmp_path / "b"
    assert cli("--set", f"home={settings.home}", "report", outcome.run_id, "--out", str(by_id)) == 0
    assert cli("report", str(settings.run.harness.parent), "--out", str(by_demo)) == 0  # holds summary.json
    strip = [line for line in (by_id / "report.md").read_text().splitlines() if not line.startswith("Generated")]
    assert strip == [line for line in (by_demo / "report.md").read_text().splitlines()
                     if not line.startswith("Generated")]


def test_unknown_or_unusable_run_is_one_error_line(tmp_path, capsys):
    assert cli("--set", f"home={tmp_path}", "report", "run-doesnotexist", "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: run-doesnotexist: no such run")
    (tmp_path / "empty").mkdir()
    assert cli("report", str(tmp_path / "empty"), "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a run directory" in err[0]
    assert not (tmp_path / "o").exists()


def test_report_of_a_run_waiting_for_review_renders_what_exists(tmp_path, capsys):
    settings = run_settings(tmp_path, review=True)
    outcome = start_run(settings, progress=Progress(quiet=True))
    assert outcome.interrupted and not (outcome.run_dir / "summary.json").exists()
    out = tmp_path / "rep"
    assert cli("report", str(outcome.run_dir), "--out", str(out)) == 0
    assert "still in progress" in capsys.readouterr().err
    md = (out / "report.md").read_text()
    assert "Incomplete run" in md and "in progress" in md
    seed = outcome.state["anchors"][0]
    assert f"{seed['mean']:.3f}" in md and seed["commit"][:10] in md
    # the round under way shows its verified candidates, the accepted one awaiting review
    assert "1 (in progress)" in md
    for item in outcome.interrupted[0]["candidates"]:
        row = next(line for line in md.splitlines() if item["branch"].removeprefix("candidate/") in line
                   and "awaiting review" in line)
        verdict = next(v for v in outcome.state["verdicts"] if v["candidate"] == item["branch"])
        assert f"{verdict['measurements']['reading']:.3f}" in row
    _check_html(out / "report.html")
    for name in ("anchors.png", "composition.png", "seed_vs_evolved.png"):
        _check_png(out / name)


def test_report_compute_stores_evaluations_and_ablation_then_plots_them(own_run, tmp_path):
    root, run_dir = own_run
    out = tmp_path / "rep"
    assert cli("report", str(root), "--out", str(out), "--compute", "--rollouts", "4") == 0
    ev = {s: json.loads((run_dir / f"evaluation-{s}.json").read_text()) for s in ("dev", "heldout")}
    abl = json.loads((run_dir / "ablation.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["harness_repo"].startswith(str(root))  # the copy, not the shared run
    assert [e["merge_commit"] for e in abl["edits"]] == [m["merge_commit"] for m in summary["merged"]]
    _check_png(out / "ablation.png")
    md = (out / "report.md").read_text()
    for split in ("dev", "heldout"):
        assert ev[split]["k"] == 4 and ev[split]["candidate"]["commit"] == summary["main"]
        assert f"{ev[split]['difference']:+.3f}" in md
        for e in abl["edits"]:
            assert f"{e['results'][split]['difference']:+.3f}" in md
    assert "Leave-one-out ablation of the merged edits" in md


def test_an_ablation_of_another_main_is_flagged_stale_and_a_file_as_out_is_refused(own_run, tmp_path, capsys):
    root, run_dir = own_run
    (run_dir / "ablation.json").write_text(json.dumps({
        "run_id": run_dir.name, "harness": "h", "main": "f" * 40, "k": 1, "seed": 0, "splits": ["dev"],
        "edits": [{"branch": "candidate/r1-x", "merge_commit": "e" * 40, "applies": False,
                   "reason": "revert does not apply cleanly: conflicts in lessons.md", "results": {}}]}))
    saved = json.loads((run_dir / "settings.json").read_text())
    saved["sandbox"]["warm_spare"] = 4  # a run saved before that key was removed is still reported
    (run_dir / "settings.json").write_text(json.dumps(saved))
    out = tmp_path / "rep"
    assert cli("report", str(root), "--out", str(out)) == 0
    md = (out / "report.md").read_text()
    assert "STALE: the run's main is now" in md and "conflicts in lessons.md" in md
    (tmp_path / "file").write_text("x")
    assert cli("report", str(root), "--out", str(tmp_path / "file")) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


def test_a_run_id_is_the_run_under_home_whatever_the_cwd_holds(done_run, tmp_path, monkeypatch, capsys):
    """A directory in the working directory named like the run (notes kept by run id; the service's working
    directory) was taken for the run: 'error: RUN: not a run directory', though <home>/runs/RUN is the run."""
    settings, outcome = done_run
    (tmp_path / outcome.run_id).mkdir()
    (tmp_path / outcome.run_id / "notes.md").write_text("what I saw in this run\n")
    monkeypatch.chdir(tmp_path)
    assert cli("--set", f"home={settings.home}", "report", outcome.run_id, "--out", str(tmp_path / "o")) == 0, \
        capsys.readouterr().err
    assert outcome.run_id in (tmp_path / "o" / "report.md").read_text()


def test_a_bare_name_that_is_both_a_run_under_home_and_a_run_directory_here_is_an_error(done_run, tmp_path,
                                                                                         monkeypatch, capsys):
    """A copy of the run in the working directory was silently passed over for the run under home: which run a
    report showed depended on a rule the user could not see. Now one error line asks for a path."""
    settings, outcome = done_run
    shutil.copytree(outcome.run_dir, tmp_path / outcome.run_id)
    monkeypatch.chdir(tmp_path)
    assert cli("--set", f"home={settings.home}", "report", outcome.run_id, "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {outcome.run_id}: ambiguous"), err
    assert f"./{outcome.run_id}" in err[0] and str(settings.home) in err[0]
    assert not (tmp_path / "o").exists()
    assert cli("--set", f"home={settings.home}", "report", f"./{outcome.run_id}", "--out", str(tmp_path / "o")) == 0


def test_a_bare_name_that_is_no_run_says_where_it_looked(tmp_path, monkeypatch, capsys):
    """A directory of notes named like a run that does not exist said only 'not a run directory': not that
    the name was looked for under the home too."""
    (tmp_path / "run-gone").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli("--set", f"home={tmp_path / 'home'}", "report", "run-gone", "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: run-gone: no such run under {tmp_path / 'home' / 'runs'}")
    assert "./run-gone here is not a run directory" in err[0]


def test_the_service_reports_the_run_under_its_home_whatever_its_working_directory_holds(done_run, tmp_path,
                                                                                          monkeypatch):
    """GET /runs/{id}/report names a run id, never a path: a copy of the run in the service's working directory is
    no ambiguity there (the CLI's bare-name rule would refuse it)."""
    from evoharness.service.reports import ReportRenderer

    settings, outcome = done_run
    shutil.copytree(outcome.run_dir, tmp_path / outcome.run_id)
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "service-home"
    shutil.copytree(settings.home, home)
    html = ReportRenderer(settings.model_copy(update={"home": home})).render(outcome.run_id)
    assert f"evoharness run report: {outcome.run_id}" in html


def test_a_report_that_fails_on_the_way_leaves_the_earlier_one_whole(done_run, tmp_path, monkeypatch, capsys):
    """`report --out DIR` drew each PNG and wrote report.md, then report.html, in place: a figure that failed
    left new PNGs beside the old pages, and a failure at report.html (a full disk) a new report.md beside the old
    report.html. Now all are written aside and renamed into place only when every one is whole."""
    import errno

    from evoharness.reports import plots, report

    settings, outcome = done_run
    out = tmp_path / "rep"
    out.mkdir()
    earlier = {"report.md": b"old md", "report.html": b"old html", "anchors.png": b"old png",
               "composition.png": b"old png", "seed_vs_evolved.png": b"old png"}
    for name, data in earlier.items():
        (out / name).write_bytes(data)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    class NoHtml:
        def __init__(self, env):
            self.env = env

        def get_template(self, name):
            return type("T", (), {"render": full})() if name.endswith(".html.j2") else self.env.get_template(name)

    real = report._environment
    for broken in ((plots, "composition_plot", full),
                   (report, "_environment", lambda autoescape: NoHtml(real(False)) if autoescape else real(False))):
        with monkeypatch.context() as m:
            m.setattr(*broken)
            assert cli("report", str(outcome.run_dir), "--out", str(out)) != 0, broken[1]
        err = capsys.readouterr().err.splitlines()
        assert err == ["error: no space left on device"], err  # one line, no traceback
        assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier, broken[1]  # nothing new, nothing left
    assert cli("report", str(outcome.run_dir), "--out", str(out), "--overwrite") == 0  # no report recorded those
    assert sorted(p.name for p in out.iterdir()) == sorted([*earlier, report.WRITTEN])
    assert all((out / name).read_bytes() != data for name, data in earlier.items())


def test_a_killed_reports_staging_directories_are_removed_by_the_next(done_run, tmp_path):
    """A `report --out DIR` killed while it drew left its .report.*.tmp staging directory (PNGs, report.md) in DIR,
    one more for each kill. The next report removes them: its own naming only, and not one a live process is using."""
    import os
    import subprocess
    import sys

    from evoharness.reports.report import STALE_STAGE_AGE_S, machine_id

    settings, outcome = done_run
    out = tmp_path / "rep"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = dead.stdout.strip()
    # a dead pid's of this machine; the older namings, which say no machine, once older than the stated age
    left = [f".report.{dead_pid}.{machine_id()}.k2j4_x9a.tmp", f".report.{dead_pid}.q1w2e3r4.tmp",
            ".report.ab12cd_3.tmp"]
    for name in left:
        (out / name).mkdir()
        (out / name / "anchors.png").write_bytes(b"half drawn")
    for name in left[1:]:
        long_ago = (out / name).stat().st_mtime - STALE_STAGE_AGE_S - 60
        os.utime(out / name, (long_ago, long_ago))
    live = out / f".report.{os.getpid()}.{machine_id()}.zz9yy8xx.tmp"  # a report this process is building
    live.mkdir()
    others = [out / ".report.notes.tmp.bak", out / "mine.tmp", out / ".report.txt"]
    for path in others:
        path.write_text("the user's")
    assert cli("report", str(outcome.run_dir), "--out", str(out)) == 0
    assert not any((out / name).exists() for name in left)
    assert live.is_dir() and all(p.read_text() == "the user's" for p in others)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".report.") and p.is_dir()) == [live.name]


def test_a_staging_directory_of_another_pid_namespace_or_host_is_judged_by_its_age_not_its_pid(tmp_path):
    """A report judged every .report.<pid>.*.tmp in DIR by whether that pid lived here: a report being drawn by a
    container sharing DIR (a pid namespace of its own) or another host lost its staging directory mid-draw. Now a
    stage is judged by its pid only when its name holds this host's, boot's and pid namespace's id; any other is
    kept until older than the stated age."""
    import os
    import subprocess
    import sys

    from evoharness.reports.report import STALE_STAGE_AGE_S, machine_id, remove_stale_stages

    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()  # no process here; one there may have it
    other = "0" * 12 if machine_id() != "0" * 12 else "1" * 12
    theirs = [f".report.{dead_pid}.{other}.a1b2c3d4.tmp", f".report.{dead_pid}.a1b2c3d4.tmp"]
    for name in theirs:
        (tmp_path / name).mkdir()
    assert remove_stale_stages(tmp_path) == []
    assert all((tmp_path / name).is_dir() for name in theirs)
    later = (tmp_path / theirs[0]).stat().st_mtime + STALE_STAGE_AGE_S + 60
    assert sorted(remove_stale_stages(tmp_path, now=later)) == sorted(theirs)
    ours = tmp_path / f".report.{dead_pid}.{machine_id()}.a1b2c3d4.tmp"
    ours.mkdir()
    assert remove_stale_stages(tmp_path) == [ours.name] and os.listdir(tmp_path) == []


def test_a_directory_named_like_a_stage_but_for_a_final_newline_is_not_removed(tmp_path):
    """remove_stale_stages touches nothing in ``out`` but the stages a killed `build` left: its name pattern ended in
    ``$``, which matches before a final newline, so an old directory '.report.a1b2c3d4.tmp\n' (not one `build` makes)
    was removed with what it held."""
    from evoharness.reports.report import STALE_STAGE_AGE_S, remove_stale_stages

    kept = tmp_path / ".report.a1b2c3d4.tmp\n"
    kept.mkdir()
    (kept / "notes.md").write_text("mine")
    later = kept.stat().st_mtime + STALE_STAGE_AGE_S + 60
    assert remove_stale_stages(tmp_path, now=later) == []
    assert (kept / "notes.md").read_text() == "mine"


def test_the_services_report_directories_a_kill_left_are_removed_by_its_next_render(done_run, tmp_path):
    """GET /runs/{id}/report builds into <home>/service/reports/.<run>.<hex>.new and moves the old one to .old: a
    service killed meanwhile left them there for good, one more per kill."""
    from evoharness.service.reports import ReportRenderer

    settings, outcome = done_run
    home = tmp_path / "service-home"
    shutil.copytree(settings.home, home)
    root = home / "service" / "reports"
    left = [root / f".{outcome.run_id}.0badc0de.new", root / ".other-run.1234abcd.old"]
    for path in left:
        path.mkdir(parents=True)
        (path / "anchors.png").write_bytes(b"half drawn")
    kept = [root / "notes.new", root / ".keep"]
    for path in kept:
        path.write_text("the user's")
    ReportRenderer(settings.model_copy(update={"home": home})).render(outcome.run_id)
    assert not any(p.exists() for p in left)
    assert sorted(p.name for p in root.iterdir()) == sorted([outcome.run_id, *(p.name for p in kept)])


def test_a_report_rendered_again_into_its_directory_leaves_no_figure_it_did_not_draw(own_run, tmp_path):
    """`report --out DIR` into a DIR an earlier report used left that report's files the new one does not write: an
    ablation.png from a report that had the run's ablation stayed beside a report.md that says none is computed, a
    stale figure read as current. Now the report's own file names this render did not write go, nothing else."""
    root, run_dir = own_run
    (run_dir / "ablation.json").write_text(json.dumps({
        "run_id": run_dir.name, "harness": "h", "main": "f" * 40, "k": 1, "seed": 0, "splits": ["dev"],
        "edits": [{"branch": "candidate/r1-x", "merge_commit": "e" * 40, "applies": False,
                   "reason": "revert does not apply cleanly: conflicts in lessons.md", "results": {}}]}))
    out = tmp_path / "rep"
    assert cli("report", str(root), "--out", str(out)) == 0
    from evoharness.reports.report import FILES, WRITTEN

    assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, WRITTEN])  # every name it writes is in FILES
    others = [out / "ablation.png.bak", out / "notes.md", out / "ablation"]
    for path in others:
        path.write_text("the user's")
    (run_dir / "ablation.json").unlink()
    assert cli("report", str(root), "--out", str(out)) == 0
    assert "Not computed yet" in (out / "report.md").read_text()
    assert not (out / "ablation.png").exists()
    assert all(p.read_text() == "the user's" for p in others)
    assert sorted(p.name for p in out.iterdir()) == sorted([*(n for n in FILES if n != "ablation.png"), WRITTEN,
                                                            *(p.name for p in others)])


def test_a_report_removes_only_files_it_wrote_not_the_users_of_its_file_names(own_run, tmp_path):
    """A report removed every file of its own names (ablation.png, ...) it did not draw from --out DIR, the user's
    own too: a DIR holding the user's ablation.png lost it at the first report of a run with no ablation. Now only a
    file an earlier report wrote (DIR/.report-written.json), still as it left it, goes."""
    root, run_dir = own_run
    ablation = run_dir / "ablation.json"
    stored = json.dumps({
        "run_id": run_dir.name, "harness": "h", "main": "f" * 40, "k": 1, "seed": 0, "splits": ["dev"],
        "edits": [{"branch": "candidate/r1-x", "merge_commit": "e" * 40, "applies": False,
                   "reason": "revert does not apply cleanly: conflicts in lessons.md", "results": {}}]})
    users = b"the user's figure"
    out, own = tmp_path / "rep", tmp_path / "own"
    out.mkdir()
    (out / "ablation.png").write_bytes(users)  # there before any report
    assert cli("report", str(root), "--out", str(out)) == 0
    assert (out / "ablation.png").read_bytes() == users

    ablation.write_text(stored)
    assert cli("report", str(root), "--out", str(out)) == 2  # the user's is not replaced unasked
    assert (out / "ablation.png").read_bytes() == users
    assert cli("report", str(root), "--out", str(out), "--overwrite") == 0  # the report draws its own there
    ablation.unlink()
    assert cli("report", str(root), "--out", str(out)) == 0
    assert not (out / "ablation.png").exists()  # one it drew goes, as before

    ablation.write_text(stored)
    assert cli("report", str(root), "--out", str(out)) == 0
    (out / "ablation.png").unlink()
    (out / "ablation.png").write_bytes(users)  # put there since, in place of the report's
    ablation.unlink()
    assert cli("report", str(root), "--out", str(out)) == 0
    assert (out / "ablation.png").read_bytes() == users

    from evoharness.reports.report import WRITTEN

    own.mkdir()
    (own / WRITTEN).write_text('{"mine": true}')  # a file of the record's name that no report wrote
    assert cli("report", str(root), "--out", str(own)) == 0
    assert (own / WRITTEN).read_text() == '{"mine": true}'


def test_a_run_whose_records_are_nested_too_deeply_or_of_another_shape_is_one_error_line(own_run, tmp_path, capsys):
    """A summary.json or settings.json nested past the JSON parser's depth was a RecursionError traceback for
    `report`, `ablate` and `evaluate --run`; a summary.json of another shape (`"rounds": "x"`, no anchors, `"main": 5`)
    was `ValueError: no anchors to plot` from `report` and `KeyError: 'main'` from `ablate`."""
    root, run_dir = own_run
    summary = run_dir / "summary.json"
    good = json.loads(summary.read_text())
    home = f"home={root / 'state'}"
    for name, text, reason in (
            ("summary.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
            ("settings.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
            ("summary.json", json.dumps({**good, "rounds": "x"}), "rounds is a string, not a list"),
            ("summary.json", json.dumps({**good, "anchors": []}), "measured nothing"),
            ("summary.json", json.dumps({**good, "main": 5}), "main is a number, not a string")):
        saved = (run_dir / name).read_text()
        (run_dir / name).write_text(text)
        for argv in (["report", run_dir.name, "--out", str(tmp_path / "rep")], ["ablate", run_dir.name],
                     ["evaluate", "--run", run_dir.name]):
            assert cli("--set", home, *argv) == 2, (name, argv)
            err = capsys.readouterr().err.splitlines()
            assert len(err) == 1 and err[0].startswith("error: ") and reason in err[0], (name, argv, err)
        (run_dir / name).write_text(saved)
    assert not (tmp_path / "rep").exists() and not (run_dir / "ablation.json").exists()


def test_a_report_file_name_with_a_final_newline_is_no_file(tmp_path):
    """GET /runs/{id}/report/<file>: FILE_NAME ended in ``$``, which matches before a final newline, so 'x.png\\n'
    passed the name check and a file of that name (suffix '.png\\n') raised KeyError on its media type. Now no file
    (404), as every other name outside the pattern."""
    from evoharness.config import Settings
    from evoharness.service.reports import ReportRenderer

    renderer = ReportRenderer(Settings(home=tmp_path))
    run = renderer.root / "run-1"
    run.mkdir(parents=True)
    (run / "x.png\n").write_bytes(b"png")
    (run / "x.png").write_bytes(b"png")
    assert renderer.file("run-1", "x.png\n") is None
    assert renderer.file("run-1", "x.png") == (b"png", "image/png")
