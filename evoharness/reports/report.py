"""Build a run's report: tables from its summary (and stored evaluations / ablation), four PNGs,
then `report.md` and `report.html` rendered from the Jinja2 templates next to this module.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from evoharness.errors import InputError
from evoharness.graph.summary import split_rejected
from evoharness.reports import plots
from evoharness.reports.runs import RunRecord, load_stored
from evoharness.verification.noise import resolvable_difference

TEMPLATES = Path(__file__).parent
CLASSES = plots.CLASSES
COMP_HEAD = ["n", "Healthy", "F1", "F2", "F3", "F4", "E", "Delivery", "Mean score"]


def has_unknown(comps: list[dict[str, Any] | None]) -> bool:
    """Whether any of these `Composition.to_dict()`s has an unknown run (unscored, no signal: no verdict)."""
    return plots.UNKNOWN in plots.shown_classes([(c or {}).get("composition") for c in comps])


def comp_head(unknown: bool = False) -> list[str]:
    """The composition columns; with ``unknown``, an "Unknown (no verdict)" column after E."""
    return [*COMP_HEAD[:7], plots.CLASS_LABELS[plots.UNKNOWN], *COMP_HEAD[7:]] if unknown else COMP_HEAD


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def short(sha: str | None) -> str:
    return str(sha or "-")[:10]


def comp_cells(comp: dict[str, Any] | None, mean: float | None = None, unknown: bool = False) -> list[str]:
    """One row under `comp_head` (``unknown``: with its Unknown column; a composition without one shows 0.0%)."""
    if not comp:
        return ["-"] * len(comp_head(unknown))
    shares = comp.get("composition") or {}
    classes = [*CLASSES, plots.UNKNOWN] if unknown else CLASSES
    return [str(comp.get("n", "-")), *(pct(shares.get(c, 0.0 if c == plots.UNKNOWN else None)) for c in classes),
            pct(comp.get("delivery_rate")),
            num(comp.get("mean_score") if mean is None else mean)]


def table(title: str, head: list[str], rows: list[list[str]], note: str | None = None) -> dict[str, Any]:
    return {"title": title, "head": head, "rows": rows, "note": note}


# ---- the tables ----------------------------------------------------------------------------------

def overview(record: RunRecord) -> list[tuple[str, str]]:
    s, run = record.summary, record.settings.run
    budget = s.get("budget") or {}
    rows = [("Run", record.run_id),
            ("Status", "complete" if record.complete else "in progress"),
            ("Stop reason", str(s.get("stop_reason") or "-")),
            ("Recommendation", str(s.get("recommendation") or "-")),
            ("Environment / model", f"{run.env} / {run.model}"),
            ("Rollouts per task (k)", str(run.rollouts)),
            ("Harness repo", f"{record.harness or s.get('harness_repo')} (main {short(s.get('main'))})"),
            ("Budget", f"{budget.get('spent', 0):g} of {budget.get('total') or 0:g} units spent "
                       f"({budget.get('rollouts', 0)} rollouts)"),
            ("Merged / rejected / superseded / dropped",
             f"{len(s.get('merged') or [])} / {len(split_rejected(s.get('rejected') or [])[0])} / "
             f"{len(split_rejected(s.get('rejected') or [])[1])} / {len(s.get('dropped') or [])}"),
            ("Training queue", f"{s.get('queued', 0)} content-failure trajectories")]
    share = s.get("accommodation_share")
    rows.append(("Critic accommodation flags", "-" if share is None else f"{100 * share:.0f}% of reviews"))
    return rows


def anchors_table(summary: dict[str, Any], z: float) -> dict[str, Any]:
    rows = []
    for a in summary.get("anchors") or []:
        sigma, k = a.get("sigma") or 0.0, a.get("k") or 1
        rows.append([str(a.get("round")), short(a.get("commit")), num(a.get("mean")), num(sigma), str(k),
                     num(resolvable_difference(sigma, k, z))])
    return table("Anchors (main's dev measurement; a fresh one after every merge)",
                 ["Round", "Commit", "Mean", "σ", "k", f"Resolvable ({z:g}σ/√k)"], rows)


def rounds_table(summary: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for r in summary.get("rounds") or []:
        cands = r.get("candidates") or []
        accepted = sum(1 for c in cands if (c.get("verdict") or {}).get("accepted"))
        rows.append([f"{r['round']} (in progress)" if r.get("in_progress") else str(r["round"]),
                     num(r.get("anchor_before")), str(len(cands)), str(accepted),
                     ", ".join(m.removeprefix("candidate/") for m in r.get("merged") or []) or "-",
                     num(r.get("fresh_anchor")), num(r.get("selection_optimism"), signed=True),
                     f"{r.get('budget_left', 0):g}"])
    return table("Rounds", ["Round", "Anchor (bar)", "Candidates", "Accepted", "Merged", "Fresh anchor",
                            "Selection optimism", "Budget left"], rows,
                 "Selection optimism = the merged candidate's reading minus the fresh anchor measured after "
                 "its merge.")


def candidates_table(summary: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for r in summary.get("rounds") or []:
        merged = set(r.get("merged") or [])
        for c in r.get("candidates") or []:
            v = c.get("verdict") or {}
            m = v.get("measurements") or {}
            status = "merged" if c["branch"] in merged else ("accepted" if v.get("accepted") else "rejected")
            if r.get("in_progress") and v.get("accepted"):
                status = "accepted, awaiting review or merge"
            reason = v.get("reason") or "-"
            if c["branch"] not in merged:
                reason = next((x.get("reason") for x in summary.get("rejected") or []
                               if x.get("branch") == c["branch"]), reason)
            rows.append([str(r["round"]), c["branch"].removeprefix("candidate/"), str(c.get("targets") or "-"),
                         num(m.get("reading")), num(m.get("targeted_baseline", m.get("baseline_mean"))),
                         num(m.get("gain"), signed=True), num(m.get("resolvable")), status, str(reason)])
    return table("Candidates", ["Round", "Candidate", "Targets", "Reading", "Baseline", "Gain", "Resolvable",
                                "Status", "Reason"], rows,
                 "Reading and baseline are means on the candidate's verification tasks (same seeds).")


def composition_columns(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any] | None]]:
    """(label, Composition dict) per round: the anchor in force at the start of the round, then the end."""
    cols: list[tuple[str, dict[str, Any] | None]] = []
    for r in summary.get("rounds") or []:
        cols.append((f"round {r['round']}" + (" (now)" if r.get("in_progress") else ""), r.get("composition")))
    before = (summary.get("before") or {}).get("dev")
    if not cols and before:
        cols.append(("seed", before))
    after = (summary.get("after") or {}).get("dev")
    if after:
        cols.append(("end", after))
    return cols


def composition_table(cols: list[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    unknown = has_unknown([c for _, c in cols])
    return table("Composition per round (dev anchor)", ["When", *comp_head(unknown)],
                 [[label, *comp_cells(c, unknown=unknown)] for label, c in cols],
                 "Each round's row is the composition of the anchor that round started from; 'end' is the "
                 "final anchor.")


def seed_vs_evolved(summary: dict[str, Any], evaluations: dict[str, dict[str, Any]]
                    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Plot data and table for seed vs evolved, per split.

    A stored evaluation of exactly the run's seed vs its final main replaces the run's own before/after
    measurement for its split (it carries the noise threshold).
    """
    before, after = summary.get("before") or {}, summary.get("after") or {}
    seed = ((summary.get("anchors") or [{}])[0]).get("commit")
    data: dict[str, dict[str, Any]] = {}
    rows = []
    for split in ("dev", "heldout"):
        ev = evaluations.get(split)
        if ev and ev["baseline"]["commit"] == seed and ev["candidate"]["commit"] == summary.get("main"):
            b = {**ev["baseline"]["composition"], "mean_score": ev["baseline"]["mean"]}
            a = {**ev["candidate"]["composition"], "mean_score": ev["candidate"]["mean"]}
            data[split] = {"seed": b, "evolved": a, "resolvable": ev["resolvable"],
                           "source": f"`evaluate`, k={ev['k']}, seeds {ev['seeds'][0]}..{ev['seeds'][-1]}"}
        else:
            b, a = before.get(split), after.get(split)
            if b is None and a is None:
                continue
            data[split] = {"seed": b, "evolved": a, "resolvable": None,
                           "source": "the run's own measurements" + ("" if a else " (evolved: not measured yet)")}
    unknown = has_unknown([d[arm] for d in data.values() for arm in ("seed", "evolved")])
    for split, d in data.items():
        name = "dev" if split == "dev" else "held-out"
        diff = None
        if (d["seed"] or {}).get("mean_score") is not None and (d["evolved"] or {}).get("mean_score") is not None:
            diff = d["evolved"]["mean_score"] - d["seed"]["mean_score"]
        rows.append([name, "seed", *comp_cells(d["seed"], unknown=unknown), "", d["source"]])
        rows.append([name, "evolved", *comp_cells(d["evolved"], unknown=unknown), num(diff, signed=True),
                     "-" if d["resolvable"] is None else num(d["resolvable"])])
    t = table("Seed vs evolved", ["Split", "Harness", *comp_head(unknown), "Δ mean", "Resolvable / source"], rows,
              "Dev before/after are the seed anchor and the final anchor; held-out is measured, never used "
              "for selection.")
    return data, t


def evaluations_table(evaluations: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    if not evaluations:
        return None
    rows = []
    for split, ev in evaluations.items():
        b, c = ev["baseline"], ev["candidate"]
        rows.append([split, f"{b['rev']} ({short(b['commit'])})", num(b["mean"]), f"{c['rev']} ({short(c['commit'])})",
                     num(c["mean"]), num(ev["difference"], signed=True), num(ev["sigma"]),
                     f"{num(ev['resolvable'])} (k={ev['k']})", ev["verdict"]])
    return table("Evaluation (`evoharness evaluate`)", ["Split", "Baseline", "Mean", "Candidate", "Mean",
                                                        "Difference", "σ", "Resolvable", "Verdict"], rows)


def ablation_table(ablation: dict[str, Any], main: str | None) -> dict[str, Any]:
    rows = []
    for e in ablation.get("edits") or []:
        name = e["branch"].removeprefix("candidate/")
        if not e.get("applies"):
            rows.append([name, str(e.get("targets") or "-"), short(e["merge_commit"]), "-", "-", "-", "-", "-",
                         str(e.get("reason"))])
            continue
        for split, ev in (e.get("results") or {}).items():
            verdict = {"better": "helps", "worse": "hurts"}.get(ev["verdict"], "within noise")
            rows.append([name, str(e.get("targets") or "-"), short(e["merge_commit"]), split,
                         num(ev["candidate"]["mean"]), num(ev["baseline"]["mean"]),
                         num(ev["difference"], signed=True), num(ev["resolvable"]), verdict])
    return table("Leave-one-out ablation of the merged edits",
                 ["Edit", "Targets", "Merge", "Split", "With (main)", "Without", "Drop", "Resolvable", "Verdict"],
                 rows, f"main {short(ablation.get('main'))} with each merge reverted in turn (k={ablation.get('k')}, "
                 f"seeds from {ablation.get('seed')}); drop = with - without."
                 + ("" if ablation.get("main") == main else
                    f" STALE: the run's main is now {short(main)}; run `evoharness ablate` again."))


def lists(summary: dict[str, Any]) -> dict[str, list[str]]:
    return {
        "merged": [f"{m['branch']} ({short(m.get('commit'))} → merge {short(m.get('merge_commit'))}), round "
                   f"{m.get('round')}, targets {m.get('targets')}" + (f"; {m['approval']}" if m.get("approval") else "")
                   for m in summary.get("merged") or []],
        "rejected": [f"{r['branch']} ({short(r.get('commit'))}), round {r.get('round')}: {r.get('reason')}"
                     for r in split_rejected(summary.get("rejected") or [])[0]],
        "superseded": [f"{r['branch']} ({short(r.get('commit'))}), round {r.get('round')}: {r.get('reason')}"
                       for r in split_rejected(summary.get("rejected") or [])[1]],
        "dropped": [f"round {d.get('round')}" + (f", {d['pattern']}" if d.get("pattern") else "")  # analyst: none
                    + f": {d.get('reason')}" for d in summary.get("dropped") or []],
    }


# ---- rendering -----------------------------------------------------------------------------------

def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


@lru_cache(maxsize=2)
def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=autoescape, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["cell"] = _md_cell
    return env


def build(record: RunRecord, out: Path, overwrite: bool = False) -> dict[str, Path]:
    """Write ``out/report.md``, ``out/report.html`` and the PNGs; return {name: path}.

    Every file is drawn and rendered into a hidden directory in ``out`` first and renamed into place only
    when all of them are written: a failure on the way (a figure or template that raises, a full disk) leaves
    an earlier report whole, never an old report.md beside a new report.html or new PNGs. A file of one of those
    names in ``out`` that no earlier report wrote (`refuse_foreign`) is replaced only with ``overwrite``; without
    it nothing is renamed in and `InputError` names the file. Then the files an earlier report wrote that this
    one did not (`remove_unwritten`, read from `WRITTEN`) go."""
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_stages(out)
    stage = Path(tempfile.mkdtemp(prefix=f".report.{os.getpid()}.{machine_id()}.", suffix=".tmp", dir=out))
    earlier = read_written(out)
    mine = earlier is not None or not (out / WRITTEN).is_symlink() and not (out / WRITTEN).exists()
    try:
        staged = _write(record, stage)
        if not overwrite:
            refuse_foreign(out, [path.name for path in staged.values()], earlier)
        if mine:  # a rename keeps each file's identity: recorded here, it is the one the file has in ``out``
            _record_written(stage, {path.name for path in staged.values()})
        for path in staged.values():
            os.replace(path, out / path.name)
        if mine:
            os.replace(stage / WRITTEN, out / WRITTEN)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    remove_unwritten(out, {path.name for path in staged.values()}, earlier)
    return {name: out / path.name for name, path in staged.items()}


FILES = ("report.md", "report.html", "anchors.png", "composition.png", "seed_vs_evolved.png", "ablation.png")
# The files the last report wrote into its DIR, each as (inode, size, mtime ns) when it was renamed into place.
WRITTEN = ".report-written.json"
_WRITTEN_KIND = "evoharness report files"


def _identity(path: Path) -> list[int]:
    st = path.lstat()
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def read_written(out: Path) -> dict[str, list[int]] | None:
    """{name: identity} of the files the last report wrote into ``out`` (`WRITTEN`); None when there is no such
    record, or the file of that name is not one: a user's own file of that name is not read as one, and `build`
    neither overwrites it nor records anything (so removes nothing) in that ``out``."""
    try:
        data = json.loads((out / WRITTEN).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kind") != _WRITTEN_KIND or not isinstance(data.get("files"), dict):
        return None
    return {name: ident for name, ident in data["files"].items()
            if name in FILES and isinstance(ident, list) and len(ident) == 3}


def refuse_foreign(out: Path, names: list[str], earlier: dict[str, list[int]] | None) -> None:
    """Raise `InputError` naming the files of ``names`` in ``out`` a report would replace that are not an earlier
    report's (``earlier``: `read_written`) still as it left them: the user's own ``report.md``, or one they edited
    since. A report replaced them silently; `report --overwrite` still does."""
    foreign = [name for name in names if (out / name).is_symlink() or (out / name).exists()]
    foreign = sorted((n for n in foreign if _identity(out / n) != (earlier or {}).get(n)), key=FILES.index)
    if len(foreign) == 1:
        raise InputError(str(out / foreign[0]), "is not a file an earlier report wrote here (or was changed since), "
                                                "kept; pass --overwrite to replace it, or name another --out")
    if foreign:
        raise InputError(str(out), f"holds {', '.join(foreign)}, not files an earlier report wrote here (or changed "
                                   "since), kept; pass --overwrite to replace them, or name another --out")


def _record_written(stage: Path, written: set[str]) -> None:
    files = {name: _identity(stage / name) for name in sorted(written)}
    (stage / WRITTEN).write_text(json.dumps({"kind": _WRITTEN_KIND, "files": files}, indent=1) + "\n")


def remove_unwritten(out: Path, written: set[str], earlier: dict[str, list[int]] | None) -> list[str]:
    """Remove the files an earlier report wrote into ``out`` (``earlier``: `read_written`) that this render did not
    write: an earlier report's ``ablation.png`` beside a report that has no ablation would read as current. Only a
    file still as that report left it (same inode, size and modification time): one the user put there, before or
    since, under a report's name is kept, as is everything else in ``out``. Returns the names removed."""
    removed = []
    for name, ident in (earlier or {}).items():
        path = out / name
        if name in written or not (path.is_symlink() or path.is_file()):
            continue
        try:
            if _identity(path) != ident:
                continue
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(name)
    return removed


# mkdtemp's name: .report.<pid>.<machine>.<random>.tmp since the thirteenth session; .report.<pid>.<random>.tmp
# (twelfth) and .report.<random>.tmp (before) as they were named before
# (\A and \Z: a ``$`` matches before a final newline, and a directory of another name -- '.report.x.tmp\n' -- was
# removed as a stage)
_STAGE = re.compile(r"\A\.report\.(?:(\d+)\.)?(?:([0-9a-f]{12})\.)?[A-Za-z0-9_]+\.tmp\Z")
# A staging directory whose name does not say this machine and pid namespace is judged by its age alone: a report
# draws in seconds, so one this old was left by a report that was killed
STALE_STAGE_AGE_S = 24 * 3600


def _read_or_empty(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _read_link_or_empty(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


@lru_cache(maxsize=1)
def machine_id() -> str:
    """12 hex digits naming this host, its boot and this process's pid namespace: a pid means a process only
    among those of the same three (a container with a pid namespace of its own sharing DIR, another host on a
    shared file system, a report killed before a reboot have pids of their own)."""
    who = "\0".join((os.uname().nodename, _read_or_empty("/proc/sys/kernel/random/boot_id"),
                     _read_link_or_empty("/proc/self/ns/pid")))
    return hashlib.sha256(who.encode()).hexdigest()[:12]


def remove_stale_stages(out: Path, now: float | None = None) -> list[str]:
    """Remove the staging directories a killed `build` left in ``out``. One named with this machine's id
    (`machine_id`) is judged by its pid: kept while that process is alive (another report being built there). Any
    other (another pid namespace's or host's, or of the older namings, which say no namespace) is not judged by a pid
    it may not share: kept until it is older than ``STALE_STAGE_AGE_S``. Returns the names removed. Nothing else in
    ``out`` is touched."""
    now = time.time() if now is None else now
    removed = []
    for path in out.iterdir():
        found = _STAGE.match(path.name)
        if found is None or path.is_symlink() or not path.is_dir():
            continue
        pid, machine = found.groups()
        if pid is not None and machine == machine_id():
            if _alive(int(pid)):
                continue
        else:
            try:
                if now - path.stat().st_mtime < STALE_STAGE_AGE_S:
                    continue
            except FileNotFoundError:
                continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    return removed


def _alive(pid: int) -> bool:
    if pid <= 0:  # os.kill(0, ...) would signal the process group
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _write(record: RunRecord, out: Path) -> dict[str, Path]:
    """Draw the PNGs and render report.md and report.html into ``out``; return {name: path}."""
    summary = record.summary
    z = record.settings.verification.z
    evaluations, ablation = load_stored(record)
    written: dict[str, Path] = {}

    def figure(name: str, caption: str, path: Path) -> dict[str, str]:
        written[name] = path
        return {"file": path.name, "caption": caption}

    sections = []
    anchors_png = plots.anchors_plot(summary.get("rounds") or [], summary.get("anchors") or [], z,
                                     out / "anchors.png")
    sections.append({
        "title": "Anchors and candidates",
        "figure": figure("anchors", "(a) The anchor per round (the bar each round had to beat, with its noise "
                         "band), every candidate's reading, and the fresh anchor measured after each merge: the "
                         "arrow from the merged candidate's reading to the fresh anchor is the selection optimism.",
                         anchors_png),
        "tables": [anchors_table(summary, z), rounds_table(summary), candidates_table(summary)], "text": None})
    cols = composition_columns(summary)
    sections.append({
        "title": "Failure composition per round",
        "figure": figure("composition", "(b) Failure composition of the dev anchor per round (the first failure "
                         "signal that fires: Healthy, F1 evidence, F2 harness friction, F3 execution control, "
                         "F4 planning capacity, E environment; Unknown: unscored, no signal, no verdict).",
                         plots.composition_plot(cols, out / "composition.png"))
        if cols else None,
        "tables": [composition_table(cols)] if cols else [], "text": None if cols else "Nothing measured yet."})
    sve_data, sve_table = seed_vs_evolved(summary, evaluations)
    sections.append({
        "title": "Seed vs evolved",
        "figure": figure("seed_vs_evolved", "(c) Seed vs evolved harness on dev and held-out: mean score and "
                         "composition.", plots.seed_vs_evolved_plot(sve_data, out / "seed_vs_evolved.png"))
        if sve_data else None,
        "tables": [t for t in (sve_table if sve_data else None, evaluations_table(evaluations)) if t],
        "text": None if sve_data else "Nothing measured yet."})
    if ablation is not None and ablation.get("edits"):
        sections.append({
            "title": "Leave-one-out ablation",
            "figure": figure("ablation", "(d) Leave-one-out: main's score with each merged edit removed in turn; "
                             "the dashed line is main with every edit.",
                             plots.ablation_plot(ablation["edits"], ablation.get("splits") or [],
                                                 out / "ablation.png")),
            "tables": [ablation_table(ablation, summary.get("main"))], "text": None})
    else:
        text = ("The run merged no edits: there is nothing to ablate." if ablation is not None else
                f"Not computed yet: run `evoharness ablate {record.run_id}` (or `evoharness report "
                f"{record.run_id} --out DIR --compute`).")
        sections.append({"title": "Leave-one-out ablation", "figure": None, "tables": [], "text": text})
    context = {
        "run_id": record.run_id, "complete": record.complete, "note": record.note,
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "overview": overview(record), "sections": sections, "lists": lists(summary),
    }
    (out / "report.md").write_text(_environment(False).get_template("report.md.j2").render(**context))
    (out / "report.html").write_text(_environment(True).get_template("report.html.j2").render(**context))
    written["md"], written["html"] = out / "report.md", out / "report.html"
    return written
