"""`report --out DIR` never replaces a file of the report's names that no earlier report wrote there."""

from __future__ import annotations

from tests.reports.conftest import cli


def test_a_report_refuses_the_users_own_report_md_unless_told_to_overwrite(own_run, tmp_path, capsys):
    """A report renamed its report.md over the user's own DIR/report.md (notes kept beside a run, an edited copy):
    lost, without a word. Now it is one error: line naming the file, exit 2, DIR as it was; --overwrite replaces
    it; a report.md an earlier report wrote is replaced as before, and one the user changed since is refused."""
    root, run_dir = own_run
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.md").write_text("my notes on this run\n")
    capsys.readouterr()
    for extra in ([], ["--compute"]):  # --compute: refused before any rollout
        assert cli("report", str(root), "--out", str(out), *extra) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [f"error: {out / 'report.md'}: is not a file an earlier report wrote here (or was changed "
                       "since), kept; pass --overwrite to replace it, or name another --out"], err
        assert [p.name for p in out.iterdir()] == ["report.md"]
        assert (out / "report.md").read_text() == "my notes on this run\n"
    assert not (run_dir / "evaluation-dev.json").exists() and not (run_dir / "ablation.json").exists()

    assert cli("report", str(root), "--out", str(out), "--overwrite") == 0
    assert "my notes" not in (out / "report.md").read_text()
    assert cli("report", str(root), "--out", str(out)) == 0  # its own, recorded: replaced

    (out / "report.md").write_text((out / "report.md").read_text() + "\nmy note under the report\n")
    (out / "anchors.png").unlink()
    (out / "anchors.png").write_bytes(b"my own figure")
    assert cli("report", str(root), "--out", str(out)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {out}: holds report.md, anchors.png, not files an earlier report wrote here (or changed since), "
        "kept; pass --overwrite to replace them, or name another --out"]
    assert (out / "report.md").read_text().endswith("my note under the report\n")
    assert (out / "anchors.png").read_bytes() == b"my own figure"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".report.") and p.name.endswith(".tmp")]
